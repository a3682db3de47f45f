"""Golden loss histories: record every step's loss of a set of short runs, and check a
later checkout against the record (refactors must not change a single bit).

    python scripts/golden.py record            # writes tests/golden/loss_histories.json
    python scripts/golden.py check [NAME ...]  # re-runs and compares (exit 1 on a change)

Each case is one `pinnkit train` process (the real CLI, one CPU device, ``log_every=1``,
no plots), so the record follows the command a user runs. The file stores the machine's
fingerprint (CPU model and flags, jax/jaxlib versions, XLA_FLAGS): on the machine that
recorded it the check is bitwise; elsewhere float results depend on the instruction set
(a different CPU rounds differently after the first steps), so `check` compares only the
first logged losses to a tolerance and says so.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "tests" / "golden" / "loss_histories.json"

# (name, config, overrides): every tiny config, and short runs of four full recipes
# (each keeps all of its phases, so the Adam -> L-BFGS / natural-gradient hand-over is in).
TINY = sorted(p.stem for p in (ROOT / "configs" / "tiny").glob("*.yaml"))
CASES = [(f"tiny/{n}", f"configs/tiny/{n}.yaml", []) for n in TINY] + [
    ("windows/allen_cahn", "configs/tiny/allen_cahn.yaml", ["train.time_windows=2", "train.steps=100"]),
    ("windows/climate_tracer", "configs/tiny/climate_tracer.yaml", ["train.time_windows=2"]),
    ("poisson2d", "configs/poisson2d.yaml",
     ["train.steps=150", "optim.phases.1.steps=50"]),
    ("ns_kovasznay", "configs/ns_kovasznay.yaml",
     ["train.steps=80", "optim.phases.0.steps=60", "sampler.batch.momentum=512",
      "sampler.batch.continuity=512", "sampler.batch.boundary=128"]),
    ("burgers_f64", "configs/burgers_f64.yaml",
     ["train.steps=120", "optim.phases.0.steps=100", "train.chunk=20", "train.eval_every=0",
      "weighting.update_every=50", "sampler.batch.pde=1024"]),
    # the 6144 points it was recorded with (the shipped C2 configs take 4096 since issue 17)
    ("climate_tracer_window", "configs/climate_tracer_window.yaml",
     ["train.steps=23", "optim.phases.0.steps=20", "optim.phases.1.steps=3", "train.chunk=10",
      "train.eval_every=0", "sampler.batch.transport=6144"]),
]
COMMON = ["train.log_every=1", "checkpoint.every=0"]


def fingerprint() -> dict:
    flags, model = "", platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and not model:
                model = line.split(":", 1)[1].strip()
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
            if line.startswith("flags"):
                flags = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": model,
        "flags_sha256": hashlib.sha256(" ".join(sorted(flags.split())).encode()).hexdigest()[:16],
        "cpu_id": _cpuinfo("cpu family", "model", "stepping"),
        "caches": _caches(),
        "jax": metadata.version("jax"),
        "jaxlib": metadata.version("jaxlib"),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
    }


def _cpuinfo(*keys: str) -> str:
    """``family/model/stepping`` of the first CPU ("" where unreadable)."""
    found = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            k, _, v = line.partition(":")
            if k.strip() in keys and k.strip() not in found:
                found[k.strip()] = v.strip()
            if not line.strip() and found:
                break
    except OSError:
        pass
    return "/".join(found.get(k, "") for k in keys)


def _caches() -> str:
    """CPU 0's caches, e.g. ``L1d 48K L1i 32K L2 2048K L3 307200K``. Two machines with the
    same model name and flags rounded differently here (a 1-ulp change at step 1 of
    burgers_f64, 2026-12-06): the model number and caches, which matmul blocking can follow,
    are in the fingerprint since."""
    from pinnkit.train.accumulate import cpu_caches

    suffix = {"Data": "d", "Instruction": "i"}
    return " ".join(f"L{level}{suffix.get(kind, '')} {size}" for level, kind, size in cpu_caches())


def same_machine(recorded: dict, here: dict) -> bool:
    """Whether a record's fingerprint is this machine's: every key it has equals ours (a
    key it lacks, from a record older than the key, is not compared)."""
    return all(here.get(k) == v for k, v in recorded.items())


def run_case(config: str, overrides: list[str]) -> dict:
    """Runs one case in a fresh process; returns its per-step losses and summary errors."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        cmd = [sys.executable, "-m", "pinnkit.cli", "train", config, "--out", str(out),
               "--devices", "1", "--quiet", "--no-plots"]
        for o in COMMON + overrides:
            cmd += ["--set", o]
        env = dict(os.environ, JAX_PLATFORMS="cpu")
        p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
        if p.returncode != 0:
            raise RuntimeError(f"{config}: exit {p.returncode}\n{p.stderr[-3000:]}")
        losses = []
        files = [(0, out / "metrics.jsonl")] if not (out / "windows").is_dir() else [
            (int(d.name[1:]), d / "metrics.jsonl") for d in sorted((out / "windows").iterdir())]
        for w, path in files:
            recs = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
            losses += [[w, r["step"], r["loss"]] for r in recs if "loss" in r]
        summary = json.loads((out / "summary.json").read_text())
        return {"losses": losses, "rel_l2": summary["rel_l2"], "steps": summary["steps"]}


def record(names: list[str]) -> None:
    """Records ``names`` (default: every case). Cases recorded on another machine than the
    file's (its ``fingerprint``) keep the file's and carry their own, so that the other
    cases stay bitwise-comparable where they were recorded (`case_fingerprint`)."""
    old = json.loads(RECORD.read_text()) if RECORD.exists() else {"cases": {}}
    cases = dict(old.get("cases", {}))
    here = fingerprint()
    keep = bool(names) and not same_machine(old.get("fingerprint", here), here)
    for name, config, overrides in CASES:
        if names and name not in names:
            continue
        print(f"recording {name} ...", file=sys.stderr, flush=True)
        cases[name] = {"config": config, "overrides": overrides, **run_case(config, overrides),
                       **({"fingerprint": here} if keep else {})}
    RECORD.parent.mkdir(parents=True, exist_ok=True)
    RECORD.write_text(json.dumps({"fingerprint": old["fingerprint"] if keep else here, "common": COMMON,
                                  "cases": cases}, indent=1) + "\n")
    print(f"wrote {RECORD}", file=sys.stderr)


def case_fingerprint(record: dict, name: str) -> dict:
    """The machine that recorded case ``name``: its own ``fingerprint``, else the file's."""
    return record["cases"][name].get("fingerprint", record["fingerprint"])


def compare(name: str, want: dict, got: dict, exact: bool, rtol: float = 1e-4, head: int = 3) -> list[str]:
    """Differences between a recorded and a new case, as messages (empty: equal)."""
    w, g = want["losses"], got["losses"]
    if exact:
        if len(w) != len(g):
            return [f"{name}: {len(g)} loss records, recorded {len(w)}"]
        bad = [(a, b) for a, b in zip(w, g, strict=True) if a != b]
        if bad:
            a, b = bad[0]
            return [f"{name}: {len(bad)} of {len(w)} losses differ; first at window {a[0]} step "
                    f"{a[1]}: recorded {a[2]!r}, now {b[2]!r}"]
        return []
    msgs = []
    for a, b in list(zip(w, g, strict=False))[:head]:
        if a[:2] != b[:2] or abs(a[2] - b[2]) > rtol * abs(a[2]):
            msgs.append(f"{name}: step {a[1]}: recorded {a[2]!r}, now {b[2]!r} (rtol {rtol})")
    return msgs


def check(names: list[str]) -> int:
    rec = json.loads(RECORD.read_text())
    failures = []
    for name, case in sorted(rec["cases"].items()):
        if names and name not in names:
            continue
        exact = same_machine(case_fingerprint(rec, name), fingerprint())
        if not exact:
            print(f"golden: {name} was recorded on another machine; comparing the first losses only",
                  file=sys.stderr)
        got = run_case(case["config"], case["overrides"])
        failures += compare(name, case, got, exact)
        print(f"{name}: {'ok' if not failures else 'DIFFERS'}", file=sys.stderr, flush=True)
    for f in failures:
        print(f, file=sys.stderr)
    return 1 if failures else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=("record", "check"))
    ap.add_argument("names", nargs="*", help="case names (default: all)")
    a = ap.parse_args()
    if a.mode == "record":
        record(a.names)
        return 0
    return check(a.names)


if __name__ == "__main__":
    sys.exit(main())
