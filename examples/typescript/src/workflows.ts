// TwoNotes: one note per text, in order, each an activity (a 2 s attempt: a killed worker's is
// retried soon). PaymentsWorkflow: examples/payments' workflow, and OrderAgent:
// examples/order_agent.py's, each with the same activity names and options, so that its
// boundaries are labelled as the Python version's.
import {
  continueAsNew,
  executeChild,
  proxyActivities,
  sleep,
  workflowInfo,
} from '@temporalio/workflow';
import type * as activities from './activities';
import type * as payments from './payments';
import type * as agent from './agent';
import type * as saga from './saga';
import type { Charge, PaymentRequest } from './payment-types';

const { writeNote, writeNoteIn } = proxyActivities<typeof activities>({
  startToCloseTimeout: '2 seconds',
});

export async function TwoNotes(texts: string[]): Promise<number> {
  for (const text of texts) {
    await writeNote(text);
  }
  return texts.length;
}

// NoteAfterADay: a note, a day's sleep, another — Temporal's `patching-api` sample's shape
// (activityA, sleep('1 days'), activityThatMustRunAfterA). Crash-tested in no real time (time
// skipping); deployed to src/deploys' versions while a run sleeps.
export async function NoteAfterADay(texts: string[]): Promise<number> {
  await writeNote(texts[0]);
  await sleep('1 day');
  await writeNote(texts[1]);
  return texts.length;
}

export async function OneNote(file: string, text: string): Promise<void> {
  await writeNoteIn(file, text);
}

// The first note from a child workflow, the rest from the run this one continues as: a crash
// point in a child, and one in a later run of the chain (crashtest's apps/command_worker.py).
export async function NotesInATree(texts: string[]): Promise<number> {
  const root = workflowInfo().workflowId; // each note lands in the root's notes
  if (texts.length > 1) {
    await executeChild(OneNote, { args: [root, texts[0]] });
    await continueAsNew<typeof NotesInATree>(texts.slice(1));
  }
  for (const text of texts) {
    await writeNoteIn(root, text);
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

const { call_model, place_order, send_message } = proxyActivities<typeof agent>({
  startToCloseTimeout: '30 seconds',
  heartbeatTimeout: '2 seconds',
  retry: { initialInterval: '200 milliseconds' },
});
const TOOLS: Record<string, (...args: never[]) => Promise<string>> = { place_order, send_message };
const TURNS = 5; // a model that keeps calling tools is stopped here

// Ask the model what to do, run the tools it calls one after another, ask again until it answers
// in words.
export async function OrderAgent(item: string): Promise<string> {
  const messages: agent.Message[] = [{ role: 'user', content: `order ${item}` }];
  for (let turn = 0; turn < TURNS; turn++) {
    const reply = await call_model(messages);
    messages.push(reply);
    if (!reply.tool_calls?.length) {
      return reply.content ?? '';
    }
    for (const call of reply.tool_calls) {
      const args = Object.values(JSON.parse(call.function.arguments)) as never[];
      const result = await TOOLS[call.function.name](...args);
      messages.push({ role: 'tool', tool_call_id: call.id, content: result });
    }
  }
  return 'the model kept calling tools';
}

// Temporal's saga sample (examples/shapes/saga.py's OpenAccount, with its options): the bank
// account fails on every attempt until its 8 s window closes; then undo, in reverse order.
const steps = proxyActivities<typeof saga>({
  startToCloseTimeout: '30 seconds',
  heartbeatTimeout: '2 seconds',
  retry: { initialInterval: '200 milliseconds', maximumAttempts: 5 },
});
const { add_bank_account } = proxyActivities<typeof saga>({
  startToCloseTimeout: '4 seconds',
  scheduleToCloseTimeout: '8 seconds',
  retry: { initialInterval: '200 milliseconds', backoffCoefficient: 8 },
});

export async function OpenAccount(account: string): Promise<void> {
  const done: string[] = [];
  try {
    await steps.add_address(account);
    done.unshift(`address of ${account}`);
    await steps.add_client(account);
    done.unshift(`client of ${account}`);
    await add_bank_account(account);
  } catch (err) {
    for (const what of done) {
      await steps.undo(what);
    }
    throw err;
  }
}
