// Bundle the workflow code once, at build time: a worker started from the bundle does not run
// webpack at each start (the crash test starts one after every kill). One bundle per version of
// the workflows (src/versions.ts), and the AI SDK agent's.
import { bundleWorkflowCode } from '@temporalio/worker';
import { AiSdkPlugin } from '@temporalio/ai-sdk';
import { modelProvider } from './ai-sdk-worker';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { VERSIONS } from './versions';

async function main(): Promise<void> {
  for (const [version, path] of Object.entries(VERSIONS)) {
    const { code } = await bundleWorkflowCode({ workflowsPath: require.resolve(path) });
    writeFileSync(join(__dirname, `workflows-${version}-bundle.js`), code);
  }
  // The AI SDK agent's, bundled as its plugin bundles it (the Web APIs `ai` needs, first): a
  // bundle of its own, so that the other workers do not load the AI SDK at each start.
  const { code } = await bundleWorkflowCode({
    workflowsPath: require.resolve('./ai-sdk-agent'),
    plugins: [new AiSdkPlugin({ modelProvider: modelProvider() })],
  });
  writeFileSync(join(__dirname, 'workflows-ai-sdk-bundle.js'), code);
}

if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
