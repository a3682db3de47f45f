"""End to end through the `pinnkit` command: run directory contents, determinism,
SIGTERM + --resume, eval/plot/problems and load_run (the notebooks: tests/test_notebooks.py)."""

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pinnkit.train import checkpoint as ckpt

ROOT = Path(__file__).resolve().parents[1]
TINY = str(ROOT / "configs" / "tiny" / "poisson2d.yaml")
ARGS = ["--set", "train.steps=600", "--set", "train.chunk=20", "--quiet"]
# Subprocesses share the test session's persistent compilation cache (see conftest).
ENV = {
    **os.environ, "JAX_PLATFORMS": "cpu",
    "JAX_COMPILATION_CACHE_DIR": os.environ.get("PINNKIT_TEST_JAX_CACHE", "/tmp/pinnkit-test-jax-cache"),
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
    "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
}


def pinnkit(*args, **kw):
    return subprocess.run([sys.executable, "-m", "pinnkit.cli", *args], env=ENV,
                          capture_output=True, text=True, timeout=600, **kw)


def final_sha(run_dir: Path) -> str:
    return ckpt.latest_valid(run_dir / "checkpoints")[1]["payload_sha256"]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    from conftest import TRAINED_SEED

    out = tmp_path_factory.mktemp("runs") / "tiny"
    r = pinnkit("train", TINY, "--out", str(out), *ARGS, "--set", f"train.seed={TRAINED_SEED}")
    assert r.returncode == 0, r.stderr
    return out


@pytest.mark.trained
def test_run_directory(tiny_run, trained):
    names = {p.name for p in tiny_run.iterdir()}
    assert {"config.yaml", "metrics.jsonl", "summary.json", "checkpoints", "plots"} <= names
    s = json.loads((tiny_run / "summary.json").read_text())
    assert s["outcome"] == "successful" and s["steps"] == 600
    trained.check("rel_l2 u", s["rel_l2"]["u"], "<", 0.05)
    assert s["linf"]["u"] > 0 and s["steps_per_s"] > 0
    assert {p.name for p in (tiny_run / "plots").iterdir()} == {"u.png", "loss.png"}
    cfg = (tiny_run / "config.yaml").read_text()
    assert "versions:" in cfg and "jax:" in cfg and "steps: 600" in cfg
    recs = [json.loads(x) for x in (tiny_run / "metrics.jsonl").read_text().splitlines()]
    steps = [r["step"] for r in recs if "loss" in r]
    assert steps == sorted(set(steps)) and steps[0] == 0 and steps[-1] == 599


def test_same_config_same_summary(tiny_run, tmp_path):
    r = pinnkit("train", TINY, "--out", str(tmp_path / "again"), *ARGS)
    assert r.returncode == 0, r.stderr
    a = json.loads((tiny_run / "summary.json").read_text())
    b = json.loads((tmp_path / "again" / "summary.json").read_text())
    assert a["rel_l2"] == b["rel_l2"] and a["linf"] == b["linf"]  # bit-identical floats
    assert final_sha(tiny_run) == final_sha(tmp_path / "again")


def test_sigterm_then_resume_reproduces_uninterrupted(tiny_run, tmp_path):
    out = tmp_path / "term"
    proc = subprocess.Popen([sys.executable, "-m", "pinnkit.cli", "train", TINY, "--out", str(out), *ARGS],
                            env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    metrics = out / "metrics.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if metrics.exists() and metrics.read_text().count("\n") >= 3:  # a chunk or more done
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    s = json.loads((out / "summary.json").read_text())
    if s["outcome"] == "successful":
        pytest.skip("the run finished before the signal arrived")  # slow/fast machine race
    assert s["outcome"] == "interrupted" and 0 < s["steps"] < 600 and "resume" in err
    # the command the last line prints, as printed
    cmd = re.search(r"^pinnkit: to continue, run: pinnkit (train .*)$", err, flags=re.M).group(1)
    r = pinnkit(*shlex.split(cmd), "--quiet")
    assert r.returncode == 0, r.stderr
    assert json.loads((out / "summary.json").read_text())["steps"] == 600
    assert final_sha(out) == final_sha(tiny_run)


def test_refuses_to_overwrite_a_run(tiny_run):
    r = pinnkit("train", TINY, "--out", str(tiny_run), "--quiet")
    assert r.returncode == 2 and "already holds files" in r.stderr and "Traceback" not in r.stderr


def test_eval_plot_problems(tiny_run):
    r = pinnkit("eval", str(tiny_run))
    assert r.returncode == 0, r.stderr
    s = json.loads((tiny_run / "summary.json").read_text())
    assert json.loads(r.stdout)["rel_l2"] == s["rel_l2"]
    (tiny_run / "plots" / "u.png").unlink()
    r = pinnkit("plot", str(tiny_run))
    assert r.returncode == 0 and (tiny_run / "plots" / "u.png").stat().st_size > 10_000
    r = pinnkit("problems")
    assert r.returncode == 0 and "poisson2d(kx=1, ky=1, amplitude=1.0)" in r.stdout
    r = pinnkit("eval", str(tiny_run / "nope"))
    assert r.returncode == 2 and "not a pinnkit run directory" in " ".join(r.stderr.split())


def test_load_run(tiny_run):
    import numpy as np

    import pinnkit

    run = pinnkit.load_run(tiny_run)
    assert run.step == 600 and run.problem.out_names == ("u",)
    g = run.grid(41)
    assert g["u"].shape == (41, 41) and g["x"][-1, 0] == 1.0
    rel = np.linalg.norm(g["u"] - g["u_ref"]) / np.linalg.norm(g["u_ref"])
    assert rel == pytest.approx(run.summary["rel_l2"]["u"], rel=1e-6)
    assert len(run.loss_history()["loss"]) == 61
