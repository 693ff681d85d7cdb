import type { PolicyOutput } from '../core/types.ts';
import type { Policy, PolicyRequest } from '../policy/policy.ts';

/**
 * The remote client as the episode's policy. The episode machine calls act() when it wants the
 * next action; the promise resolves when the client sends its step (answer()), or rejects when the
 * client is gone (end()). Everything else — parsing, budgets, tools and their timeouts, the ToolEnv,
 * the world machine, the record — is the rollout's own code, unchanged.
 */
export class ClientPolicy implements Policy {
  readonly id: string;
  readonly version: string;
  private pending: { resolve(output: PolicyOutput): void; reject(err: Error): void } | undefined;
  private ended: Error | undefined;

  /** `onTurn` is told each time the episode waits for the client (the request holds the history so far). */
  constructor(
    name: string,
    version: string,
    private readonly onTurn: (request: PolicyRequest) => void,
  ) {
    this.id = `remote:${name}`;
    this.version = version;
  }

  act(request: PolicyRequest): Promise<PolicyOutput> {
    if (this.ended) return Promise.reject(this.ended);
    return new Promise((resolve, reject) => {
      this.pending = { resolve, reject };
      this.onTurn(request);
    });
  }

  /** True while the episode waits for the client's action. */
  get waiting(): boolean {
    return this.pending !== undefined;
  }

  /** The client's action for the turn the episode waits on. */
  answer(output: PolicyOutput): void {
    const pending = this.pending;
    if (!pending) throw new Error('the episode is not waiting for an action');
    this.pending = undefined;
    pending.resolve(output);
  }

  /** The client is gone: the waiting turn, and any later one, fails with `reason` (the record says why). */
  end(reason: Error): void {
    this.ended ??= reason;
    const pending = this.pending;
    this.pending = undefined;
    pending?.reject(this.ended);
  }
}
