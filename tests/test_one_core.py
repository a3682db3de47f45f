"""Evaluation on one CPU core: no reference solution may wait on itself.

A `jax.pure_callback` inside a compiled evaluation places its arguments on the CPU device
through the thread pool that is running the computation which called it; with one core
and another computation in flight (training's last chunk) it waited forever (the Burgers
and Allen–Cahn references, issue 21). Every built-in problem's evaluation runs here on
one core, each reference evaluation queued behind a running computation, with a timeout
that only a hang can reach. Each problem runs in a fresh process (forked from one that
has imported everything but started no JAX backend): the hang shows in a fresh XLA
client, not always in one that has already run other work.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pinnkit.problems import PROBLEMS

ROOT = Path(__file__).resolve().parents[1]

# Problems whose defaults need arguments, or a lighter reference than the default.
PARAMS = {
    "poisson": {"source": 1.0},
    "expression": yaml.safe_load((ROOT / "configs/tiny/expr_poisson2d.yaml").read_text())[
        "problem"]["params"],
    "poisson_domain": yaml.safe_load((ROOT / "configs/tiny/poisson_hole.yaml").read_text())[
        "problem"]["params"],
    "incompressible_flow": yaml.safe_load((ROOT / "configs/tiny/flow_channel.yaml").read_text())[
        "problem"]["params"],
    "periodic_flow": {"nu": 0.01, "T": 0.5, "n": 16, "n_times": 5},
    "pipe_flow": {**yaml.safe_load((ROOT / "configs/tiny/pipe_mesh.yaml").read_text())["problem"]["params"],
                  "domain": {"mesh": {"file": str(ROOT / "configs/meshes/bent_pipe.stl")}}},
    "dfg_assimilation": {"data": str(ROOT / "configs/data/dfg2_probes.npz"),
                         "reference": str(ROOT / "configs/data/dfg2_fields.npz"), "samples": 8},
    "williamson6": {"days": 0.25, "reference_truncation": 42, "reference_dt_s": 1200.0},
}

CHILD = r"""
import json, os, sys, time
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
import equinox as eqx, jax, jax.numpy as jnp, numpy as np
from pinnkit.parallel.mesh import evaluate_sharded, make_mesh, predict_sharded
from pinnkit.problems import PROBLEMS
from pinnkit.nn.evaluate import predict
from pinnkit.run.metrics import evaluate

params, cache, timeout = json.loads(sys.argv[1]), sys.argv[2], float(sys.argv[3])


def run(name):
    kw = dict(params.get(name, {}))
    if name == "williamson6":
        kw["reference_cache"] = cache
    problem = PROBLEMS[name](**kw)
    mesh = make_mesh(1)
    busy = jax.jit(lambda a: jnp.tanh(a @ a) @ a)
    big = jnp.full((1200, 1200), 1e-3)
    net = eqx.nn.MLP(problem.domain.dim, len(problem.out_names), 8, 1, key=jax.random.key(0))
    # A callback argument above ~100 kB is placed asynchronously: 16384 rows of 2 floats.
    res = int(16384 ** (1 / problem.domain.dim)) + 1
    pts = problem.domain.grid(res)[0][:16384]
    if problem.reference is not None:  # queued behind a running computation
        busy(big), predict(problem.reference, pts, 16384)
        busy(big), predict_sharded(problem.reference, pts, mesh, 16384)
    busy(big)
    errs, grid = evaluate_sharded(net, problem, mesh, 9, 16384, jnp.float32, grid=True)
    busy(big)
    again = evaluate(net, problem, 9, 16384)[0]
    assert grid["pred"].shape[0] == grid["points"].shape[0]
    return {"problem": name, "rel_l2": errs.get("rel_l2", {}), "again": again.get("rel_l2", {})}


for name in sorted(PROBLEMS):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # a fresh JAX backend per problem
        os.close(r)
        try:
            out = json.dumps(run(name))
        except BaseException as e:
            out = json.dumps({"problem": name, "error": repr(e)})
        os.write(w, out.encode())
        os._exit(0)
    os.close(w)
    t0 = time.monotonic()
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        if time.monotonic() - t0 > timeout:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            print(json.dumps({"problem": name, "error": f"hung for {timeout} s"}), flush=True)
            break
        time.sleep(0.05)
    else:
        with os.fdopen(r) as f:
            print(f.read(), flush=True)
"""


@pytest.mark.slow
def test_every_problem_evaluates_on_one_core(tmp_path):
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    # Per-problem timeout: only a hang reaches it (the slowest problem takes ~15 s).
    r = subprocess.run([sys.executable, "-c", CHILD, json.dumps(PARAMS), str(tmp_path), "120"],
                       env=env, capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    done = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert [d for d in done if "error" in d] == []
    assert {d["problem"] for d in done} == set(PROBLEMS)
    for d in done:  # the host path (metrics.evaluate) and the sharded one agree
        for k, v in d["rel_l2"].items():
            assert abs(v - d["again"][k]) <= 1e-5 * max(v, 1e-30), d
    with_ref = {d["problem"] for d in done if d["rel_l2"]}
    assert {"burgers", "allen_cahn", "burgers_inverse"} <= with_ref
