import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { AgentR1Error, UsageError } from '../core/errors.ts';
import { nestsDeeperThan } from '../core/json-depth.ts';
import type { Task } from '../core/types.ts';
import { json } from '../record/record.ts';

/** A tasks file that cannot be read: the file, the line and what is wrong with it. */
export class TasksFileError extends AgentR1Error {
  constructor(
    readonly file: string,
    readonly line: number | null,
    why: string,
  ) {
    super(`${file}${line === null ? '' : `:${line}`}: ${why}`);
  }
}

/**
 * A tasks file without a split a command needs: a usage error (the file, or the command, is the wrong
 * one), naming the file, the split and what the split is for.
 */
export class MissingSplitError extends UsageError {
  constructor(
    readonly file: string,
    readonly split: string,
    readonly purpose: string,
  ) {
    super(`${file} has no tasks in the "${split}" split (${purpose}): give tasks "split": "${split}"`);
  }
}

/** The tasks of `split`, or a MissingSplitError when there are none. */
export function tasksOfSplit(tasks: readonly Task[], split: string, file: string, purpose: string): Task[] {
  const found = tasks.filter((t) => t.split === split);
  if (found.length === 0) throw new MissingSplitError(file, split, purpose);
  return found;
}

const taskSchema = z.strictObject({
  id: z.string().min(1),
  question: z.string(),
  split: z.string().min(1).optional(),
  type: z.string().optional(),
  answer: z.string().optional(),
  meta: z.record(z.string(), json).optional(),
});

/**
 * An agent's tasks: one JSON object per line, `{id, question, split?, type?, answer?, meta?}` (split
 * defaults to `train`). Data only: the agent decides what a task means. Every bad line is an error
 * naming it; ids are unique.
 */
export async function readTasksFile(file: string): Promise<Task[]> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new TasksFileError(file, null, `cannot be read (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
  const tasks: Task[] = [];
  const seen = new Set<string>();
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (line === '') return;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (err) {
      throw new TasksFileError(file, i + 1, `not valid JSON (${(err as Error).message})`);
    }
    if (nestsDeeperThan(value, 64)) throw new TasksFileError(file, i + 1, 'nests deeper than 64 levels');
    const parsed = taskSchema.safeParse(value);
    if (!parsed.success) throw new TasksFileError(file, i + 1, `not a task: ${z.prettifyError(parsed.error)}`);
    const task = { ...parsed.data, split: parsed.data.split ?? 'train' } as Task;
    if (seen.has(task.id)) throw new TasksFileError(file, i + 1, `task id "${task.id}" is used twice`);
    seen.add(task.id);
    tasks.push(task);
  });
  if (tasks.length === 0) throw new TasksFileError(file, null, 'holds no tasks');
  return tasks;
}
