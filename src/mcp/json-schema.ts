import { createRequire } from 'node:module';
import type { Ajv2020 } from 'ajv/dist/2020.js';
import { z } from 'zod';
import { importOptional } from '../core/optional-import.ts';
import { MCP_NEEDED_BY } from './sdk.ts';

let ajv: Ajv2020 | undefined;
function validator(): Ajv2020 {
  if (!ajv) {
    const require = createRequire(import.meta.url);
    const { Ajv2020 } = require('ajv/dist/2020.js') as typeof import('ajv/dist/2020.js');
    // Optional, as the SDK is (only MCP tools use it).
    const addFormats = importOptional('ajv-formats', MCP_NEEDED_BY, () => require('ajv-formats')) as (
      a: Ajv2020,
    ) => Ajv2020;
    ajv = addFormats(new Ajv2020({ strict: false, allErrors: true }));
  }
  return ajv;
}

/**
 * A tool's parameters from a server's JSON Schema, as the zod schema a Tool has: ajv checks the
 * arguments against the server's own schema (each violation an issue with its path, so the agent
 * is told what does not fit before the call is made), and `.meta()` carries the schema, so
 * `z.toJSONSchema` gives back exactly what the server published: the agent, `scenario check` and
 * the runner see the server's schema, not a translation of it.
 */
export function jsonSchemaParameters(schema: { [key: string]: unknown }): z.ZodType<{ [key: string]: unknown }> {
  // The draft named by a server (often draft-07, from zod-to-json-schema) is read as 2020-12, which
  // agrees with it on everything tool inputs use; `$schema` itself would make ajv look for the draft.
  const { $schema: _draft, ...published } = schema;
  const shown = { type: 'object', ...published };
  let check: ReturnType<Ajv2020['compile']> | undefined;
  return (z.any() as z.ZodType<{ [key: string]: unknown }>)
    .superRefine((value, ctx) => {
      check ??= validator().compile(shown);
      if (check(value)) return;
      for (const error of check.errors ?? []) {
        const path = error.instancePath.split('/').slice(1).map(decodePointer);
        const missing =
          error.keyword === 'required' ? (error.params as { missingProperty?: string }).missingProperty : undefined;
        ctx.addIssue({
          code: 'custom',
          message:
            missing === undefined
              ? (error.message ?? 'does not fit the schema')
              : `missing required argument "${missing}"`,
          path,
        });
      }
    })
    .meta(shown);
}

const decodePointer = (part: string) => part.replace(/~1/g, '/').replace(/~0/g, '~');
