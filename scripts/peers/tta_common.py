"""Time-to-accuracy bookkeeping shared by the peer runners in this folder.

numpy-only: it runs inside every peer venv. It imports the peer harness's ``common.py``
(points, initial weights, the P1 evaluation grid and rel. L2) from ``$PEERS_DIR``.

The training clock starts just before the first training step (compilation included,
set-up -- imports, points, network -- excluded and reported apart) and is paused while
the error is evaluated, so evaluations cost nothing on it. A run stops at the first
evaluation with rel. L2 <= threshold, when its process CPU time on the clock passes
``cap_cpu`` or its wall time passes ``cap_wall``, or at the end of its recipe.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.environ["PEERS_DIR"])
import common as C  # noqa: E402

PROBLEM = "P1"
X_EVAL, U_EXACT = C.eval_grid(PROBLEM)  # 101 x 101 on [0, 1]^2, float64


def parse_args(extra=()):
    """``--out JSON --threshold --every --cap-cpu --cap-wall`` (+ runner flags in ``extra``:
    ``(name, type, default, help)``)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="result JSON path")
    ap.add_argument("--threshold", type=float, default=1e-3)
    ap.add_argument("--every", type=int, default=100, help="evaluate every this many steps")
    ap.add_argument("--cap-cpu", type=float, default=420.0, help="process CPU seconds on the clock")
    ap.add_argument("--cap-wall", type=float, default=900.0, help="wall seconds on the clock")
    for name, typ, default, hlp in extra:
        ap.add_argument(name, type=typ, default=default, help=hlp)
    return ap.parse_args()


class Trace:
    """The error trace of one run against the training clock (see the module docstring)."""

    def __init__(self, library: str, recipe: str, args):
        self.library, self.recipe, self.args = library, recipe, args
        self.records: list[dict] = []
        self.stopped = "end of recipe"
        self.setup_wall = time.time() - C.T_PROCESS_START
        self.setup_cpu = time.process_time()
        self.eval_wall = self.eval_cpu = 0.0
        self.start()

    def start(self):
        """(Re)starts the clock at zero: call just before the first training step."""
        self.wall0, self.cpu0 = time.perf_counter(), time.process_time()

    def now(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall0, time.process_time() - self.cpu0

    def record(self, step: int, predict, phase: str) -> bool:
        """Evaluates ``predict(X) -> (M, 1)`` off the clock, appends the record; True = stop."""
        wall, cpu = self.now()
        err = C.rel_l2(predict(X_EVAL), U_EXACT)
        dw, dc = time.perf_counter() - self.wall0 - wall, time.process_time() - self.cpu0 - cpu
        self.wall0, self.cpu0 = self.wall0 + dw, self.cpu0 + dc  # pause: the eval is off the clock
        self.eval_wall, self.eval_cpu = self.eval_wall + dw, self.eval_cpu + dc
        return self.log(step, err, wall, cpu, phase)

    def log(self, step: int, err: float, wall: float, cpu: float, phase: str) -> bool:
        """Appends an already evaluated record; True = stop (threshold or cap)."""
        self.records.append({"step": int(step), "rel_l2": float(err), "wall_s": round(wall, 3),
                             "cpu_s": round(cpu, 3), "phase": phase})
        print(f"[tta] {self.library} step {step} ({phase}) rel_l2 {err:.3e} "
              f"wall {wall:.1f} s cpu {cpu:.1f} s", flush=True)
        if err <= self.args.threshold:
            self.stopped = "threshold"
        elif cpu >= self.args.cap_cpu or wall >= self.args.cap_wall:
            self.stopped = "cap"
        else:
            return False
        return True

    def write(self, versions: dict, **extra):
        """Writes the result JSON (``--out``)."""
        hit = next((r for r in self.records if r["rel_l2"] <= self.args.threshold), None)
        res = {"library": self.library, "recipe": self.recipe, "threshold": self.args.threshold,
               "every": self.args.every, "cap_cpu_s": self.args.cap_cpu,
               "cap_wall_s": self.args.cap_wall, "stopped": self.stopped, "reached": hit,
               "final": self.records[-1] if self.records else None, "trace": self.records,
               "setup_wall_s": round(self.setup_wall, 3), "setup_cpu_s": round(self.setup_cpu, 3),
               "eval_wall_s": round(self.eval_wall, 3), "eval_cpu_s": round(self.eval_cpu, 3),
               "points_digest": C.points_digest(PROBLEM), "versions": versions, **extra}
        with open(self.args.out, "w") as f:
            json.dump(res, f, indent=1)
        print("[tta] wrote", self.args.out, flush=True)
