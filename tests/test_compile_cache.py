"""The command's persistent compilation cache (`pinnkit.cli.jaxsetup.compilation_cache`)
and the compile seconds in summary.json (issue 32).

- where the cache goes: ``PINNKIT_JAX_CACHE`` (a folder, or ``off``), else
  ``$XDG_CACHE_HOME/pinnkit/jax``, else ``~/.cache/pinnkit/jax``;
- on by default: a first ``pinnkit train`` of a tiny config writes the training chunk's
  executable into ``$XDG_CACHE_HOME/pinnkit/jax``, and a second run of the same config
  loads it from there (JAX's own ``log_compiles`` line names the cache hit) and reports
  its compile seconds per phase in summary.json;
- ``PINNKIT_JAX_CACHE=off``: nothing is written, nothing is loaded.

No timing is asserted: the cache files and JAX's hit lines are the evidence.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

from pinnkit.cli.jaxsetup import cache_dir

ROOT = Path(__file__).resolve().parents[1]
ARGS = ["train", str(ROOT / "configs" / "tiny" / "poisson2d.yaml"), "--quiet", "--no-plots",
        "--set", "train.steps=4", "--set", "train.chunk=4", "--set", "eval.resolution=5"]


def test_cache_dir_from_the_environment(tmp_path):
    home = Path.home() / ".cache" / "pinnkit" / "jax"
    assert cache_dir({}) == home
    assert cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "pinnkit" / "jax"
    assert cache_dir({"PINNKIT_JAX_CACHE": str(tmp_path / "c"), "XDG_CACHE_HOME": "/x"}) == tmp_path / "c"
    for off in ("off", "OFF", "0", "false", "no", "none"):
        assert cache_dir({"PINNKIT_JAX_CACHE": off}) is None


def _train(out: Path, xdg: Path, **env) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith("JAX_COMPILATION_CACHE") and k != "PINNKIT_JAX_CACHE"}
    clean.update(JAX_PLATFORMS="cpu", XDG_CACHE_HOME=str(xdg), JAX_LOG_COMPILES="1", **env)
    return subprocess.run([sys.executable, "-m", "pinnkit.cli", *ARGS, "--out", str(out)], env=clean,
                          capture_output=True, text=True, timeout=600, cwd=ROOT)


def _chunk_entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("jit_chunk-*")) if folder.is_dir() else []


def test_cache_on_by_default_and_used_by_a_second_run(tmp_path):
    xdg = tmp_path / "xdg"
    first = _train(tmp_path / "a", xdg)
    assert first.returncode == 0, first.stderr[-2000:]
    entries = _chunk_entries(xdg / "pinnkit" / "jax")
    assert entries, sorted(p.name for p in (xdg / "pinnkit" / "jax").glob("*"))
    assert "cache hit for 'jit_chunk'" not in first.stderr
    second = _train(tmp_path / "b", xdg)
    assert second.returncode == 0, second.stderr[-2000:]
    assert "Persistent compilation cache hit for 'jit_chunk'" in second.stderr, second.stderr[-3000:]
    assert _chunk_entries(xdg / "pinnkit" / "jax") == entries  # loaded, not compiled anew
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert set(summary["compile_s"]) == set(summary["compile_cpu_s"]) == {"adam"}
    assert summary["compile_first_chunk_s"] == summary["compile_s"]["adam"] > 0


def test_cache_off(tmp_path):
    xdg = tmp_path / "xdg"
    res = _train(tmp_path / "a", xdg, PINNKIT_JAX_CACHE="off")
    assert res.returncode == 0, res.stderr[-2000:]
    assert not (xdg / "pinnkit" / "jax").exists()
    assert "Persistent compilation cache hit" not in res.stderr
