/** The CLI's exit codes (documented in the README): the only ones it exits with. */
export const EXIT_OK = 0;
/** A failure: a missing or unreadable file, a corrupt record, a replay that diverged, an internal error. */
export const EXIT_FAILED = 1;
/** Bad usage: an unknown name or flag, options that do not go together. */
export const EXIT_USAGE = 2;
/** Interrupted (SIGINT): what was finished is written. */
export const EXIT_INTERRUPTED = 130;
