import { createHash, randomBytes } from 'node:crypto';
import { canonicalJson } from '../core/canonical-json.ts';
import type { EpisodeRecord, Task } from '../core/types.ts';
import type { ServedPolicy } from '../openai/chat-format.ts';
import type { TurnAnswerer } from '../openai/completions.ts';
import { ChatServer } from '../openai/server.ts';
import type { Policy } from '../policy/policy.ts';
import type { EpisodeSource } from '../rl/trainer.ts';
import type { AgentModule } from './agent-module.ts';
import { AGENT_SCENARIO_ID } from '../record/agent.ts';
import { DemonstratorAnswerer } from './demonstrator-answerer.ts';
import { Gateway, policyAnswerer } from './gateway.ts';
import { playAgent, summarizeAgentRecords } from './play-agent.ts';

export interface AgentSessionOptions {
  agent: AgentModule;
  /** Every task the run may use, of every split. */
  tasks: readonly Task[];
  seed: number;
  /** An agent run that has not returned by then is written as failed (default 120 s). */
  timeoutMs?: number;
  /** Agent runs at once (default: all of a play). */
  concurrency?: number;
  maxTurns?: number;
  maxTokensPerTurn?: number;
}

/** The model id an agent's client names in training (any name would do: the gateway serves one model). */
export const AGENT_MODEL_NAME = 'agent-r1';

/**
 * An agent and its tasks behind an in-process recording gateway on a loopback port: each play runs
 * the agent on tasks against a given answerer (the policy being trained, or a demonstrator) and
 * returns the records. The trainer's EpisodeSource for `train --agent`.
 */
export class AgentSession {
  readonly identity: EpisodeSource['identity'];
  readonly runId: string;
  private readonly gateway: Gateway;
  private readonly server: ChatServer;
  private readonly apiKey = randomBytes(16).toString('hex');
  private evals = 0;

  private constructor(private readonly options: AgentSessionOptions) {
    const tasksDigest = createHash('sha256').update(canonicalJson(options.tasks)).digest('hex').slice(0, 16);
    this.identity = { id: AGENT_SCENARIO_ID, version: options.agent.version, options: { tasks: tasksDigest } };
    this.runId = `agent-${createHash('sha256')
      .update(canonicalJson([options.agent.version, tasksDigest, options.seed]))
      .digest('hex')
      .slice(0, 12)}`;
    this.gateway = new Gateway({
      modelName: AGENT_MODEL_NAME,
      runId: this.runId,
      agent: this.identity,
      sampling: 'policy',
      maxTurns: options.maxTurns,
      maxTokensPerTurn: options.maxTokensPerTurn,
      onRecord: () => {},
    });
    this.server = new ChatServer({ gateway: this.gateway, apiKey: this.apiKey });
  }

  static async open(options: AgentSessionOptions): Promise<AgentSession> {
    const session = new AgentSession(options);
    await session.server.listen(0, '127.0.0.1');
    return session;
  }

  tasksOf(split: string): Task[] {
    return this.options.tasks.filter((t) => t.split === split);
  }

  /** Runs the agent on `tasks` × `group` against `answerer`; the records in episode order. */
  async play(request: {
    answerer: TurnAnswerer;
    tasks: readonly Task[];
    group: number;
    seed: number;
    indexOffset?: number;
    idPrefix?: string;
  }): Promise<EpisodeRecord[]> {
    this.gateway.setAnswerer(request.answerer);
    return playAgent({
      agent: this.options.agent,
      gateway: this.gateway,
      client: { baseURL: this.server.url, apiKey: this.apiKey, model: AGENT_MODEL_NAME },
      tasks: request.tasks,
      group: request.group,
      seed: request.seed,
      indexOffset: request.indexOffset,
      idPrefix: request.idPrefix,
      concurrency: this.options.concurrency,
      timeoutMs: this.options.timeoutMs ?? 120_000,
    });
  }

  /** The agent's demonstrations: its runs on `tasks` answered by its module's demonstrator. */
  demonstrations(tasks: readonly Task[], seed: number): Promise<EpisodeRecord[]> {
    const { demonstrator, version } = this.options.agent;
    if (!demonstrator) throw new Error('the agent module exports no demonstrator');
    return this.play({
      answerer: new DemonstratorAnswerer(demonstrator, version, AGENT_MODEL_NAME),
      tasks,
      group: 1,
      seed,
      idPrefix: 'demo.',
    });
  }

  /** The trainer's episode source: training plays are numbered by the run; each eval plays the split's first tasks. */
  source(): EpisodeSource {
    return {
      identity: this.identity,
      tasks: async ({ split, count }) => this.tasksOf(split).slice(0, count),
      play: async (request) => {
        const training = request.tasks !== undefined;
        const tasks = request.tasks ?? this.tasksOf(request.split).slice(0, request.episodes);
        const records = await this.play({
          answerer: policyAnswerer(servedPolicy(request.policy), AGENT_MODEL_NAME),
          tasks,
          group: request.group ?? 1,
          seed: request.seed,
          indexOffset: request.indexOffset,
          ...(training ? {} : { idPrefix: `eval${this.evals++}.` }),
        });
        return { records, summary: summarizeAgentRecords(records) };
      },
    };
  }

  async close(): Promise<void> {
    await this.server.close();
    await this.gateway.close();
  }
}

/** A trainer's rollout policy as the gateway serves it (the GPT's and a Hugging Face model's are servable). */
function servedPolicy(policy: Policy): ServedPolicy {
  const p = policy as Partial<ServedPolicy>;
  if (!('sampling' in p) || !('model' in p)) throw new Error(`policy ${policy.id} cannot be served by the gateway`);
  return policy as ServedPolicy;
}
