// One note per text, in order, each an activity (a 2 s attempt: a killed worker's is retried
// soon).
import { proxyActivities } from '@temporalio/workflow';
import type * as activities from './activities';

const { writeNote } = proxyActivities<typeof activities>({ startToCloseTimeout: '2 seconds' });

export async function TwoNotes(texts: string[]): Promise<number> {
  for (const text of texts) {
    await writeNote(text);
  }
  return texts.length;
}
