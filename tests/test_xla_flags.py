"""The ``pinnkit`` command's XLA:CPU option (`pinnkit.cli.jaxsetup.xla_cpu_flags`): no
YNNPACK fusions, so that reductions over a middle axis (the Taylor rows' reverse pass) run
in XLA's own loops (docs/benchmarks.md, "The residual Jacobian and XLA:CPU's YNNPACK
reductions")."""

import json
import os
import subprocess
import sys
from importlib import metadata

import pytest

from pinnkit.cli.jaxsetup import xla_cpu_flags

OPTION = "--xla_cpu_experimental_ynn_fusion_type"
ON_010 = metadata.version("jaxlib").startswith("0.10.")


@pytest.mark.skipif(not ON_010, reason="the option is only added for jaxlib 0.10")
def test_adds_the_option_once_and_keeps_other_flags():
    env = {"XLA_FLAGS": "--xla_cpu_max_isa=AVX2"}
    assert xla_cpu_flags(env) == f"{OPTION}="
    assert env["XLA_FLAGS"] == f"--xla_cpu_max_isa=AVX2 {OPTION}="
    assert xla_cpu_flags(env) is None  # idempotent: a second call adds nothing
    assert env["XLA_FLAGS"].count(OPTION) == 1
    empty = {}
    xla_cpu_flags(empty)
    assert empty["XLA_FLAGS"] == f"{OPTION}="


def test_the_users_own_choice_wins():
    mine = f"{OPTION}=LIBRARY_FUSION_TYPE_DOT,LIBRARY_FUSION_TYPE_REDUCE"
    env = {"XLA_FLAGS": mine}
    assert xla_cpu_flags(env) is None
    assert env["XLA_FLAGS"] == mine


# A middle-axis multiply-reduce of the Taylor rows' shape, compiled in a fresh process
# (XLA reads XLA_FLAGS once per process): prints, per YNNPACK fusion, whether it reduces.
_PROBE = r"""
import json, re, sys
if sys.argv[1] == "cli":
    from pinnkit.cli.jaxsetup import xla_cpu_flags
    xla_cpu_flags()
import jax, jax.numpy as jnp
f = jax.jit(lambda a, b: jnp.sum(a * b, axis=1))
x = jnp.ones((64, 16, 32), jnp.float32)
text = f.lower(x, x).compile().as_text()
kinds = []
for callee in re.findall(r'calls=%([\w.]+)[^\n]*__ynn_fusion', text):
    body = text.split(f"%{callee} ", 1)[1].split("\n}", 1)[0]
    kinds.append(" reduce(" in body)
print(json.dumps(kinds))
"""


def _ynn_reduces(mode: str) -> list[bool]:
    # the session's other XLA flags (an ISA cap) stay; only a YNNPACK choice of its own goes
    kept = [f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith(OPTION)]
    env = {**os.environ, "XLA_FLAGS": " ".join(kept)}
    out = subprocess.run([sys.executable, "-c", _PROBE, mode], env=env, check=True,
                         capture_output=True, text=True, timeout=300).stdout
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.skipif(not ON_010, reason="the option is only added for jaxlib 0.10")
def test_the_option_takes_the_reduction_away_from_ynnpack():
    # XLA's default gives this reduction to YNNPACK (the slow path the option avoids);
    # with the command's option there is no YNNPACK fusion at all.
    assert any(_ynn_reduces("default"))
    assert _ynn_reduces("cli") == []
