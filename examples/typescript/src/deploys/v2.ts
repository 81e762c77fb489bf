// TwoNotes, version 2, deployed wrong: it now waits a moment before its first note, unpatched.
// A run in flight that a version 2 worker takes over replays version 1's history, which has an
// activity where this code starts a timer: the SDK fails its workflow task (nondeterminism),
// and the run is stuck until a version 1 worker takes it.
import { proxyActivities, sleep, workflowInfo } from '@temporalio/workflow';
import type * as activities from '../activities';

const { writeNote, writeNoteIn } = proxyActivities<typeof activities>({ startToCloseTimeout: '2 seconds' });

export async function TwoNotes(texts: string[]): Promise<number> {
  await sleep('10 milliseconds');
  for (const text of texts) {
    await writeNote(text);
  }
  return texts.length;
}

// NoteAfterADay, version 2, deployed wrong: its first note is now another activity
// (`writeNoteIn`), unpatched — as the `patching-api` sample's activityA becomes activityB. A
// run that scheduled the first note on version 1, asleep or not, replays on version 2 into an
// activity of another type: nondeterminism, the run stuck.
export async function NoteAfterADay(texts: string[]): Promise<number> {
  await writeNoteIn(workflowInfo().workflowId, texts[0].toUpperCase());
  await sleep('1 day');
  await writeNote(texts[1]);
  return texts.length;
}
