"""`pinnkit.load_run` on a float64 run: one line saying what to call while JAX runs in
float32 (the library never writes `jax.config`), the float64 network once it does not."""

from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

import pinnkit
from pinnkit.errors import RunDirError

ROOT = Path(__file__).resolve().parents[1]


def test_float64_run_says_what_to_call_then_loads(tmp_path):
    old = jax.config.read("jax_enable_x64")
    out = tmp_path / "f64"
    try:
        jax.config.update("jax_enable_x64", True)
        cfg = pinnkit.load_config(ROOT / "configs/tiny/expr_poisson2d_builtin.yaml",
                                  ["train.steps=10", "train.chunk=10"])
        pinnkit.train_to_dir(cfg, out, progress=False, plots=False)
        jax.config.update("jax_enable_x64", False)
        with pytest.raises(RunDirError) as err:
            pinnkit.load_run(out)
        msg = str(err.value)
        assert "\n" not in msg and "float64 run" in msg
        assert 'jax.config.update("jax_enable_x64", True) before pinnkit.load_run' in msg
        assert jax.config.read("jax_enable_x64") is False  # load_run left the setting alone
        jax.config.update("jax_enable_x64", True)  # what the message says
        run = pinnkit.load_run(out)
        assert run.step == 10
        assert run.predict(jnp.zeros((3, 2), jnp.float64)).dtype == jnp.float64
    finally:
        jax.config.update("jax_enable_x64", old)
