export interface Kernel {
  source: string;
  module: string;
  constant: string;
  flags?: string[];
}
export const KERNELS: Kernel[];
export function compileKernel(source: string, flags?: string[]): Promise<Buffer>;
export function kernelModuleText(kernel: Kernel, bytes: Buffer): string;
