import { createRng, deriveSeed, type Rng, type Task } from 'agent-r1-ts';
import type { FolderContents } from 'agent-r1-ts/mcp';

export const SPLITS = ['train', 'dev', 'test'] as const;

/** The agent's name for its folder; the server sees a scratch folder of the episode's own. */
export const ROOT = '/workspace';

export type FilesTaskKind = 'find-move' | 'rename' | 'append';

export interface FilesTask extends Task {
  type: FilesTaskKind;
  meta: {
    /** The folder as the episode starts (setup writes it). */
    initial: FolderContents;
    /** The folder as it must end: the outcome. */
    expected: FolderContents;
    /** find-move: the file to move; append: the note to write to (relative paths). */
    target?: string;
    /** append: the line to add. */
    line?: string;
  };
}

const TOPICS = ['garden', 'budget', 'travel', 'recipes', 'music', 'books', 'fitness', 'repairs'];
const NAMES = ['Ava', 'Ben', 'Chloe', 'Dev', 'Elif', 'Farid', 'Gina', 'Hugo', 'Iris', 'Jonas', 'Lena', 'Omar'];
const THINGS = ['invoice', 'parcel', 'meeting', 'ticket', 'report', 'delivery', 'payment', 'visit'];
const DAYS = ['monday', 'tuesday', 'wednesday', 'thursday', 'friday'];
const KINDS = ['memo', 'letter', 'mail', 'draft', 'todo'];
/** Words that appear in no generated sentence: the one file that mentions one is found by it alone. */
const CODEWORDS = ['marigold', 'zeppelin', 'quartz', 'saffron', 'tundra', 'obsidian', 'juniper', 'nebula'];
const LINES = [
  'water the roses',
  'call the plumber',
  'pay the rent',
  'buy fresh bread',
  'book the train',
  'tune the guitar',
];

const sentence = (rng: Rng) => `${rng.pick(NAMES)} asked about the ${rng.pick(THINGS)} on ${rng.pick(DAYS)}.`;

/** A small tree: notes about topics, an inbox of messages, an archive. */
function tree(
  rng: Rng,
  codeword: string | undefined,
): { files: FolderContents; inbox: string[]; notes: Map<string, string> } {
  const files: FolderContents = {
    'archive/': '',
    'archive/readme.txt': 'Old files go here.\n',
    'inbox/': '',
    'notes/': '',
  };
  const inboxNames = new Set<string>();
  const count = rng.int(2, 3);
  while (inboxNames.size < count) inboxNames.add(`${rng.pick(KINDS)}-${rng.int(1, 9)}.txt`);
  const inbox = [...inboxNames].sort();
  const marked = codeword === undefined ? -1 : rng.int(0, inbox.length - 1);
  inbox.forEach((name, i) => {
    const lines = [sentence(rng)];
    if (i === marked) lines.push(`Keep the ${codeword} one.`);
    files[`inbox/${name}`] = `${lines.join('\n')}\n`;
  });
  const notes = new Map<string, string>();
  rng
    .shuffle(TOPICS)
    .slice(0, 3)
    .forEach((topic, i) => {
      const path = `notes/note-${i + 1}.txt`;
      notes.set(topic, path);
      files[path] = `topic: ${topic}\n${sentence(rng)}\n`;
    });
  return { files, inbox, notes };
}

const sorted = (c: FolderContents): FolderContents =>
  Object.fromEntries(
    Object.keys(c)
      .sort()
      .map((k) => [k, c[k]!]),
  );

function makeTask(split: string, seed: number, i: number): FilesTask {
  const rng = createRng(deriveSeed(seed, 'files', split, i));
  const kind = rng.pick<FilesTaskKind>(['find-move', 'rename', 'append']);
  const id = `files-${split}-${seed}-${i}`;
  if (kind === 'find-move') {
    const codeword = rng.pick(CODEWORDS);
    const { files } = tree(rng, codeword);
    const target = Object.keys(files).find((p) => p.startsWith('inbox/') && files[p]!.includes(codeword))!;
    const expected = { ...files };
    delete expected[target];
    expected[`archive/${target.slice('inbox/'.length)}`] = files[target]!;
    return {
      id,
      split,
      type: kind,
      question: `Move the file in ${ROOT}/inbox that mentions "${codeword}" into ${ROOT}/archive.`,
      meta: { initial: sorted(files), expected: sorted(expected), target },
    };
  }
  if (kind === 'rename') {
    const { files, inbox } = tree(rng, undefined);
    const expected = { ...files };
    for (const name of inbox) {
      delete expected[`inbox/${name}`];
      expected[`inbox/${name.replace(/\.txt$/, '.md')}`] = files[`inbox/${name}`]!;
    }
    return {
      id,
      split,
      type: kind,
      question: `Rename every file in ${ROOT}/inbox from .txt to .md.`,
      meta: { initial: sorted(files), expected: sorted(expected) },
    };
  }
  const { files, notes } = tree(rng, undefined);
  const topic = rng.pick([...notes.keys()]);
  const target = notes.get(topic)!;
  const line = rng.pick(LINES);
  const expected = { ...files, [target]: `${files[target]}${line}\n` };
  return {
    id,
    split,
    type: kind,
    question: `Add the line "${line}" to the end of the note about ${topic} in ${ROOT}/notes.`,
    meta: { initial: sorted(files), expected: sorted(expected), target, line },
  };
}

/** Seeded tasks: a split's tasks depend on (seed, split) only. */
export function filesTasks(split: string, seed: number, count: number): FilesTask[] {
  return Array.from({ length: count }, (_, i) => makeTask(split, seed, i));
}
