/** What a user writes to end the conversation (τ²-bench's stop token). */
export const END_CONVERSATION = '###STOP###';
