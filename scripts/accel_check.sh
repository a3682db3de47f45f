#!/bin/bash
# One prepared accelerator check for whatever JAX picks (a TPU or GPUs; on a CPU-only
# machine it runs the same steps on the CPU). Baseline measured in the same run: the
# machine's own CPU (JAX_PLATFORMS=cpu), run alongside on the cores CPU_CORES names.
#
#   1. the devices and versions;
#   2. P1 trained end to end with `configs/poisson2d.yaml` (float32) at
#      numerics.matmul_precision highest (the default) and default: rel. L2 and steps/s;
#   3. P1/P2 training throughput (collocation points per second) at global batches
#      4k..1M, matmul precision highest, then P1 at precision default;
#   4. `configs/poisson2d_f64.yaml`: does float64 run there at all;
#   meanwhile on the CPU: `configs/poisson2d.yaml` and P1/P2 throughput at 4k..64k.
#
# Every step has a time cap (a capped training stops at a chunk boundary and still writes
# summary.json); the whole script ends within DEADLINE seconds (default 560). Writes
# under $OUT (default ./accel_check): log.txt, accel.json, accel_default.json, cpu.log,
# cpu.json, train.json (the runs' summary.json files). Copy the tables into docs/benchmarks.md.
#
#   bash scripts/accel_check.sh                     # ~8 minutes on one TPU v5e chip
#   CPU_CORES=6-12 bash scripts/accel_check.sh      # the CPU baseline on cores 6..12
set -uo pipefail
OUT=${OUT:-accel_check}
PY=${PYTHON:-python}
DEADLINE=${DEADLINE:-560}
RUNS=${RUNS:-$(mktemp -d)}
PIN=()  # the CPU side's taskset
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"
LOG="$OUT/log.txt"

cap() {  # seconds for the next step: its own cap, or what is left before DEADLINE
  local left=$((DEADLINE - SECONDS - 10))
  [ "$left" -lt "$1" ] && echo "$left" || echo "$1"
}
step() { echo; echo "### $* (t=${SECONDS}s)"; }
train() {  # train NAME CAP CONFIG [pinnkit options]: one run, its last line, summary kept
  local name=$1 t; t=$(cap "$2"); shift 2
  [ "$t" -gt 20 ] || { echo "$name: skipped, no time left"; return; }
  echo "\$ pinnkit train $* --out RUNS/$name --overwrite --no-plots --quiet  # cap ${t}s"
  timeout -k 20 "$t" "${PIN[@]}" "$PY" -m pinnkit.cli train "$@" --out "$RUNS/$name" --overwrite --no-plots \
    --quiet --grace-period 20 2>&1 | tail -4
  echo "exit ${PIPESTATUS[0]}"
}
bench() {  # bench NAME CAP [bench_scaling options]
  local name=$1 t; t=$(cap "$2"); shift 2
  [ "$t" -gt 20 ] || { echo "$name: skipped, no time left"; return; }
  echo "\$ python scripts/bench_scaling.py --mode batch $* --json $name.json  # cap ${t}s"
  timeout -k 10 "$t" "${PIN[@]}" "$PY" scripts/bench_scaling.py --mode batch "$@" --json "$OUT/$name.json" 2>&1 \
    | grep -v '^WARNING\|^I0000\|^E0000'
  echo "exit ${PIPESTATUS[0]}"
}

cpu_side() {  # the CPU baseline, in the background on CPU_CORES
  [ -n "${CPU_CORES:-}" ] && command -v taskset > /dev/null && PIN=(taskset -c "$CPU_CORES")
  export JAX_PLATFORMS=cpu
  step "CPU: P1 default config, float32"
  train cpu_p1 240 configs/poisson2d.yaml
  step "CPU: P1/P2 throughput"
  bench cpu 200 --problems P1,P2 --steps 20 --chunk 5 --cpu-devices 1 --devices 1 \
    --batches 4096,16384,65536
}

{
  step "devices"
  date -u
  command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version \
    --format=csv,noheader
  "$PY" -c "import jax, jaxlib, equinox, optax, pinnkit, sys; print('python', sys.version.split()[0],
'| jax', jax.__version__, '| jaxlib', jaxlib.__version__, '| equinox', equinox.__version__,
'| optax', optax.__version__); print('jax from', jax.__file__); print('pinnkit from', pinnkit.__file__);
print(jax.devices()); print('default backend', jax.default_backend())"
  nproc; free -g | head -2
} 2>&1 | tee "$LOG"

cpu_side > "$OUT/cpu.log" 2>&1 &
CPU_PID=$!

{
  step "P1 default config, float32, matmul precision highest (the config default)"
  train p1_highest 110 configs/poisson2d.yaml
  step "P1 default config, float32, matmul precision default"
  train p1_default 110 configs/poisson2d.yaml --set numerics.matmul_precision=default
  step "P1/P2 throughput, matmul precision highest"
  bench accel 270 --problems P1,P2 --steps 100 --chunk 25 --batches 4096,16384,65536,262144,1048576
  step "P1 throughput, matmul precision default"
  bench accel_default 80 --problems P1 --steps 100 --chunk 25 --batches 4096,65536,1048576 \
    --matmul-precision default
  step "P1 float64 config (numerics.x64: true)"
  train p1_f64 60 configs/poisson2d_f64.yaml
} 2>&1 | tee -a "$LOG"

wait "$CPU_PID"
"$PY" - "$RUNS" "$OUT/train.json" <<'EOF' 2>&1 | tee -a "$LOG"
import json, pathlib, sys
runs, out = pathlib.Path(sys.argv[1]), {}
for s in sorted(runs.glob("*/summary.json")):
    out[s.parent.name] = json.loads(s.read_text())
pathlib.Path(sys.argv[2]).write_text(json.dumps(out, indent=1))
print("\n### summaries")
for name, d in out.items():
    print(name, {k: d.get(k) for k in ("outcome", "steps", "wall_s", "steps_per_s", "compile_s", "rel_l2")})
EOF
echo "done in ${SECONDS}s" | tee -a "$LOG"
