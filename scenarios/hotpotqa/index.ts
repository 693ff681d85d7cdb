import { defineScenario } from 'agent-r1-ts';
import { createDatasetScenario } from '../qa-datasets/scenario.ts';

/** The hotpotqa dataset as a scenario; options: data (the dataset file, required), split (default test), rewards. */
export default defineScenario((options: { [key: string]: string }) => createDatasetScenario('hotpotqa', options));
