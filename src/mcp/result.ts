import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { Json } from '../core/types.ts';

/** A tool result as the agent and the ToolEnv get it. */
export interface MappedResult {
  isError: boolean;
  /** The content blocks as text: text as it is; images, audio and resources named, with their size. */
  text: string;
  /** The result's structured content, when it has one. */
  structured?: Json;
}

/**
 * Maps an MCP CallToolResult. Text blocks are kept as they are, one after another; binary blocks are
 * named in the text (`[image image/png, 1432 bytes]`) rather than pasted as base64 the agent cannot
 * read; an embedded text resource is given with its URI. A result with no content but structured
 * content is shown as that JSON. Pure.
 */
export function mapCallResult(result: CallToolResult): MappedResult {
  const parts = (result.content ?? []).map(blockText);
  const structured = result.structuredContent as Json | undefined;
  let text = parts.join('\n');
  if (parts.length === 0 && structured !== undefined) text = JSON.stringify(structured);
  const mapped: MappedResult = { isError: result.isError === true, text };
  if (structured !== undefined) mapped.structured = structured;
  return mapped;
}

type Block = CallToolResult['content'][number];

function blockText(block: Block): string {
  switch (block.type) {
    case 'text':
      return block.text;
    case 'image':
    case 'audio':
      return `[${block.type} ${block.mimeType}, ${base64Bytes(block.data)} bytes]`;
    case 'resource_link':
      return `[resource link ${block.uri}${block.name ? ` "${block.name}"` : ''}${block.mimeType ? `, ${block.mimeType}` : ''}]`;
    case 'resource': {
      const r = block.resource;
      const mime = r.mimeType ? `, ${r.mimeType}` : '';
      if ('text' in r && typeof r.text === 'string') return `[resource ${r.uri}${mime}]\n${r.text}`;
      const blob = 'blob' in r && typeof r.blob === 'string' ? r.blob : '';
      return `[resource ${r.uri}${mime}, ${base64Bytes(blob)} bytes]`;
    }
    default:
      return `[${(block as { type: string }).type} content]`;
  }
}

/** The decoded size of base64 text, without decoding it. */
export function base64Bytes(data: string): number {
  const clean = data.replace(/\s+/g, '');
  const padding = clean.endsWith('==') ? 2 : clean.endsWith('=') ? 1 : 0;
  return Math.max(0, Math.floor((clean.length * 3) / 4) - padding);
}
