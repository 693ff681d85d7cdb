/**
 * Regenerates the generated parts of docs/scenarios.md: the state diagrams (drawn from the machines'
 * own definitions by src/scenario/diagram.ts) and the embedded files (the world-machine template's). Run it after changing a
 * machine or the example:  npx tsx --conditions=source docs/update-scenarios-doc.ts
 * test/scenario/diagram.test.ts fails while the page is out of date.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { episodeMachine } from '../machines/episode.ts';
import { gridMachine } from '../scenarios/gridworld/world-machine.ts';
import { orderMachine } from '../scenarios/support-desk/order-machine.ts';
import { machineToMermaid, replaceDiagramBlocks } from '../src/scenario/diagram.ts';
import { hvacMachine } from '../scenarios/templates/world-machine/world.ts';
import { orderMachine as tinyOrderMachine } from './examples/tiny-desk/index.ts';

export const DOC = fileURLToPath(new URL('./scenarios.md', import.meta.url));
const ROOT = fileURLToPath(new URL('..', import.meta.url));

export function scenarioDiagrams(): { [name: string]: string } {
  return {
    episode: machineToMermaid(episodeMachine),
    hvac: machineToMermaid(hvacMachine),
    'tiny-desk': machineToMermaid(tinyOrderMachine),
    'support-desk': machineToMermaid(orderMachine),
    gridworld: machineToMermaid(gridMachine),
  };
}

/** The page with every generated part brought up to date. */
export function updateScenariosDoc(markdown: string): string {
  const withFiles = markdown.replace(/<!-- file: ([\w./-]+) -->\n```ts\n[\s\S]*?```/g, (_block, path: string) => {
    return `<!-- file: ${path} -->\n\`\`\`ts\n${readFileSync(ROOT + path, 'utf8')}\`\`\``;
  });
  return replaceDiagramBlocks(withFiles, scenarioDiagrams());
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  writeFileSync(DOC, updateScenariosDoc(readFileSync(DOC, 'utf8')));
}
