// Temporal's `saga` sample, as examples/shapes/saga.py writes it: add the address, add the
// client, then the bank account — which fails on every attempt until its schedule-to-close window
// closes — and once it failed for good, undo what was done. Each effect is a row of the Python
// examples' ledger (`example_effects`, DATABASE_URL), so examples.shapes.ledger:effects_of reads
// either language's run; SAGA_KEYED=1 keys each by `workflow id:activity id`.
import { ApplicationFailure, Context } from '@temporalio/activity';
import { withTables } from './db';

const SCHEMA = `
create table if not exists example_effects (
    id bigserial primary key,
    workflow_id text not null,
    what text not null,
    idempotency_key text unique
);
`;

async function record(what: string): Promise<void> {
  const info = Context.current().info;
  const workflowId = info.workflowExecution?.workflowId ?? '';
  const key = process.env.SAGA_KEYED ? `${workflowId}:${info.activityId}` : null;
  const pool = await withTables('example-effects', SCHEMA);
  await pool.query(
    'insert into example_effects (workflow_id, what, idempotency_key) values ($1, $2, $3) ' +
      'on conflict (idempotency_key) do nothing',
    [workflowId, what, key],
  );
}

export async function add_address(account: string): Promise<void> {
  await record(`address of ${account}`);
}

export async function add_client(account: string): Promise<void> {
  await record(`client of ${account}`);
}

export async function add_bank_account(account: string): Promise<void> {
  throw ApplicationFailure.create({ message: `add bank account failed for ${account}` });
}

export async function undo(what: string): Promise<void> {
  await record(`undo ${what}`);
}
