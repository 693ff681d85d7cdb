import type { Task } from '../core/types.ts';
import type { InitContext, ToolEnv } from '../env/tool-env.ts';
import { syncEffects } from '../scenario/effects.ts';
import { McpEpisode, type FilesEffect } from './episode.ts';
import { makeScratch, readFolder, removeScratch, type FolderContents } from './scratch.ts';
import type { McpServer } from './server.ts';

/** The ToolEnv state of an episode whose tools come from an MCP server. */
export interface McpState {
  mcp: McpEpisode;
}

/** A ToolEnv for MCP tools: yours, with `setup` for the episode's folder; its state gets the `mcp` field. */
export interface McpToolEnv<TTask extends Task, TState extends object>
  extends Omit<ToolEnv<TTask, TState & McpState>, 'init' | 'dispose'> {
  /**
   * Writes the episode's starting files into its scratch folder, before its server sees it. Run in
   * replay too (on a folder no server sees), so the folder's contents are known there as well.
   */
  setup?(task: TTask, dir: string, ctx: InitContext): void | Promise<void>;
  /** Your own per-episode state; `mcp` is added to it. */
  init?(task: TTask, ctx: InitContext): TState | Promise<TState>;
  dispose?(state: TState & McpState): void | Promise<void>;
}

/**
 * Gives each episode its server (per the server's isolation: its own process, a spare one, a warm
 * one moved to its folder, or a shared one), from `init` to `dispose`, which gives it back also after
 * errors and interruptions. Replayed episodes start no server: their results come from the record,
 * and the folder's recorded changes are applied in `step` before yours runs, so `state.mcp.files`
 * is the same there as it was live.
 */
export function mcpEnv<TTask extends Task, TState extends object = Record<never, never>>(
  server: McpServer,
  env: McpToolEnv<TTask, TState>,
): ToolEnv<TTask, TState & McpState> {
  const { setup, init, dispose, ...rest } = env;
  return {
    ...rest,
    init: async (task, ctx) => {
      let episode: McpEpisode;
      if (ctx.tools === 'live') {
        const lease = await server.lease(setup ? (dir) => setup(task, dir, ctx) : undefined);
        try {
          const files = server.trackFiles && lease.scratch !== undefined ? await readFolder(lease.scratch) : {};
          episode = new McpEpisode(server, files, lease);
        } catch (err) {
          await lease.release();
          throw err;
        }
      } else {
        episode = new McpEpisode(server, server.trackFiles ? await setupFiles(task, ctx) : {}, undefined);
      }
      try {
        const own = init ? await init(task, ctx) : ({} as TState);
        return Object.assign(own, { mcp: episode });
      } catch (err) {
        await episode.close();
        throw err;
      }
    },
    step: (input) => {
      const episode = input.state.mcp;
      // In replay the calls did not run: the folder catches up with what they did.
      syncEffects(episode, input.results, (e: FilesEffect) => episode.apply(e));
      return rest.step(input);
    },
    dispose: async (state) => {
      try {
        await dispose?.(state);
      } finally {
        await state?.mcp?.close();
      }
    },
  };

  async function setupFiles(task: TTask, ctx: InitContext): Promise<FolderContents> {
    if (!setup || !server.hasScratch) return {};
    const dir = makeScratch();
    try {
      await setup(task, dir, ctx);
      return await readFolder(dir);
    } finally {
      removeScratch(dir);
    }
  }
}
