export function externalPackages(): string[];
