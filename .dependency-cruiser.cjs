// The layer rule, checked by `npm run lint` (and so by CI): code imports only from its own layer or
// the layers below it, and nothing imports in a cycle. Bottom to top:
const layers = [
  ['core', '^src/core/'],
  ['tools, parsing, records', '^src/(tools|parse|record)/'],
  ['models: file formats, architectures, Hugging Face folders', '^src/(formats|architectures|hf)/'],
  ['the ToolEnv', '^src/env/'],
  ['policies', '^src/policy/'],
  ['scenarios (the contract)', '^src/scenario/'],
  ['tools from MCP servers', '^src/mcp/'],
  ['the episode machine and its drivers', '^(machines|src/episode)/'],
  ['rollouts and replay', '^src/(rollout|replay)/'],
  ['the job queue (rollouts across machines)', '^src/queue/'],
  ['training and interop', '^src/(rl|openai|export|env-server)/'],
  ['the gateway (agents of any framework, trained through their OpenAI client)', '^src/gateway/'],
  ['the viewer', '^src/view/'],
  ['the application: pipelines, CLI, worker entries', '^(src/app|src/cli|workers)/'],
];

const upward = layers.slice(0, -1).map(([name, path], i) => ({
  name: `no-upward-from-${name.replace(/\W+/g, '-')}`,
  comment: `${name} must not import from a layer above it`,
  severity: 'error',
  from: { path },
  to: { path: layers.slice(i + 1).map(([, p]) => p) },
}));

module.exports = {
  forbidden: [
    { name: 'no-circular', severity: 'error', from: {}, to: { circular: true } },
    ...upward,
    {
      name: 'no-barrel-inside',
      comment: 'library code imports modules, not the public entry points (src/index.ts and the subpath indexes)',
      severity: 'error',
      from: { path: '^(src|machines)/' },
      to: {
        path: '^src/(index|rl/index|openai/index|view/index|env-server/index|policy/tfjs/index|policy/hf/index|queue/index|mcp/index|gateway/index)\\.ts$',
      },
    },
    {
      name: 'no-builtin-scenarios-in-the-library',
      comment: 'the library takes a scenario registry; only the CLI and the workers know the built-in scenarios',
      severity: 'error',
      from: { path: '^(src|machines)/', pathNot: '^src/cli/' },
      to: { path: '^scenarios/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(node_modules|dist)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['source', 'import', 'default'] },
  },
};
