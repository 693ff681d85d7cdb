import type { EffectLog, Json } from 'agent-r1-ts';

/**
 * A phone company's help desk in miniature (τ²-bench's telecom domain, dual control): the line is
 * the company's (the agent's tools change it), the phone is the customer's (only the user's tools
 * change it). Internet works when both sides are right.
 */

/** What can be wrong, one or more per case. */
export const PROBLEMS = ['airplane', 'data_off', 'suspended', 'apn', 'roaming'] as const;
export type Problem = (typeof PROBLEMS)[number];

export interface Line {
  phone: string;
  name: string;
  status: 'active' | 'suspended';
  /** Roaming allowed on the account. */
  roaming: boolean;
}

export interface Device {
  airplaneMode: boolean;
  mobileData: boolean;
  dataRoaming: boolean;
  apn: 'internet' | 'unknown';
  /** A change that takes effect only after a restart (the line resumed, the APN reset) is pending. */
  needsRestart: boolean;
}

export interface HelpdeskState {
  log: EffectLog;
  line: Line;
  device: Device;
  abroad: boolean;
}

/** The changes tools commit (event-sourced: replay applies them from the recorded results). */
export type HelpdeskEffect =
  | { kind: 'resume_line' }
  | { kind: 'enable_roaming' }
  | { kind: 'airplane_mode'; on: boolean }
  | { kind: 'mobile_data'; on: boolean }
  | { kind: 'data_roaming'; on: boolean }
  | { kind: 'reset_apn' }
  | { kind: 'restart' };

export function applyEffect(state: HelpdeskState, effect: HelpdeskEffect): void {
  const { line, device } = state;
  switch (effect.kind) {
    case 'resume_line':
      line.status = 'active';
      device.needsRestart = true;
      break;
    case 'enable_roaming':
      line.roaming = true;
      break;
    case 'airplane_mode':
      device.airplaneMode = effect.on;
      break;
    case 'mobile_data':
      device.mobileData = effect.on;
      break;
    case 'data_roaming':
      device.dataRoaming = effect.on;
      break;
    case 'reset_apn':
      device.apn = 'internet';
      device.needsRestart = true;
      break;
    case 'restart':
      device.needsRestart = false;
      break;
  }
}

/** A case's world: a working phone and line, then the case's problems. */
export function createState(meta: { phone: string; name: string; problems: readonly Problem[] }): HelpdeskState {
  const state: HelpdeskState = {
    log: { applied: 0 },
    line: { phone: meta.phone, name: meta.name, status: 'active', roaming: true },
    device: { airplaneMode: false, mobileData: true, dataRoaming: true, apn: 'internet', needsRestart: false },
    abroad: false,
  };
  for (const p of meta.problems) {
    if (p === 'airplane') state.device.airplaneMode = true;
    if (p === 'data_off') state.device.mobileData = false;
    if (p === 'suspended') state.line.status = 'suspended';
    if (p === 'apn') state.device.apn = 'unknown';
    if (p === 'roaming') {
      state.abroad = true;
      state.line.roaming = false;
      state.device.dataRoaming = false;
    }
  }
  return state;
}

export function internetWorks(state: HelpdeskState): boolean {
  const { line, device } = state;
  return (
    line.status === 'active' &&
    !device.airplaneMode &&
    device.mobileData &&
    device.apn === 'internet' &&
    !device.needsRestart &&
    (!state.abroad || (line.roaming && device.dataRoaming))
  );
}

/** What the phone's status screen shows (the user's `check_status`). */
export function statusScreen(state: HelpdeskState): { [key: string]: Json } {
  const { line, device } = state;
  const service = device.airplaneMode
    ? 'none (airplane mode)'
    : line.status !== 'active' || device.needsRestart
      ? 'no service'
      : 'connected';
  return {
    airplane_mode: device.airplaneMode ? 'on' : 'off',
    apn: device.apn,
    data_roaming: device.dataRoaming ? 'on' : 'off',
    internet: internetWorks(state) ? 'working' : 'not working',
    location: state.abroad ? 'abroad' : 'home',
    mobile_data: device.mobileData ? 'on' : 'off',
    service,
  };
}
