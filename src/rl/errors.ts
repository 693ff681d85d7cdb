import { AgentR1Error } from '../core/errors.ts';

/** Inputs to an RL computation (advantages, losses, trajectories) that do not fit together. */
export class RlInputError extends AgentR1Error {}

/** A training run that cannot start or continue (bad options, a run directory that does not match). */
export class TrainingError extends AgentR1Error {}
