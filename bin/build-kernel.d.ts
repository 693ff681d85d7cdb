export const KERNEL_SOURCE: string;
export const KERNEL_MODULE: string;
export function compileKernel(): Promise<Buffer>;
export function kernelModuleText(bytes: Buffer): string;
