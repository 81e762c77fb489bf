// The versions of the workflows a worker runs, by its argument (src/worker.ts), each bundled at
// build time (src/bundle.ts): `workflows` (version 1), the deploys' version 2 (`deploys/v2`,
// unpatched, and `deploys/v2-patched`).
export const VERSIONS: Record<string, string> = {
  v1: './workflows',
  v2: './deploys/v2',
  'v2-patched': './deploys/v2-patched',
};
