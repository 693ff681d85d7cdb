export interface Kernel {
  source: string;
  module: string;
  constant: string;
}
export const KERNELS: Kernel[];
export function compileKernel(source: string): Promise<Buffer>;
export function kernelModuleText(kernel: Kernel, bytes: Buffer): string;
