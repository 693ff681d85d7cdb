import { createRng, type Json, type Policy } from 'agent-r1-ts';
import { ROOT, type FilesTask } from './tasks.ts';

const call = (name: string, args: { [key: string]: Json }) =>
  `<tool_call>${JSON.stringify({ name, arguments: args })}</tool_call>`;
const inFolder = (task: FilesTask, folder: string) =>
  Object.keys(task.meta.initial).filter((p) => p.startsWith(`${folder}/`) && !p.endsWith('/'));

/** The actions that do the task: look, read, change, answer. It reads what it needs, and knows the target. */
export function expertPlan(task: FilesTask): string[] {
  const { meta } = task;
  switch (task.type) {
    case 'find-move': {
      const name = meta.target!.slice('inbox/'.length);
      return [
        call('list_directory_with_sizes', { path: `${ROOT}/inbox` }),
        call('read_multiple_files', { paths: inFolder(task, 'inbox').map((p) => `${ROOT}/${p}`) }),
        call('move_file', { source: `${ROOT}/inbox/${name}`, destination: `${ROOT}/archive/${name}` }),
        '<answer>done</answer>',
      ];
    }
    case 'rename':
      return [
        call('list_directory_with_sizes', { path: `${ROOT}/inbox` }),
        inFolder(task, 'inbox')
          .map((p) =>
            call('move_file', { source: `${ROOT}/${p}`, destination: `${ROOT}/${p.replace(/\.txt$/, '.md')}` }),
          )
          .join(''),
        '<answer>done</answer>',
      ];
    case 'append':
      return [
        call('read_multiple_files', { paths: inFolder(task, 'notes').map((p) => `${ROOT}/${p}`) }),
        call('write_file', { path: `${ROOT}/${meta.target}`, content: `${meta.initial[meta.target!]}${meta.line}\n` }),
        '<answer>done</answer>',
      ];
  }
}

export const expert: Policy = {
  id: 'expert',
  version: 'files-expert-1',
  act: async ({ task, turn }) => ({ text: expertPlan(task as FilesTask)[turn] ?? '<answer>done</answer>' }),
};

/** Junk: random calls on random paths, malformed calls, early answers. */
export const random: Policy = {
  id: 'random',
  version: 'files-random-1',
  act: async ({ task, seed }) => {
    const rng = createRng(seed);
    const paths = [
      ...Object.keys((task as FilesTask).meta.initial).map((p) => `${ROOT}/${p}`),
      '/etc/passwd',
      `${ROOT}/nope.txt`,
    ];
    const path = () => rng.pick(paths);
    const choices = [
      () => call('list_directory_with_sizes', { path: path() }),
      () => call('read_text_file', { path: path() }),
      () => call('move_file', { source: path(), destination: `${ROOT}/archive/x-${rng.int(1, 9)}.txt` }),
      () => call('write_file', { path: path(), content: 'hello\n' }),
      () => call('create_directory', { path: `${ROOT}/new-${rng.int(1, 9)}` }),
      () => call('read_text_file', { file: path() }),
      () => call('delete_file', { path: path() }),
      () => `<tool_call>{"name": "read_text_file", "arguments": {"path": </tool_call>`,
      () => 'I moved it.',
      () => '<answer>done</answer>',
    ];
    return { text: rng.pick(choices)() };
  },
};
