import type { HfModelRequest, HfWarmStart, PaperOptions } from './paper.ts';
import { startBudget, startScenarioOptions } from './start.ts';

/**
 * The task families `agent-r1 start --scenario S` trains, Agent-R1 v0.1's four-benchmark table in
 * miniature: each is a built-in scenario with options, a warm start on imperfect demonstrations (a
 * noisy expert that errs the way a weak model does, so the warm start leaves room that only RL can
 * take), GRPO, and greedy evaluation on `test` (and `ood` where the family has it).
 *
 *   multihop-qa  ≈ HotpotQA   the main job, unchanged (EM)
 *   calculator   ≈ GSM8K      multi-step word problems, one tool call per operation (success)
 *   gridworld    ≈ ALFWorld   a large dark dungeon, 20–40 turns, step-level context: the state card
 *   support-desk ≈ WebShop    multi-tool database work under the store's rules (the final database)
 *   helpdesk     ≈ τ²-bench   a conversation with a simulated customer who holds the phone (dual control)
 *   guessing     a game of two roles (a guesser and a describer), co-trained vs the guesser alone
 */
export interface Family {
  scenario: string;
  /** What the family is like in the literature, for the table. */
  like: string;
  /** The figure the table leads with: EM (QA) or success (the episode's outcome). */
  metric: 'em' | 'success';
  options(quick: boolean, seed: number): Record<string, string>;
  budget(quick: boolean): FamilyBudget;
  evalSplits: readonly string[];
  /**
   * Scripted reference rows (a policy of the scenario, evaluated like the methods): the expert (what
   * perfect play scores) and the demonstrator (what the warm start imitates).
   */
  references: readonly { method: string; policy: string; user?: string }[];
}

export type FamilyBudget = Pick<PaperOptions, 'warmStart' | 'rl' | 'evalEpisodes' | 'episode' | 'select' | 'user'>;

const REFERENCES = [
  { method: 'Expert (scripted, the ceiling)', policy: 'expert' },
  { method: 'Noisy expert (the demonstrations)', policy: 'noisy-expert' },
] as const;

/** A small warm start and a short GRPO run, for `--quick` (CI): the pipeline end to end. */
function quickBudget(episode: FamilyBudget['episode'], contextLength: number): FamilyBudget {
  return {
    episode,
    select: 'best-dev',
    warmStart: {
      demoPolicy: 'noisy-expert',
      episodes: 48,
      steps: 12,
      batchSize: 8,
      lr: 6e-3,
      vocabSize: 512,
      model: { dModel: 32, nLayers: 1, contextLength, copyHead: true },
    },
    rl: {
      steps: 2,
      tasksPerStep: 2,
      group: 4,
      minibatch: 8,
      lr: 1e-3,
      klMode: 'none',
      klCoef: 0,
      evalEvery: 1,
      evalEpisodes: 8,
      checkpointEvery: 2,
    },
    evalEpisodes: { test: 8, ood: 8 },
  };
}

export const FAMILIES: { [name: string]: Family } = {
  'multihop-qa': {
    scenario: 'multihop-qa',
    like: 'HotpotQA',
    metric: 'em',
    options: (quick, seed) => ({ seed: String(seed), ...startScenarioOptions(quick) }),
    budget: startBudget,
    evalSplits: ['test', 'ood'],
    references: [],
  },
  calculator: {
    scenario: 'calculator',
    like: 'GSM8K',
    metric: 'success',
    options: () => ({ problems: 'multistep', noisyEarly: '0.7' }),
    budget: (quick) => {
      const episode = { maxTokensPerTurn: 40 };
      if (quick) return quickBudget({ ...episode, maxTurns: 6 }, 512);
      return {
        episode,
        select: 'best-dev',
        warmStart: {
          demoPolicy: 'noisy-expert',
          episodes: 800,
          steps: 1500,
          batchSize: 8,
          lr: 6e-3,
          vocabSize: 512,
          model: { dModel: 64, nLayers: 2, contextLength: 512, copyHead: true },
        },
        rl: {
          steps: 60,
          tasksPerStep: 8,
          group: 8,
          minibatch: 64,
          lr: 1e-3,
          klMode: 'none',
          klCoef: 0,
          evalEvery: 10,
          evalEpisodes: 64,
          checkpointEvery: 10,
        },
        evalEpisodes: { test: 200, ood: 100 },
      };
    },
    evalSplits: ['test', 'ood'],
    references: REFERENCES,
  },
  gridworld: {
    scenario: 'gridworld',
    like: 'ALFWorld',
    metric: 'success',
    options: () => ({ size: 'large', noisyStuck: '0', noisyPits: '0', noisyDoor: '0.7' }),
    budget: (quick) => {
      // The step-level MDP: each step sees the prompt and the state card, never the transcript,
      // which at 20–40 turns would be several times the model's context.
      const episode = { context: 'card', maxTokensPerTurn: 32 };
      if (quick) return quickBudget({ ...episode, maxTurns: 45 }, 512);
      return {
        episode,
        select: 'best-dev',
        warmStart: {
          demoPolicy: 'noisy-expert',
          episodes: 400,
          steps: 1000,
          batchSize: 8,
          lr: 6e-3,
          vocabSize: 512,
          model: { dModel: 64, nLayers: 2, contextLength: 512, copyHead: true },
        },
        rl: {
          steps: 16,
          tasksPerStep: 4,
          group: 8,
          minibatch: 32,
          lr: 7e-4,
          klMode: 'none',
          klCoef: 0,
          evalEvery: 4,
          evalEpisodes: 32,
          checkpointEvery: 4,
        },
        evalEpisodes: { test: 100, ood: 50 },
      };
    },
    evalSplits: ['test', 'ood'],
    references: REFERENCES,
  },
  helpdesk: {
    scenario: 'helpdesk',
    like: 'τ²-bench telecom',
    metric: 'success',
    options: () => ({}),
    budget: (quick) => {
      // A conversation: the customer's replies are the agent's observations (the status read-out).
      const episode = { maxTokensPerTurn: 64, maxTurns: 12 };
      if (quick) return quickBudget({ ...episode, maxTurns: 6 }, 1024);
      return {
        episode,
        select: 'best-dev',
        warmStart: {
          demoPolicy: 'noisy-expert',
          episodes: 400,
          steps: 250,
          batchSize: 8,
          lr: 6e-3,
          vocabSize: 768,
          model: { dModel: 64, nLayers: 2, contextLength: 1024, copyHead: true },
        },
        rl: {
          steps: 16,
          tasksPerStep: 8,
          group: 8,
          minibatch: 64,
          lr: 3e-4,
          klMode: 'none',
          klCoef: 0,
          evalEvery: 4,
          evalEpisodes: 64,
          checkpointEvery: 4,
        },
        evalEpisodes: { test: 200, ood: 100 },
      };
    },
    evalSplits: ['test', 'ood'],
    references: REFERENCES,
  },
  guessing: {
    scenario: 'guessing',
    like: 'a referential game',
    metric: 'success',
    options: () => ({}),
    budget: (quick) => {
      // Two roles: the demonstrations' describer names the wrong attribute of the secret in half its
      // rounds, whatever the round (noisy), so the user's warm start cannot learn which word to say
      // from them; only the reward says it, and only a run that trains the user can use it.
      const episode = { maxTokensPerTurn: 32, maxTurns: 2 };
      if (quick) {
        const budget = quickBudget(episode, 256);
        return { ...budget, warmStart: { ...budget.warmStart, demoPolicy: 'expert' }, user: { demoPolicy: 'noisy' } };
      }
      return {
        episode,
        user: { demoPolicy: 'noisy', steps: 300 },
        select: 'best-dev',
        warmStart: {
          demoPolicy: 'expert',
          episodes: 600,
          // The guesser must pair the clue's word with the rest of its item: at 900 steps it did for 55%
          // of clean clues, at 2,000 for 81% (a 4-layer, 96-wide model at 900: no better).
          steps: 2000,
          batchSize: 8,
          lr: 6e-3,
          vocabSize: 384,
          model: { dModel: 64, nLayers: 2, contextLength: 256, copyHead: true },
        },
        rl: {
          steps: 40,
          tasksPerStep: 8,
          group: 8,
          minibatch: 64,
          lr: 1e-3,
          klMode: 'none',
          klCoef: 0,
          evalEvery: 8,
          evalEpisodes: 64,
          checkpointEvery: 8,
        },
        evalEpisodes: { test: 200, ood: 200 },
      };
    },
    evalSplits: ['test', 'ood'],
    // The demonstrations: the expert guesser with the noisy describer (the noise is the describer's).
    references: [
      REFERENCES[0],
      { method: 'Expert, noisy describer (the demonstrations)', policy: 'expert', user: 'noisy' },
    ],
  },
  'support-desk': {
    scenario: 'support-desk',
    like: 'WebShop / tau-bench',
    metric: 'success',
    options: () => ({ prompt: 'terse', customers: '200', noisySkip: '0.7', noisyKind: 'no-identify' }),
    budget: (quick) => {
      // The step-level MDP: each step sees the prompt and the state card (the newest result of each
      // tool), not the transcript of JSON results, which outgrows the model's context in a few turns.
      const episode = { context: 'card', maxTokensPerTurn: 64, maxTurns: 8 };
      if (quick) return quickBudget({ ...episode, maxTurns: 4 }, 768);
      return {
        episode,
        select: 'best-dev',
        warmStart: {
          demoPolicy: 'noisy-expert',
          episodes: 600,
          steps: 800,
          batchSize: 8,
          // At 6e-3 one seed's model never learned where a copied name or email starts (its first
          // token came from the vocabulary: "gami.kowalski79" for "sami.kowalski79"), so its
          // identifications all failed and RL had nothing to reinforce.
          lr: 1.2e-2,
          vocabSize: 768,
          model: { dModel: 64, nLayers: 2, contextLength: 768, copyHead: true },
        },
        rl: {
          steps: 16,
          tasksPerStep: 8,
          group: 8,
          minibatch: 64,
          lr: 1e-3,
          klMode: 'none',
          klCoef: 0,
          // Dr. GRPO's advantage (reward − group mean, not divided by the group's std): half the
          // tasks are declines every sample gets right, where only the small process rewards differ,
          // and divided by their small std they outweighed the successes elsewhere.
          normByStd: false,
          evalEvery: 4,
          evalEpisodes: 64,
          checkpointEvery: 4,
        },
        evalEpisodes: { test: 200, ood: 0 },
      };
    },
    evalSplits: ['test'],
    references: REFERENCES,
  },
};

export const FAMILY_NAMES = Object.keys(FAMILIES);

/**
 * A family's budget for a Hugging Face model (`start --scenario S --init hf:DIR`): the same
 * demonstrations, episode budget and selection; the warm start is SFT of that model on its own
 * template, and RL is shorter, since every step scores its 151,936-row head (a GPT's has 512 rows).
 */
export function hfFamilyBudget(
  budget: FamilyBudget,
  quick: boolean,
  model: HfModelRequest,
): FamilyBudget & { hf: HfWarmStart } {
  const lr = model.lora ? 2e-3 : 3e-3;
  if (quick) return { ...budget, hf: { ...model, steps: 4, batchSize: 4, lr } };
  return {
    ...budget,
    hf: { ...model, steps: 150, batchSize: 8, lr },
    rl: {
      ...budget.rl,
      steps: 20,
      tasksPerStep: 4,
      group: 8,
      minibatch: 32,
      lr: 3e-4,
      evalEvery: 5,
      evalEpisodes: 32,
      checkpointEvery: 5,
    },
    evalEpisodes: { test: 100, ood: budget.evalEpisodes.ood === 0 ? 0 : 50 },
  };
}
