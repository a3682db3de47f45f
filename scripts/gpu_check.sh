#!/bin/bash
# One prepared GPU check (issue 4): P1/P2 training throughput (collocation points per
# second) at global batches 4k..1M on the visible GPU(s), plus the scaling correctness
# check. Writes $OUT/gpu_check.json and $OUT/gpu_check.md (or ./ when OUT is unset);
# copy the table into docs/benchmarks.md. scripts/accel_check.sh is the same check for
# whatever accelerator JAX picks (run on a TPU), with accuracy and a CPU baseline.
#
#   bash scripts/gpu_check.sh            # ~5 minutes on one H200
#   bash scripts/gpu_check.sh accuracy   # issue 7's GPU accuracy runs instead: P6 and P3 with
#                                        # a GPU budget (configs/gpu/), 270 s cap each; run dirs
#                                        # and summaries under $OUT/accuracy/ (a capped run
#                                        # stops cleanly at its last checkpoint/window)
set -euo pipefail
OUT=${OUT:-.}
PY=${PYTHON:-python}
mkdir -p "$OUT"
if [ "${1:-}" = accuracy ]; then
  for cfg in allen_cahn burgers; do
    # SIGTERM at the cap: pinnkit checkpoints and writes summary.json before exiting
    timeout -s TERM 270 "$PY" -m pinnkit.cli train "configs/gpu/$cfg.yaml" \
      --out "$OUT/accuracy/$cfg" --overwrite --no-plots > "$OUT/accuracy_$cfg.log" 2>&1 || true
    tail -3 "$OUT/accuracy_$cfg.log"
  done
  exit 0
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu_check.md"
"$PY" -c "import jax; print('jax', jax.__version__, jax.devices())" | tee -a "$OUT/gpu_check.md"
"$PY" scripts/bench_scaling.py --mode batch --problems P1,P2 --steps 100 --chunk 25 \
    --batches 4096,16384,65536,262144,1048576 --json "$OUT/gpu_check.json" | tee -a "$OUT/gpu_check.md"
