import { readFileSync } from 'node:fs';
import test from 'ava';
import { and, createMachine, fromPromise, setup, stateIn } from 'xstate';
import { episodeMachine } from '../../machines/episode.ts';
import { DOC, updateScenariosDoc } from '../../docs/update-scenarios-doc.ts';
import { gridMachine } from '../../scenarios/gridworld/world-machine.ts';
import { orderMachine } from '../../scenarios/support-desk/order-machine.ts';
import { parseRecordLine, serializeRecord } from '../../src/record/record.ts';
import { replayRecord } from '../../src/replay/replay.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import { checkScenarioDir } from '../../src/app/check-scenario.ts';
import type { Scenario } from '../../src/scenario/scenario.ts';
import { machineToMermaid, replaceDiagramBlocks } from '../../src/scenario/diagram.ts';
import { cli } from '../helpers/cli.ts';

test('the diagram has every state and every transition of the machine', (t) => {
  for (const machine of [orderMachine, episodeMachine]) {
    const text = machineToMermaid(machine);
    const lines = text.split('\n').map((l) => l.trim());
    t.is(lines[0], 'stateDiagram-v2');
    for (const [key, node] of Object.entries(machine.root.states)) {
      t.true(lines.includes(key), `state ${key}`);
      for (const [event, transitions] of node.transitions) {
        for (const tr of transitions) {
          const target = tr.target?.[0]?.key ?? key;
          t.true(
            lines.some((l) => l.startsWith(`${key} --> ${target} :`)),
            `${key} --${event}--> ${target}`,
          );
        }
      }
      if (node.type === 'final') t.true(lines.includes(`${key} --> [*]`));
    }
    t.true(lines.includes(`[*] --> ${machine.root.initial.target[0]!.key}`));
  }
  const order = machineToMermaid(orderMachine);
  t.regex(order, /delivered --> returned : RETURN \[withinReturnWindow\]/);
  t.regex(order, /pending --> pending : CHANGE_ADDRESS/, 'a targetless transition is a self-loop');
  t.regex(order, /pending --> pending : CHANGE_ADDRESS \/ countAddressChange/, 'named actions after a slash');
  t.regex(machineToMermaid(episodeMachine), /generate --> execute : GENERATED \[callsTools\] \/ parseToolCall/);
});

test('nested, parallel, guarded and invoking machines are drawn as such', (t) => {
  const machine = setup({ actors: { load: fromPromise(async () => 1) }, guards: { ready: () => true } }).createMachine({
    id: 'demo',
    initial: 'loading',
    states: {
      loading: { invoke: { src: 'load', onDone: 'running', onError: 'failed' } },
      running: {
        type: 'parallel',
        states: {
          a: {
            initial: 'x',
            states: { x: { on: { GO: { target: 'y', guard: and(['ready', stateIn('#demo.running.b.on')]) } } }, y: {} },
          },
          b: { initial: 'off', states: { off: { on: { FLIP: 'on' } }, on: { on: { FLIP: 'off' } } } },
        },
        on: { STOP: 'failed' },
      },
      failed: { type: 'final' },
    },
  });
  t.is(
    machineToMermaid(machine),
    [
      'stateDiagram-v2',
      '  [*] --> loading',
      '  loading',
      '  state running {',
      '    state "a" as running__a',
      '    state running__a {',
      '      [*] --> running__a__x',
      '      state "x" as running__a__x',
      '      state "y" as running__a__y',
      '      running__a__x --> running__a__y : GO [ready and in running.b.on]',
      '    }',
      '    --',
      '    state "b" as running__b',
      '    state running__b {',
      '      [*] --> running__b__off',
      '      state "off" as running__b__off',
      '      state "on" as running__b__on',
      '      running__b__off --> running__b__on : FLIP',
      '      running__b__on --> running__b__off : FLIP',
      '    }',
      '  }',
      '  failed',
      '  failed --> [*]',
      '  loading --> running : done(load)',
      '  loading --> failed : error(load)',
      '  running --> failed : STOP',
      '',
    ].join('\n'),
  );
  // A parallel root is wrapped in a composite named after the machine (Mermaid needs one for `--`).
  t.regex(machineToMermaid(gridMachine), /^stateDiagram-v2\n {2}state grid \{\n/);
  t.regex(machineToMermaid(createMachine({ id: 'one', initial: 'only', states: { only: {} } })), /\[\*\] --> only/);
});

test('docs/scenarios.md holds the diagrams and the example as generated now', (t) => {
  const page = readFileSync(DOC, 'utf8');
  t.is(updateScenariosDoc(page), page, 'stale: run npx tsx --conditions=source docs/update-scenarios-doc.ts');
  for (const name of ['episode', 'hvac', 'tiny-desk', 'support-desk', 'gridworld'])
    t.true(page.includes(`<!-- diagram: ${name} -->`));
  // An empty block is filled in place: the match ends at its own fence, not at a later one.
  const empty = '<!-- diagram: a -->\n```mermaid\n```\n\ntext\n\n```ts\nx\n```\n';
  t.is(
    replaceDiagramBlocks(empty, { a: 'stateDiagram-v2\n' }),
    empty.replace('```mermaid\n```', '```mermaid\nstateDiagram-v2\n```'),
  );
  t.throws(() => replaceDiagramBlocks('<!-- diagram: nope -->\n```mermaid\n```', {}), {
    message: /no diagram named "nope"/,
  });
});

test("the guide's example is a working scenario in under 100 lines", async (t) => {
  const lines = readFileSync('docs/examples/tiny-desk/index.ts', 'utf8').trimEnd().split('\n').length;
  t.true(lines < 100, `${lines} lines`);
  const { problems, checked } = await checkScenarioDir('docs/examples/tiny-desk');
  t.deepEqual(problems, []);
  t.true(checked.some((c) => /policies.expert: finished \(answered\)/.test(c)));
  // Its effects log makes replay exact: the cancellations are re-applied from the records.
  const tiny: Scenario = (await import('../../docs/examples/tiny-desk/index.ts')).default;
  const policy = await tiny.policies.expert!({ scenario: tiny, seed: 0 });
  const { records, summary } = await rollout({
    scenario: tiny,
    policy,
    split: 'test',
    episodes: 12,
    seed: 2,
    onRecord: () => {},
  });
  t.is(summary.successRate, 1);
  for (const r of records)
    t.true((await replayRecord(parseRecordLine(serializeRecord(r)), tiny)).verified, r.episodeId);
});

test.serial(
  'agent-r1 scenario diagram: a world machine as Mermaid; none is a usage error that says what to draw instead',
  (t) => {
    const drawn = cli(['scenario', 'diagram', 'support-desk']);
    t.is(drawn.code, 0, drawn.stderr);
    t.regex(drawn.stdout, /^stateDiagram-v2/);
    const none = cli(['scenario', 'diagram', 'scenarios/templates/minimal']);
    t.is(none.code, 2);
    t.is(
      none.stderr,
      'error: scenario crates has no world machine: its episodes run on the episode machine alone (--episode draws that)\n',
    );
    t.is(cli(['scenario', 'diagram']).code, 2);
  },
);
