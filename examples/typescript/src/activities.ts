// The hello activity of crashtest's notes app, in TypeScript: append a line to a file (an effect
// outside any database). With NOTES_KEYED=1 it first looks for its key (workflow id:activity id)
// there, so a retried attempt writes nothing twice.
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Context } from '@temporalio/activity';

// A note in this workflow's own notes.
export async function writeNote(text: string): Promise<void> {
  await writeNoteIn(Context.current().info.workflowExecution?.workflowId ?? '', text);
}

// A note in the notes of the run `file` (a child's in its root's), keyed by the workflow that
// writes it.
export async function writeNoteIn(file: string, text: string): Promise<void> {
  const info = Context.current().info;
  const path = join(process.env.NOTES_DIR ?? '.', `${file}.txt`);
  const key = `${info.workflowExecution?.workflowId ?? ''}:${info.activityId}`;
  if (process.env.NOTES_KEYED && existsSync(path) && readFileSync(path, 'utf8').includes(key)) {
    return;
  }
  appendFileSync(path, `${key} ${text}\n`);
}
