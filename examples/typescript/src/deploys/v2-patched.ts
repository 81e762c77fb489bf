// TwoNotes, version 2, deployed right: the new wait is behind `patched`, so a run in flight
// replays version 1's path and only new runs wait.
import { patched, proxyActivities, sleep, workflowInfo } from '@temporalio/workflow';
import type * as activities from '../activities';

const { writeNote, writeNoteIn } = proxyActivities<typeof activities>({ startToCloseTimeout: '2 seconds' });

export async function TwoNotes(texts: string[]): Promise<number> {
  if (patched('wait-first')) {
    await sleep('10 milliseconds');
  }
  for (const text of texts) {
    await writeNote(text);
  }
  return texts.length;
}

// NoteAfterADay, version 2, deployed right: the new first note behind `patched`, so a run that
// scheduled version 1's replays it, sleeps on and writes its second note.
export async function NoteAfterADay(texts: string[]): Promise<number> {
  if (patched('note-in')) {
    await writeNoteIn(workflowInfo().workflowId, texts[0].toUpperCase());
  } else {
    await writeNote(texts[0]);
  }
  await sleep('1 day');
  await writeNote(texts[1]);
  return texts.length;
}
