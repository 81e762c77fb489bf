// TwoNotes: one note per text, in order, each an activity (a 2 s attempt: a killed worker's is
// retried soon). PaymentsWorkflow: examples/payments' workflow, the same activity names and
// options, so that its boundaries are labelled as the Python version's.
import { proxyActivities } from '@temporalio/workflow';
import type * as activities from './activities';
import type * as payments from './payments';
import type { Charge, PaymentRequest } from './payment-types';

const { writeNote } = proxyActivities<typeof activities>({ startToCloseTimeout: '2 seconds' });

export async function TwoNotes(texts: string[]): Promise<number> {
  for (const text of texts) {
    await writeNote(text);
  }
  return texts.length;
}

// A killed worker is noticed after 2 s (the activities are quick, so they need not heartbeat).
const { look_up_invoices, charge, send_receipt } = proxyActivities<typeof payments>({
  startToCloseTimeout: '30 seconds',
  heartbeatTimeout: '2 seconds',
  retry: { initialInterval: '200 milliseconds' },
});

export async function PaymentsWorkflow(request: PaymentRequest): Promise<number> {
  const invoices = await look_up_invoices(request);
  const charges: Charge[] = [];
  for (const invoice of invoices) {
    charges.push(await charge({ customer: request.customer, invoice }));
  }
  return await send_receipt({ customer: request.customer, charges });
}
