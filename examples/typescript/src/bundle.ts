// Bundle the workflow code once, at build time: a worker started from the bundle does not run
// webpack at each start (the crash test starts one after every kill).
import { bundleWorkflowCode } from '@temporalio/worker';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

async function main(): Promise<void> {
  const { code } = await bundleWorkflowCode({ workflowsPath: require.resolve('./workflows') });
  writeFileSync(join(__dirname, 'workflows-bundle.js'), code);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
