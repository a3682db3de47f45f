"""Fingerprints of the compiled training chunk of the peer protocols (P1, P2, P3 of
`scripts/bench_train.py`): sha256 of the lowered StableHLO and of XLA's optimised HLO with
source locations removed (file and function tables, stack frames, op metadata), so two
checkouts in different folders compare equal exactly when they compile the same program.

A refactor of the training code that prints the same fingerprints as the code before it
runs the same instructions: its speed is the same by construction, and the bench's
steps/s differ only by the machine's noise.

    python scripts/chunk_fingerprint.py [P1 P2 P3]

Runs on this layout and on the one before the training redesign (its names are tried
second), so the two can be compared side by side.
"""

import hashlib
import os
import re
import sys
from pathlib import Path

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_train  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from pinnkit.parallel.mesh import make_mesh, replicate  # noqa: E402
from pinnkit.run.build import build_run  # noqa: E402

try:
    from pinnkit.train.loss import make_loss
    from pinnkit.train.step import TrainState, make_chunk, point_arrays, split_model
except ImportError:  # the layout before the training redesign
    from pinnkit.train.loop import TrainState, make_chunk, make_loss, point_arrays, split_model
try:  # the chunk's arguments after (arrays, state): the phase's numbers (issue 32) and more
    from pinnkit.train.step import chunk_args
except ImportError:  # before them: none for a first-order phase
    chunk_args = None

_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")


def without_locations(hlo: str) -> str:
    """Optimised HLO text less everything that names source files or lines."""
    hlo = re.sub(r", metadata=\{[^}]*\}", "", hlo)
    hlo = re.sub(r"^HloModule \S+", "HloModule", hlo, flags=re.M)
    return "\n".join(re.sub(r", stack_frame_id=\d+", "", line) for line in hlo.splitlines()
                     if not re.match(r"^\d+ ", line) and line.strip() not in _TABLES)


def fingerprints(problem: str, chunk: int = 50) -> tuple[str, str]:
    run = build_run(bench_train.pinnkit_config(problem, "taylor", chunk), mesh=make_mesh(1))
    params, static = split_model(run)
    params = replicate(params, run.mesh)
    phase = run.phases[0]
    init = phase.init if hasattr(phase, "init") else phase.optimizer.init  # old Phase: no init
    state = replicate(TrainState(params, init(params), jnp.asarray(0, jnp.int32)), run.mesh)
    args = () if chunk_args is None else chunk_args(phase, run.dtype, chunk)
    lowered = make_chunk(make_loss(run, static), phase, chunk, jax.random.key(2)).lower(
        point_arrays(run), state, *args)
    optimised = without_locations(lowered.compile().compiled.as_text())
    digest = lambda text: hashlib.sha256(text.encode()).hexdigest()[:16]  # noqa: E731
    return digest(lowered.as_text()), digest(optimised)


def main(argv=None) -> int:
    for problem in (argv if argv is not None else sys.argv[1:]) or ["P1", "P2", "P3"]:
        stablehlo, optimised = fingerprints(problem)
        print(f"{problem}: stablehlo {stablehlo}  optimised {optimised}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
