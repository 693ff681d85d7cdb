// Preloaded into a child process (NODE_OPTIONS=--import=…/peak-rss.mjs): its peak resident memory,
// in bytes, as the last stderr line when it exits.
process.on('exit', () => process.stderr.write(`\npeak-rss ${process.resourceUsage().maxRSS * 1024}\n`));
