/** The sources (and tsconfig files) newer than `built` (default: the build's last output, the worker bundle's entry), from the repository root. */
export function staleSources(built?: string): string[];
/** Whether `dir` (default: this package's root) is a checkout: it has a .git, or it is not inside node_modules. */
export function isCheckout(dir?: string): boolean;
