/**
 * Text from records, files and user code made safe to print: control characters (ANSI escape
 * sequences, carriage returns, backspaces, C1 codes) and bidirectional overrides are shown as
 * `\xNN` / `\uNNNN` instead of reaching the terminal, which would obey them.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
// biome-ignore lint/suspicious/noControlCharactersInRegex: as above, with tab and newline too
const UNSAFE_ONE_LINE = /[\u0000-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

const escapeChar = (c: string): string => {
  const code = c.charCodeAt(0);
  return code < 0x100 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
};

/** Escapes control characters; newlines and tabs stay (the text may span lines). */
export function terminalText(text: string): string {
  return text.replace(UNSAFE, escapeChar);
}

/** One line: line breaks (with the indentation around them) become "; ", every other control is escaped. */
export function terminalLine(text: string): string {
  return text
    .trim()
    .replace(/[ \t]*\r?\n\s*/g, '; ')
    .replace(UNSAFE_ONE_LINE, escapeChar);
}
