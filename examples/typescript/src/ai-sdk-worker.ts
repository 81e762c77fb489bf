// The AI SDK agent's worker (src/ai-sdk-agent.ts), run by crashtest as any worker command (the
// address, namespace and task queue from the environment: src/worker.ts's `runWorker`); the
// model an OpenAI-compatible provider at MODEL_URL. Each model call the integration's activity
// makes is recorded in the examples' ledger first (`model call N`, N the turn, from the
// conversation), as src/agent.ts records its own: a call made again after a kill is paid again.
import { AiSdkPlugin } from '@temporalio/ai-sdk';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import type { LanguageModelV4, ProviderV4 } from '@ai-sdk/provider';
import * as agent from './agent';
import { runWorker } from './worker';

// The provider, each language model's calls recorded before they are made.
export function recorded(provider: ProviderV4): ProviderV4 {
  const languageModel = (id: string): LanguageModelV4 => {
    const model = provider.languageModel(id);
    return Object.assign(Object.create(model) as LanguageModelV4, {
      doGenerate: async (options: Parameters<LanguageModelV4['doGenerate']>[0]) => {
        await agent.recordModelCall(options.prompt.filter((m) => m.role === 'assistant').length);
        return model.doGenerate(options);
      },
    });
  };
  return Object.assign(Object.create(provider) as ProviderV4, { languageModel });
}

export function modelProvider(): ProviderV4 {
  const baseURL = process.env.MODEL_URL ?? 'http://127.0.0.1:1/v1';
  return recorded(createOpenAICompatible({ name: 'stub', baseURL }));
}

async function main(): Promise<void> {
  const tools = { place_order: agent.place_order, send_message: agent.send_message };
  const plugins = [new AiSdkPlugin({ modelProvider: modelProvider() })];
  await runWorker('workflows-ai-sdk-bundle.js', tools, plugins);
}

if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
