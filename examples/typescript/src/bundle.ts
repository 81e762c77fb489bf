// Bundle the workflow code once, at build time: a worker started from the bundle does not run
// webpack at each start (the crash test starts one after every kill). One bundle per version of
// the workflows: `workflows` (version 1), and the deploys' version 2 (`deploys/v2`, unpatched,
// and `deploys/v2-patched`).
import { bundleWorkflowCode } from '@temporalio/worker';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const VERSIONS: Record<string, string> = {
  v1: './workflows',
  v2: './deploys/v2',
  'v2-patched': './deploys/v2-patched',
};

async function main(): Promise<void> {
  for (const [version, path] of Object.entries(VERSIONS)) {
    const { code } = await bundleWorkflowCode({ workflowsPath: require.resolve(path) });
    writeFileSync(join(__dirname, `workflows-${version}-bundle.js`), code);
  }
}

if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
