"""``numerics.matmul_precision``: validated by the config, applied by the command line only.

On a TPU it decides a PINN's accuracy: P1's default config reached rel. L2 6.0e-5 at
``highest`` (the default) and 1.2e-3 at ``default``, which runs float32 products as bf16
passes (docs/benchmarks.md, "Accelerator check: one TPU v5e chip"). CI has no TPU, so
this checks what the CPU can: the key's values, its default, and that `apply_numerics`
(what ``pinnkit train`` calls before it builds anything) sets JAX's flag from it while
importing pinnkit and building a run leave the flag alone.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pinnkit.run.config import ConfigError, from_dict

TINY = Path(__file__).resolve().parents[1] / "configs" / "tiny" / "poisson2d.yaml"


def test_default_is_highest_and_values_are_checked():
    assert from_dict({}).numerics.matmul_precision == "highest"
    assert from_dict({"numerics": {"matmul_precision": "default"}}).numerics.matmul_precision == "default"
    with pytest.raises(ConfigError, match=r"numerics\.matmul_precision: expected one of 'default', "
                                          r"'high', 'highest', got 'bf16'.*--set numerics\.matmul_precision"):
        from_dict({"numerics": {"matmul_precision": "bf16"}}, "f.yaml")


PROGRAM = textwrap.dedent("""
    import sys
    import jax
    from pinnkit.cli.jaxsetup import apply_numerics
    from pinnkit.run.build import build_run
    from pinnkit.run.config import load_config

    cfg = load_config(sys.argv[1], ["numerics.matmul_precision=default"])
    build_run(cfg)
    print("before", jax.config.jax_default_matmul_precision)
    apply_numerics(cfg, None)
    print("after", jax.config.jax_default_matmul_precision)
    apply_numerics(load_config(sys.argv[1]), None)
    print("shipped", jax.config.jax_default_matmul_precision)
""")


def test_apply_numerics_sets_jax_precision(tmp_path):
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PINNKIT_JAX_CACHE": "off"}
    r = subprocess.run([sys.executable, "-c", PROGRAM, str(TINY)], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["before", "None", "after", "default", "shipped", "highest"]
