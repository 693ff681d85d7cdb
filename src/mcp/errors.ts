import { AgentR1Error } from '../core/errors.ts';

/** An MCP server that could not be started or connected to (the command, the URL, its handshake). */
export class McpStartError extends AgentR1Error {
  constructor(
    readonly server: string,
    readonly reason: string,
    /** The last lines the server wrote to stderr, when it is a process of ours. */
    readonly stderr = '',
    options?: ErrorOptions,
  ) {
    super(`MCP server ${server} did not start: ${reason}${stderr ? `\n  its stderr ends: ${stderr}` : ''}`, options);
  }
}

/**
 * A call to a server that is gone (it exited, was killed, or closed the connection). The episode that
 * was using it gets this as an error observation; the server is not restarted under it, since a new
 * one would not have the state the episode built.
 */
export class McpServerGoneError extends AgentR1Error {
  constructor(
    readonly server: string,
    readonly why: string,
  ) {
    super(`the MCP server ${server} is gone (${why})`);
  }
}

/** A tool result the server marked `isError`: the runner turns it into an error observation. */
export class McpToolError extends AgentR1Error {}

/** A tool list that cannot be used as asked: an unknown name in the allow-list, a clash after renaming, a bad catalog. */
export class McpCatalogError extends AgentR1Error {}

/** The server that answered is not the one the tool catalog was listed from (records would misname it). */
export class McpServerMismatchError extends AgentR1Error {
  constructor(
    readonly expected: { name: string; version: string },
    readonly found: { name: string; version: string },
    readonly catalog: string,
  ) {
    super(
      `the MCP server is ${found.name}@${found.version}, but the tool catalog (${catalog}) was listed from ` +
        `${expected.name}@${expected.version}: list it again (writeMcpCatalog) and check the scenario's version`,
    );
  }
}

/** An MCP tool used without the episode state that says which server to call (mcpEnv was not the env). */
export class McpSessionMissingError extends AgentR1Error {}

/** A path of a folder's contents that would leave the folder (`..`, an absolute path): nothing is written. */
export class FolderPathError extends AgentR1Error {
  constructor(readonly path: string) {
    super(`the path ${JSON.stringify(path)} leaves the episode's folder: refused`);
  }
}
