/** The sources (and tsconfig files) newer than `built` (default: the build's last output, the worker bundle's entry), from the repository root. */
export function staleSources(built?: string): string[];
