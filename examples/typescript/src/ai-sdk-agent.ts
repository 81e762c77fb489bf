// The order agent (examples/order_agent.py, src/agent.ts) written with the AI SDK through
// Temporal's integration, @temporalio/ai-sdk: `generateText` asks the model, runs the tools its
// reply calls, and asks again. The model call is the integration's activity (`invokeModel`), each
// tool an activity of src/agent.ts (the same names and options as the hand-written agent's).
import { generateText, stepCountIs, tool } from 'ai';
import { TemporalProvider } from '@temporalio/ai-sdk/workflow';
import { type ActivityOptions, proxyActivities } from '@temporalio/workflow';
import { z } from 'zod';
import type * as agent from './agent';

// A killed worker is noticed after 2 s (the activities are quick, so they need not heartbeat).
const OPTIONS: ActivityOptions = {
  startToCloseTimeout: '30 seconds',
  heartbeatTimeout: '2 seconds',
  retry: { initialInterval: '200 milliseconds' },
};
const { place_order, send_message } = proxyActivities<typeof agent>(OPTIONS);
const model = new TemporalProvider({ languageModel: OPTIONS }).languageModel('stub');
const TURNS = 5; // a model that keeps calling tools is stopped here

export async function AiSdkOrderAgent(item: string): Promise<string> {
  const { text } = await generateText({
    model,
    prompt: `order ${item}`,
    tools: {
      place_order: tool({
        description: 'Order groceries',
        inputSchema: z.object({ item: z.string(), quantity: z.number() }),
        execute: async ({ item, quantity }) => place_order(item, quantity),
      }),
      send_message: tool({
        description: 'Tell someone something',
        inputSchema: z.object({ to: z.string(), text: z.string() }),
        execute: async ({ to, text }) => send_message(to, text),
      }),
    },
    stopWhen: stepCountIs(TURNS),
  });
  return text;
}
