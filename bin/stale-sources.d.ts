/** The sources (and tsconfig files) newer than `built` (default: dist's CLI entry), from the repository root. */
export function staleSources(built?: string): string[];
