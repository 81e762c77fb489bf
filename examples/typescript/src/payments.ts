// The payments activities of examples/payments, in TypeScript: a read, a charge per invoice, a
// receipt, each effect a row in the same Postgres tables (DATABASE_URL), so that the same Python
// observer (examples.payments.observe:payments_of) reads what either language's run left. With
// PAYMENTS_KEYED=1 a charge is keyed by `workflow id:activity id` (`on conflict do nothing`), as
// the Python keyed_worker's; the receipt is always keyed, as there.
import { createHash } from 'node:crypto';
import { Context } from '@temporalio/activity';
import { withTables } from './db';
import type { Charge, ChargeInput, Invoice, PaymentRequest, ReceiptInput } from './payment-types';

const SCHEMA = `
create table if not exists payment_charges (
    id bigserial primary key,
    workflow_id text not null,
    customer text not null,
    invoice text not null,
    amount_cents int not null,
    idempotency_key text unique
);
create table if not exists payment_receipts (
    id bigserial primary key,
    workflow_id text not null,
    recipient text not null,
    body text not null,
    idempotency_key text unique
);
`;

const db = () => withTables('payments-schema', SCHEMA);

// An activity started by a workflow has its workflow's id.
function workflowId(): string {
  return Context.current().info.workflowExecution?.workflowId ?? '';
}

function key(): string {
  return `${workflowId()}:${Context.current().info.activityId}`;
}

// Read-only: each invoice's amount (the same made-up figure as the Python version's).
export async function look_up_invoices(request: PaymentRequest): Promise<Invoice[]> {
  return request.invoices.map((number) => {
    const digest = BigInt('0x' + createHash('sha256').update(number).digest('hex'));
    return { number, amount_cents: 500 + Number(digest % 5000n) };
  });
}

export async function charge(data: ChargeInput): Promise<Charge> {
  const keyed = process.env.PAYMENTS_KEYED ? key() : null;
  const conn = await db();
  let found = await conn.query(
    'insert into payment_charges (workflow_id, customer, invoice, amount_cents, idempotency_key)' +
      ' values ($1, $2, $3, $4, $5) on conflict (idempotency_key) do nothing returning id',
    [workflowId(), data.customer, data.invoice.number, data.invoice.amount_cents, keyed],
  );
  if (found.rows.length === 0) {
    // charged before under this key: that charge stands
    found = await conn.query('select id from payment_charges where idempotency_key = $1', [key()]);
  }
  return {
    charge_id: Number(found.rows[0].id),
    invoice: data.invoice.number,
    amount_cents: data.invoice.amount_cents,
  };
}

export async function send_receipt(data: ReceiptInput): Promise<number> {
  const total = data.charges.reduce((sum, c) => sum + c.amount_cents, 0);
  const body = `${data.charges.length} invoices paid, ${(total / 100).toFixed(2)} in all`;
  const conn = await db();
  let found = await conn.query(
    'insert into payment_receipts (workflow_id, recipient, body, idempotency_key)' +
      ' values ($1, $2, $3, $4) on conflict (idempotency_key) do nothing returning id',
    [workflowId(), `${data.customer}@example.com`, body, key()],
  );
  if (found.rows.length === 0) {
    found = await conn.query('select id from payment_receipts where idempotency_key = $1', [key()]);
  }
  return Number(found.rows[0].id);
}
