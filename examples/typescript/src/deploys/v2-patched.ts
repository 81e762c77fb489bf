// TwoNotes, version 2, deployed right: the new wait is behind `patched`, so a run in flight
// replays version 1's path and only new runs wait.
import { patched, proxyActivities, sleep } from '@temporalio/workflow';
import type * as activities from '../activities';

const { writeNote } = proxyActivities<typeof activities>({ startToCloseTimeout: '2 seconds' });

export async function TwoNotes(texts: string[]): Promise<number> {
  if (patched('wait-first')) {
    await sleep('10 milliseconds');
  }
  for (const text of texts) {
    await writeNote(text);
  }
  return texts.length;
}
