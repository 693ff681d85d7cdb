#!/usr/bin/env bash
# The GPU check: run on a GPU machine, from the repository root, without internet.
#
#   bench/gpu-check.sh [--quick | --smoke] [--out FILE]        (default FILE: gpu-check.json)
#
# It needs either a full install (node_modules with the optional webgpu packages) or the bundle
# that bench/gpu-bundle.ts builds (.tmp/gpu-bundle.tar.xz, ~28 MiB with a node binary: bring it
# along; it is unpacked here when .tmp/gpu-bundle/ is absent). It records:
#   1. the machine: nvidia-smi and `vulkaninfo --summary` when installed;
#   2. what automatic backend selection picks here, and why (a tiny bench/generate.ts run);
#   3. bench/generate.ts (prefill and cached-decode tokens/s, each decoder the backend has) and
#      bench/train.ts (SFT and GRPO-update tokens/s, one thread) on webgpu, on tensorflow-gpu when
#      @tensorflow/tfjs-node-gpu is installed (full install only), and on wasm as the CPU baseline;
# and writes every figure (each bench's --json output) to FILE. Each run's stderr goes to
# FILE.logs/. Exit status 0 when webgpu ran both benches on a hardware adapter, 1 otherwise.
# --quick: fewer steps and batches (about a quarter of the time). --smoke: a tiny model and few
# steps, to check the script itself on a machine without a GPU (its figures mean nothing).
set -uo pipefail
cd "$(dirname "$0")/.."
out=gpu-check.json
quick=0
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --smoke) quick=2 ;;
    --out) out="$2"; shift ;;
    *) echo "usage: bench/gpu-check.sh [--quick | --smoke] [--out FILE]" >&2; exit 2 ;;
  esac
  shift
done
logs="$out.logs"
rm -rf "$logs" && mkdir -p "$logs"

# --- how to run the benches: the bundle, or the sources through tsx -------------------------------
bundle=.tmp/gpu-bundle
if [ ! -f "$bundle/train.mjs" ] && [ -f "$bundle.tar.xz" ]; then tar -xJf "$bundle.tar.xz" -C .tmp; fi
if [ -f "$bundle/train.mjs" ]; then
  node="$bundle/node"; [ -x "$node" ] || node=node
  mode=bundle
  runner=("$node")
  script() { echo "$bundle/$1.mjs"; }
elif [ -d node_modules/tsx ]; then
  node=node
  mode=install
  runner=("$node" --import=tsx --conditions=source)
  script() { echo "bench/$1.ts"; }
else
  echo "no bundle ($bundle.tar.xz) and no node_modules: build the bundle with bench/gpu-bundle.ts" >&2
  exit 2
fi
"$node" -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 12) ? 0 : 1)' || {
  echo "Node.js >= 20.12 needed (found $("$node" --version 2>/dev/null || echo none)); build the bundle --with-node" >&2
  exit 2
}

# --- the machine ----------------------------------------------------------------------------------
echo "== machine" >&2
uname -a >"$logs/uname.txt"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$logs/nvidia-smi.txt" 2>&1
  cat "$logs/nvidia-smi.txt" >&2
fi
if command -v vulkaninfo >/dev/null; then
  vulkaninfo --summary >"$logs/vulkaninfo.txt" 2>&1
  sed -n '/^Devices:/,$p' "$logs/vulkaninfo.txt" >&2
else
  echo "vulkaninfo not installed (Debian: vulkan-tools); Dawn reports the adapter below" >&2
fi

# --- the runs -------------------------------------------------------------------------------------
model=()
if [ "$quick" = 2 ]; then
  batches=1,4
  steps=(--sft-steps 2 --rl-steps 1 --episodes 16 --rl-sequences 8)
  model=(--d-model 16 --layers 1)
elif [ "$quick" = 1 ]; then
  batches=1,16
  steps=(--sft-steps 3 --rl-steps 1)
else
  batches=1,16,64
  steps=(--sft-steps 12 --rl-steps 4)
fi
run() { # run NAME BACKEND BENCH ARGS...: the bench's --json line to $logs/NAME.json ('' BACKEND: automatic)
  local name="$1" backend="$2" which="$3"
  shift 3
  echo "== $name" >&2
  local start=$SECONDS env=(env -u AGENT_R1_BACKEND)
  [ -n "$backend" ] && env=(env AGENT_R1_BACKEND="$backend")
  if "${env[@]}" timeout 1200 "${runner[@]}" "$(script "$which")" "$@" --json >"$logs/$name.out" 2>"$logs/$name.err"; then
    tail -n 1 "$logs/$name.out" >"$logs/$name.json"
  else
    echo "   failed (exit $?); stderr: $logs/$name.err" >&2
    tail -n 5 "$logs/$name.err" >&2
  fi
  echo "$name ${backend:-auto} $which $((SECONDS - start))" >>"$logs/runs.txt"
}
# Automatic selection: the backend it picks here and its reason.
run auto "" generate --batches 1 --length 64 --d-model 16 --layers 1 --matmul-size 256
backends=(webgpu)
if [ "$mode" = install ] && [ -d node_modules/@tensorflow/tfjs-node-gpu ]; then backends+=(tensorflow-gpu); fi
backends+=(wasm)
for b in "${backends[@]}"; do
  # The reference matmul: 2048² for a GPU to reach its rate, 512² for a CPU thread.
  size=2048
  [ "$b" = wasm ] && size=512
  [ "$quick" = 2 ] && size=256
  run "generate-$b" "$b" generate --batches "$batches" --matmul-size "$size" "${model[@]}" ${model:+--length 64}
  run "train-$b" "$b" train --threads 1 "${steps[@]}" --matmul-size "$size" "${model[@]}"
done

# --- the figures, as one JSON file ----------------------------------------------------------------
"$node" - "$logs" "$out" "$mode" "$quick" <<'EOF'
const fs = require('node:fs');
const path = require('node:path');
const [logs, out, mode, quick] = process.argv.slice(2);
const read = (f) => (fs.existsSync(path.join(logs, f)) ? fs.readFileSync(path.join(logs, f), 'utf8') : null);
const runs = (read('runs.txt') ?? '').trim().split('\n').filter(Boolean).map((line) => {
  const [name, backend, bench, seconds] = line.split(' ');
  const json = read(`${name}.json`);
  const err = read(`${name}.err`) ?? '';
  return {
    name,
    backend,
    bench,
    seconds: Number(seconds),
    ok: json !== null,
    ...(json !== null ? { result: JSON.parse(json) } : { error: err.trim().split('\n').slice(-8).join('\n') }),
  };
});
const webgpu = runs.filter((r) => r.backend === 'webgpu');
const hardware = webgpu.length === 2 && webgpu.every((r) => r.ok && / hardware$/.test(r.result.reason));
const report = {
  date: new Date().toISOString(),
  mode,
  size: { 0: 'full', 1: 'quick', 2: 'smoke' }[quick],
  uname: (read('uname.txt') ?? '').trim(),
  nvidiaSmi: read('nvidia-smi.txt')?.trim() ?? null,
  vulkanSummary: read('vulkaninfo.txt'),
  autoSelected: runs.find((r) => r.name === 'auto')?.result
    ? { backend: runs.find((r) => r.name === 'auto').result.backend, reason: runs.find((r) => r.name === 'auto').result.reason }
    : null,
  webgpuOnHardware: hardware,
  runs,
};
fs.writeFileSync(out, JSON.stringify(report, null, 1) + '\n');
for (const r of runs) {
  const x = r.result;
  let what = r.ok ? '' : 'FAILED';
  if (x?.rows && r.bench === 'generate')
    what = x.rows.map((w) => `${w.path} batch ${w.batch}: decode ${w.decodeTokensPerSecond.toFixed(0)} tok/s (cache), prefill ${w.prefillTokensPerSecond.toFixed(0)} tok/s`).join('; ');
  if (x?.rows && r.bench === 'train') what = x.rows.map((w) => `${w.phase} ${w.tokensPerS.toFixed(0)} tok/s`).join('; ');
  process.stderr.write(`${r.name.padEnd(22)} ${(x?.backend ?? r.backend).padEnd(10)} ${String(r.seconds).padStart(5)} s  ${what}\n`);
}
process.stderr.write(`auto-selected: ${report.autoSelected ? `${report.autoSelected.backend} (${report.autoSelected.reason})` : 'unknown'}\n`);
process.stderr.write(`wrote ${out}\n`);
process.exit(hardware ? 0 : 1);
EOF
