// The order agent's activities (examples/order_agent.py, in TypeScript): a model call to an
// OpenAI-compatible provider at MODEL_URL, and two tools. Each effect is a row in the examples'
// ledger (example_effects, at DATABASE_URL), as the Python agent's: a model call (`model call
// N`, N the turn, from the conversation) never keyed, each tool's effect keyed by `workflow
// id:activity id` with AGENT_KEYED=1, else not.
import { Context } from '@temporalio/activity';
import { withTables } from './db';

export interface Message {
  role: string;
  content: string | null;
  tool_calls?: { id: string; type: string; function: { name: string; arguments: string } }[];
  tool_call_id?: string;
}

const SCHEMA = `
create table if not exists example_effects (
    id bigserial primary key,
    workflow_id text not null,
    what text not null,
    idempotency_key text unique
);
`;

// Take the effect `what` for this activity's workflow, once per key (unkeyed: every time).
async function take(what: string, keyed: boolean): Promise<void> {
  const info = Context.current().info;
  const workflowId = info.workflowExecution?.workflowId ?? '';
  const key = keyed ? `${workflowId}:${info.activityId}` : null;
  await (await withTables('example-effects', SCHEMA)).query(
    'insert into example_effects (workflow_id, what, idempotency_key) values ($1, $2, $3)' +
      ' on conflict (idempotency_key) do nothing',
    [workflowId, what, key],
  );
}

// A model call about to be made, after `answered` answers: paid for, never keyed.
export async function recordModelCall(answered: number): Promise<void> {
  await take(`model call ${1 + answered}`, false);
}

export async function call_model(messages: Message[]): Promise<Message> {
  await recordModelCall(messages.filter((m) => m.role === 'assistant').length);
  const url = `${(process.env.MODEL_URL ?? '').replace(/\/$/, '')}/chat/completions`;
  const reply = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: 'stub', messages }),
  });
  if (!reply.ok) {
    throw new Error(`the model answered ${reply.status}`);
  }
  const body = (await reply.json()) as { choices: { message: Message }[] };
  return body.choices[0].message;
}

export async function place_order(item: string, quantity: number): Promise<string> {
  await take(`order ${quantity} x ${item}`, Boolean(process.env.AGENT_KEYED));
  return `ordered ${quantity} x ${item}`;
}

export async function send_message(to: string, text: string): Promise<string> {
  await take(`message to ${to}: ${text}`, Boolean(process.env.AGENT_KEYED));
  return `told ${to}`;
}
