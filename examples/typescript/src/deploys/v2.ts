// TwoNotes, version 2, deployed wrong: it now waits a moment before its first note, unpatched.
// A run in flight that a version 2 worker takes over replays version 1's history, which has an
// activity where this code starts a timer: the SDK fails its workflow task (nondeterminism),
// and the run is stuck until a version 1 worker takes it.
import { proxyActivities, sleep } from '@temporalio/workflow';
import type * as activities from '../activities';

const { writeNote } = proxyActivities<typeof activities>({ startToCloseTimeout: '2 seconds' });

export async function TwoNotes(texts: string[]): Promise<number> {
  await sleep('10 milliseconds');
  for (const text of texts) {
    await writeNote(text);
  }
  return texts.length;
}
