// A worker as crashtest runs one of any SDK: the server's address, the namespace and the task
// queue come from the environment (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_TASK_QUEUE);
// it polls until it is killed. Its one argument names the workflows' version (`v1`, the
// default; `v2`, `v2-patched`: src/deploys), bundled at build time (src/bundle.ts).
import { NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import { join } from 'node:path';
import * as notes from './activities';
import * as payments from './payments';
import * as agent from './agent';
import * as saga from './saga';
import { VERSIONS } from './versions';

async function main(): Promise<void> {
  const version = process.argv[2] ?? 'v1';
  if (!(version in VERSIONS)) {
    throw new Error(`no such version ${version}: one of ${Object.keys(VERSIONS).join(', ')}`);
  }
  await runWorker(`workflows-${version}-bundle.js`, {
    writeNote: notes.writeNote,
    writeNoteIn: notes.writeNoteIn,
    look_up_invoices: payments.look_up_invoices,
    charge: payments.charge,
    send_receipt: payments.send_receipt,
    call_model: agent.call_model,
    place_order: agent.place_order,
    send_message: agent.send_message,
    add_address: saga.add_address,
    add_client: saga.add_client,
    add_bank_account: saga.add_bank_account,
    undo: saga.undo,
  });
}

// Poll the task queue TEMPORAL_TASK_QUEUE of the server at TEMPORAL_ADDRESS (the proxy's, under
// crashtest) until killed, with the workflows of `bundle` (in lib/) and `activities`.
export async function runWorker(
  bundle: string,
  activities: WorkerOptions['activities'],
  plugins: WorkerOptions['plugins'] = [],
): Promise<void> {
  const connection = await NativeConnection.connect({
    address: process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233',
  });
  const worker = await Worker.create({
    connection,
    namespace: process.env.TEMPORAL_NAMESPACE ?? 'default',
    taskQueue: process.env.TEMPORAL_TASK_QUEUE ?? 'typescript-notes',
    workflowBundle: { codePath: join(__dirname, bundle) },
    activities,
    plugins,
    stickyQueueScheduleToStartTimeout: '1 second',
  });
  await worker.run();
}

if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
