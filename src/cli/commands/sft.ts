import { availableParallelism } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { InvalidArgumentError, type Command } from 'commander';
import cliProgress from 'cli-progress';
import { resolvePolicy, resolveUserPolicy } from '../../app/resolve-policy.ts';
import { writeOutput } from '../../core/write-output.ts';
import { assertWritableDir } from '../../core/writable-dir.ts';
import { initBackend, type BackendInfo } from '../../policy/tfjs/backend.ts';
import { trainReplicas, type TrainThreads } from '../../rl/train-threads.ts';
import { runSft } from '../../app/run-sft.ts';
import { runHfSft } from '../../app/run-hf-sft.ts';
import type { LoraRequest } from '../../rl/hf-trainable.ts';
import { SftContextError } from '../../policy/tfjs/sft.ts';
import { CHUNKINGS, type Chunking } from '../../policy/tfjs/tokenizer.ts';
import { contextSetting } from '../../env/context.ts';
import { UnknownNameError, UsageError } from '../../core/errors.ts';
import { canonicalJson } from '../../core/canonical-json.ts';
import { builtinScenarios } from '../../../scenarios/index.ts';
import { loadAgent } from '../../gateway/agent-module.ts';
import { readTasksFile } from '../../gateway/tasks-file.ts';
import { loadRecords } from '../../record/jsonl.ts';
import type { RolloutSummary } from '../../rollout/summary.ts';
import { loadRecordScenario } from '../../scenario/load.ts';
import type { Scenario } from '../../scenario/scenario.ts';
import { runAgentSft } from '../../app/agent-sft.ts';
import { agentBudget } from '../../app/agent-start.ts';
import { hfSft, imitated, recordSequences } from '../../app/records-sft.ts';
import {
  checkSplit,
  CONTEXT_HELP,
  contextMode,
  finiteNumber,
  formatSummary,
  isHfModel,
  keyValue,
  integer,
  LORA_HELP,
  loraAlpha,
  loraRequest,
  modelInit,
  nonNegativeNumber,
  positiveInt,
  printJson,
  scenarioFromFlags,
  TRAIN_THREADS_HELP,
  trainThreadCount,
  kernelTrainThreads,
} from '../common.ts';

interface SftFlags {
  scenario?: string;
  agent?: string;
  tasks?: string;
  records?: string;
  minReward?: number;
  policy: string;
  role?: string;
  userPolicy?: string;
  init?: string;
  lora?: number;
  loraAlpha?: number;
  episodes: number;
  seed: number;
  out: string;
  steps: number;
  batchSize: number;
  microbatch: number;
  lr?: number;
  vocabSize: number;
  dModel: number;
  /** false with --no-copy-head. */
  copyHead: boolean;
  chunking?: Chunking;
  layers: number;
  heads: number;
  contextLength: number;
  context?: string;
  evalEpisodes: number;
  temperature: number;
  backend?: string;
  trainThreads?: number;
  data?: string;
  option?: string[];
  json?: boolean;
}

const positiveNumber = (v: string): number => {
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError('expected a positive number');
  return n;
};

function chunking(value: string): Chunking {
  if (!(CHUNKINGS as string[]).includes(value))
    throw new InvalidArgumentError(`expected one of ${CHUNKINGS.join(', ')}`);
  return value as Chunking;
}

export function register(program: Command): void {
  program
    .command('sft')
    .description(
      "behaviour cloning: a reference policy's episodes (a scenario's, your agent's demonstrator's, or recorded ones) trained into the tfjs GPT or a Hugging Face model; saves a checkpoint, evaluates on held-out tasks",
    )
    .option('--scenario <name>', "scenario name or folder: clone its --policy's episodes")
    .option(
      '--agent <file>',
      "your agent (a module or a folder with index.ts): its module's demonstrator plays the train tasks through the gateway, and --init's model learns those episodes on its own template",
    )
    .option('--tasks <file>', "with --agent: the tasks (JSONL; default: the agent folder's tasks.jsonl)")
    .option(
      '--records <file>',
      "recorded episodes to imitate (an episodes.jsonl: the gateway's, e.g. a teacher's from serve --policy openai:URL --record, or a scenario's)",
    )
    .option(
      '--min-reward <x>',
      'with --records: imitate the episodes whose reward is at least x (default: those that succeeded)',
      finiteNumber,
    )
    .requiredOption('--out <dir>', 'checkpoint directory (written atomically)')
    .option('--policy <name>', 'reference policy to clone (with --role user: the agent the user talks with)', 'expert')
    .option(
      '--role <name>',
      "whose turns are cloned: agent (the default) or user (a scenario's user, from its own view of each episode)",
    )
    .option(
      '--user-policy <spec>',
      "who plays the scenario's user in the episodes: one of its scripted users or a model (with --role user: the one cloned)",
    )
    .option(
      '--init <hf:DIR>',
      'train this Hugging Face model (hf:DIR, or ckpt:DIR of one trained here) on its own chat template instead of a new GPT (the GPT flags do not apply)',
      modelInit,
    )
    .option('--lora <R>', LORA_HELP.rank, positiveInt)
    .option('--lora-alpha <A>', LORA_HELP.alpha, loraAlpha)
    .option('--episodes <n>', 'training episodes to collect', positiveInt, 400)
    .option('--seed <n>', 'seed (data, init, batches)', integer, 0)
    .option('--steps <n>', 'optimizer steps', positiveInt, 900)
    .option('--batch-size <n>', 'sequences per step', positiveInt, 8)
    .option(
      '--microbatch <n>',
      'sequences per forward pass; their gradients are added before each update (memory: one micro-batch of activations)',
      positiveInt,
      1,
    )
    .option(
      '--lr <x>',
      'peak learning rate (default: 1e-2 for the GPT; for a Hugging Face model 1e-5, or 2e-4 with --lora)',
      positiveNumber,
    )
    .option('--vocab-size <n>', 'tokenizer vocabulary (specials + 256 bytes + merges)', positiveInt, 1024)
    .option('--d-model <n>', 'model width', positiveInt, 64)
    .option('--layers <n>', 'transformer layers', positiveInt, 2)
    .option(
      '--no-copy-head',
      'no copy head (by default the model has one, a pointer-generator: numbers and names are copied from the context)',
    )
    .option(
      '--chunking <name>',
      'tokenizer pre-tokenization: words or space-words (default: words with the copy head, else space-words)',
      chunking,
    )
    .option('--heads <n>', 'attention heads', positiveInt, 4)
    .option(
      '--context-length <n>',
      "the model's context length in tokens (default 768, train's: an MCP server's tool schemas alone make prompts of 600+ tokens)",
      positiveInt,
      768,
    )
    .option('--context <mode>', CONTEXT_HELP, contextMode)
    .option(
      '--eval-episodes <n>',
      'dev-split episodes to evaluate at the end, with seed --seed + 1 (other tasks than training) (0: none)',
      integer,
      100,
    )
    .option(
      '--temperature <x>',
      'sampling temperature saved with the checkpoint (what --policy ckpt:DIR samples with; 0: greedy)',
      nonNegativeNumber,
      0,
    )
    .option('--backend <name>', 'tensorflow-gpu | tensorflow | webgpu | wasm | cpu (default: the best that loads)')
    .option('--train-threads <n>', TRAIN_THREADS_HELP, trainThreadCount)
    .option('--data <path>', 'dataset file, for the dataset scenarios')
    .option('--option <key=value>', 'a scenario option (repeatable), e.g. --option problems=multistep', keyValue, [])
    .option('--json', 'print the result as JSON on the last stdout line')
    .action(async (flags: SftFlags) => {
      const sources = [flags.scenario && '--scenario', flags.agent && '--agent', flags.records && '--records'].filter(
        Boolean,
      );
      if (sources.length !== 1)
        throw new UsageError(
          sources.length === 0
            ? 'name what to imitate: --scenario S, --agent FILE or --records FILE'
            : `${sources.join(' and ')} cannot be combined: name one thing to imitate`,
        );
      if (flags.tasks !== undefined && !flags.agent) throw new UsageError('--tasks goes with --agent');
      if (flags.minReward !== undefined && !flags.records) throw new UsageError('--min-reward goes with --records');
      if ((flags.role !== undefined || flags.userPolicy !== undefined) && (flags.init || flags.agent || flags.records))
        throw new UsageError(
          '--role and --user-policy go with --scenario into the built-in GPT (not with --init, --agent or --records)',
        );
      if ((flags.agent || flags.records) && !flags.init)
        throw new UsageError(
          `${sources[0]} trains a Hugging Face model: give --init hf:DIR (or ckpt:DIR of one); train --agent warm-starts the GPT`,
        );
      const backend = await initBackend(flags.backend);
      process.stderr.write(`backend: ${backend.name} (${backend.reason})\n`);
      const lora = loraRequest(flags, flags.init !== undefined);
      if (flags.agent || flags.records) return recordsSftCommand(flags, backend, lora);
      if (flags.init) return hfSftCommand(flags, backend, lora);
      const { replicas, note } = trainReplicas(backend.name, flags.trainThreads ?? availableParallelism());
      if (note) process.stderr.write(`${note}\n`);
      try {
        await sftCommand(flags, backend, replicas);
      } finally {
        await replicas?.close();
      }
    });
}

async function sftCommand(flags: SftFlags, backend: BackendInfo, replicas: TrainThreads | undefined): Promise<void> {
  const scenario = await scenarioFromFlags({ ...flags, scenario: flags.scenario! });
  checkSplit(scenario, 'train');
  const teacher = await resolvePolicy(flags.policy, scenario, flags.seed);
  const role = sftRole(flags.role);
  if (role === 'user' && !scenario.user) throw new UsageError(`--role user: scenario ${scenario.id} has no user`);
  const userPolicy =
    flags.userPolicy === undefined ? undefined : await resolveUserPolicy(flags.userPolicy, scenario, flags.seed);
  const context = contextSetting(scenario, flags.context);
  // Training takes minutes; a checkpoint that cannot be saved must fail now, not after it.
  // The checkpoint is written beside --out first and renamed into place: both must take files.
  assertWritableDir(flags.out);
  assertWritableDir(dirname(resolve(flags.out)));
  const bar = new cliProgress.SingleBar(
    { stream: process.stderr, format: '{phase} {bar} {value}/{total} | {info} | ETA {eta}s', hideCursor: false },
    cliProgress.Presets.shades_classic,
  );
  let barOn = false;
  const result = await runSft({
    scenario,
    teacher,
    ...(role === 'user' ? { role } : {}),
    ...(userPolicy ? { userPolicy } : {}),
    episodes: flags.episodes,
    seed: flags.seed,
    out: flags.out,
    evalEpisodes: flags.evalEpisodes,
    sampling: { temperature: flags.temperature },
    ...(context === undefined ? {} : { episode: { context } }),
    train: {
      steps: flags.steps,
      batchSize: flags.batchSize,
      microBatch: flags.microbatch,
      lr: flags.lr ?? 1e-2,
      vocabSize: flags.vocabSize,
      model: {
        dModel: flags.dModel,
        nLayers: flags.layers,
        nHeads: flags.heads,
        contextLength: flags.contextLength,
        copyHead: flags.copyHead,
      },
      chunking: flags.chunking ?? (flags.copyHead ? 'words' : 'space-words'),
      replicas,
      onStep: (s) => {
        if (!barOn) {
          bar.start(s.totalSteps, 0, { phase: 'sft ', info: '' });
          barOn = true;
        }
        bar.update(s.step, {
          phase: 'sft ',
          info: `loss ${s.loss.toFixed(3)} | ${Math.round(s.tokensPerSecond)} tok/s | lr ${s.lr.toExponential(1)}`,
        });
      },
    },
    onPhase: (phase, detail) => {
      if (barOn) {
        bar.stop();
        barOn = false;
      }
      if (phase === 'eval') {
        bar.start(detail.episodes as number, 0, { phase: 'eval', info: `split ${detail.split}` });
        barOn = true;
      } else if (phase !== 'train') process.stderr.write(`${phase}: ${JSON.stringify(detail)}\n`);
      else
        process.stderr.write(
          `train: ${detail.records} episodes (teacher success ${(detail.teacherSuccess as number).toFixed(3)})\n`,
        );
    },
    onEvalRecord: (done) => bar.update(done),
  }).catch((err: unknown) => {
    if (!(err instanceof SftContextError)) throw err;
    const { sequences, of, longest, contextLength } = err.cut;
    throw new UsageError(
      `${sequences} of ${of} training sequences are longer than --context-length ${contextLength} (the longest: ${longest} ` +
        `tokens, ${longest - contextLength} over); cut, they would lose their last actions: pass --context-length ${longest} (or more)`,
    );
  });
  if (barOn) bar.stop();
  const { policy, ...summary } = result;
  writeOutput(join(flags.out, 'sft.json'), JSON.stringify({ ...summary, backend: backend.name }, null, 2) + '\n');
  if (flags.json) printJson({ ...summary, backend: backend.name });
  else {
    process.stdout.write(
      `saved ${flags.out} (version ${result.hash.slice(0, 12)}, ${policy.model.parameterCount()} parameters, ${result.steps} steps, ` +
        `${result.seconds.toFixed(1)} s, final loss ${result.finalLoss.toFixed(4)})\n`,
    );
    if (result.eval) process.stdout.write(formatSummary(result.eval) + '\n');
  }
}

/** `sft --init hf:DIR`: a Hugging Face model cloned on its own chat template (runHfSft). */
async function hfSftCommand(flags: SftFlags, backend: BackendInfo, lora: LoraRequest | undefined): Promise<void> {
  const scenario = await scenarioFromFlags({ ...flags, scenario: flags.scenario! });
  checkSplit(scenario, 'train');
  const teacher = await resolvePolicy(flags.policy, scenario, flags.seed);
  const context = contextSetting(scenario, flags.context);
  assertWritableDir(flags.out);
  assertWritableDir(dirname(resolve(flags.out)));
  const bar = new cliProgress.SingleBar(
    { stream: process.stderr, format: '{phase} {bar} {value}/{total} | {info} | ETA {eta}s', hideCursor: false },
    cliProgress.Presets.shades_classic,
  );
  let barOn = false;
  const result = await runHfSft({
    scenario,
    teacher,
    init: flags.init!,
    ...(lora ? { lora } : {}),
    episodes: flags.episodes,
    seed: flags.seed,
    out: flags.out,
    steps: flags.steps,
    batchSize: flags.batchSize,
    microbatch: flags.microbatch,
    lr: hfLr(flags, lora),
    ...kernelTrainThreads(flags.trainThreads),
    evalEpisodes: flags.evalEpisodes,
    temperature: flags.temperature,
    ...(context === undefined ? {} : { episode: { context } }),
    onStep: (s) => {
      if (!barOn) {
        bar.start(s.steps, 0, { phase: 'sft ', info: '' });
        barOn = true;
      }
      bar.update(s.step, { phase: 'sft ', info: `loss ${s.loss.toFixed(3)} | ${Math.round(s.tokensPerS)} tok/s` });
    },
    onPhase: (phase, detail) => {
      if (barOn) {
        bar.stop();
        barOn = false;
      }
      if (phase === 'eval') {
        bar.start(detail.episodes as number, 0, { phase: 'eval', info: `split ${detail.split}` });
        barOn = true;
      } else process.stderr.write(`${phase}: ${JSON.stringify(detail)}\n`);
    },
    onEvalRecord: (done) => bar.update(done),
  });
  if (barOn) bar.stop();
  const { policy: _policy, ...summary } = result;
  const out = { ...summary, init: flags.init, backend: backend.name };
  writeOutput(join(flags.out, 'sft.json'), JSON.stringify(out, null, 2) + '\n');
  if (flags.json) printJson(out);
  else {
    process.stdout.write(
      `saved ${flags.out} (version ${result.hash.slice(0, 12)}, from ${flags.init}, ${result.steps} steps, ` +
        `${result.seconds.toFixed(1)} s, final loss ${result.finalLoss.toFixed(4)}; policy ckpt:${flags.out})\n`,
    );
    if (result.eval) process.stdout.write(formatSummary(result.eval) + '\n');
  }
}

/** The default learning rate of a Hugging Face model: a GPT's 1e-2 would undo its pretraining in a few steps. */
const hfLr = (flags: SftFlags, lora: LoraRequest | undefined) => flags.lr ?? (lora ? 2e-4 : 1e-5);

/** `sft --agent FILE --init …` and `sft --records FILE --init …`: a Hugging Face model on an agent's episodes. */
async function recordsSftCommand(flags: SftFlags, backend: BackendInfo, lora: LoraRequest | undefined): Promise<void> {
  const init = flags.init!;
  if (!(await isHfModel(init)))
    throw new UsageError(
      `${init} is not a Hugging Face model: --agent and --records train one (hf:DIR, or ckpt:DIR of one)`,
    );
  assertWritableDir(flags.out);
  assertWritableDir(dirname(resolve(flags.out)));
  const { onStep, stop } = sftBar();
  const common = {
    init,
    ...(lora ? { lora } : {}),
    ...kernelTrainThreads(flags.trainThreads),
    seed: flags.seed,
    out: flags.out,
    steps: flags.steps,
    batchSize: flags.batchSize,
    microbatch: flags.microbatch,
    lr: hfLr(flags, lora),
    temperature: flags.temperature,
    onStep,
  };
  let out: { [key: string]: unknown };
  let evaluation: RolloutSummary | undefined;
  if (flags.agent) {
    const agent = await loadAgent(flags.agent);
    const tasksFile = flags.tasks ?? agent.tasksFile;
    if (!tasksFile) throw new UsageError(`--tasks FILE.jsonl: the tasks to demonstrate ${agent.file} on`);
    const tasks = await readTasksFile(tasksFile);
    if (!tasks.some((t) => t.split === 'train'))
      throw new UsageError(`${tasksFile} has no tasks in the "train" split to demonstrate`);
    const budget = agentBudget(false);
    const result = await runAgentSft({
      ...common,
      agent,
      tasks,
      episodes: flags.episodes,
      evalEpisodes: flags.evalEpisodes,
      maxTurns: budget.maxTurns,
      maxTokensPerTurn: budget.maxTokensPerTurn,
      onPhase: (phase, detail) => {
        stop();
        process.stderr.write(`${phase}: ${JSON.stringify(detail)}\n`);
      },
    });
    stop();
    evaluation = result.eval;
    out = { ...result, init, agent: agent.file, backend: backend.name };
  } else {
    const { records, corrupt } = await loadRecords(flags.records!);
    if (corrupt.length > 0)
      throw new UsageError(`${flags.records}: ${corrupt.length} corrupt line(s), the first: ${corrupt[0]!.message}`);
    const used = imitated(records, flags.minReward);
    const rule = flags.minReward === undefined ? 'succeeded' : `reward ≥ ${flags.minReward}`;
    process.stderr.write(`imitating ${used.length} of ${records.length} episodes (${rule})\n`);
    if (used.length === 0) throw new UsageError(`${flags.records}: no episode to imitate (none ${rule})`);
    const scenarios = new Map<string, Promise<Scenario>>();
    const { trainable: _trainable, ...result } = await hfSft(
      { ...common, meta: { records: resolve(flags.records!), rule, episodes: used.length } },
      (model) =>
        recordSequences(model, used, (record) => {
          const key = canonicalJson(record.scenario);
          if (!scenarios.has(key)) scenarios.set(key, loadRecordScenario(record.scenario, builtinScenarios, []));
          return scenarios.get(key)!;
        }),
    );
    stop();
    out = { ...result, init, records: flags.records, imitated: used.length, backend: backend.name };
  }
  writeOutput(join(flags.out, 'sft.json'), JSON.stringify(out, null, 2) + '\n');
  if (flags.json) printJson(out);
  else {
    process.stdout.write(
      `saved ${flags.out} (version ${String(out.hash).slice(0, 12)}, from ${init}, ${out.steps} steps, ` +
        `${(out.seconds as number).toFixed(1)} s, final loss ${(out.finalLoss as number).toFixed(4)}; policy ckpt:${flags.out})\n`,
    );
    if (evaluation) process.stdout.write(formatSummary(evaluation) + '\n');
  }
}

/** The SFT progress bar on stderr: `onStep` moves it, `stop` ends it before other lines are written. */
function sftBar() {
  const bar = new cliProgress.SingleBar(
    { stream: process.stderr, format: '{phase} {bar} {value}/{total} | {info} | ETA {eta}s', hideCursor: false },
    cliProgress.Presets.shades_classic,
  );
  let on = false;
  return {
    onStep: (s: { step: number; steps: number; loss: number; tokensPerS: number }) => {
      if (!on) {
        bar.start(s.steps, 0, { phase: 'sft ', info: '' });
        on = true;
      }
      bar.update(s.step, { phase: 'sft ', info: `loss ${s.loss.toFixed(3)} | ${Math.round(s.tokensPerS)} tok/s` });
    },
    stop: () => {
      if (on) bar.stop();
      on = false;
    },
  };
}

/** `--role`: the agent (the default) or the scenario's user. */
function sftRole(value: string | undefined): 'agent' | 'user' {
  if (value === undefined || value === 'agent' || value === 'user') return value ?? 'agent';
  throw new UnknownNameError('role', value, ['agent', 'user']);
}
