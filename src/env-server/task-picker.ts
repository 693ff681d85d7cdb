import { LRUCache } from 'lru-cache';
import type { Task } from '../core/types.ts';
import type { Scenario } from '../scenario/scenario.ts';
import { EnvProtocolError } from './errors.ts';

/**
 * Which task a reset names: task i of a split for a seed is the one `agent-r1 rollout --seed S`
 * gives its episode i (the last of `scenario.tasks({split, seed, count: i + 1})`), so served
 * episodes and rollouts draw the same tasks. Picks are cached: a trainer asks for the same tasks
 * again and again (every sample of a group).
 */
export class TaskPicker {
  private readonly cache = new LRUCache<string, Promise<Task>>({ max: 4096 });

  constructor(private readonly scenario: Scenario) {}

  /** The default split: train when the scenario has one, else its first. */
  get defaultSplit(): string {
    return this.scenario.splits.includes('train') ? 'train' : this.scenario.splits[0]!;
  }

  pick(split: string, seed: number, index: number): Promise<Task> {
    const scenario = this.scenario;
    if (!scenario.splits.includes(split))
      throw new EnvProtocolError(
        'VALIDATION_ERROR',
        `scenario ${scenario.id} has no split "${split}" (it has ${scenario.splits.join(', ')})`,
      );
    const size = scenario.taskCount?.(split);
    if (size !== undefined && index >= size)
      throw new EnvProtocolError(
        'VALIDATION_ERROR',
        `task ${index} is out of range: split ${split} has ${size} tasks (0-${size - 1})`,
      );
    const key = `${split}\u0000${seed}\u0000${index}`;
    let task = this.cache.get(key);
    if (!task) {
      task = Promise.resolve(scenario.tasks({ split, seed, count: index + 1 })).then((tasks) => {
        if (tasks.length === 0)
          throw new EnvProtocolError('EXECUTION_ERROR', `scenario ${scenario.id} has no tasks in split ${split}`);
        // A scenario with fewer tasks than asked for cycles through them, as rollouts do.
        return tasks[index % tasks.length]!;
      });
      task.catch(() => this.cache.delete(key));
      this.cache.set(key, task);
    }
    return task;
  }
}
