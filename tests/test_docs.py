"""Documentation stays true: every config key is in docs/config.md with its default,
and the README's quick start is the two make commands that CI runs."""

import dataclasses
import re
import typing
from pathlib import Path

import yaml

from pinnkit.run.config import (
    PHASE_CONFIGS,
    AdaptiveConfig,
    CausalConfig,
    CornerConfig,
    FourierConfig,
    RunConfig,
    RwfConfig,
)
from pinnkit.run.schema import EarlyStoppingConfig, MlflowConfig, WandbConfig

ROOT = Path(__file__).resolve().parents[1]


def _schema(cls, prefix=""):
    hints = typing.get_type_hints(cls)
    out = {}
    for f in dataclasses.fields(cls):
        if f.name == "source_dir":
            continue
        tp = hints[f.name]
        d = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        if dataclasses.is_dataclass(tp):
            out.update(_schema(tp, f"{prefix}{f.name}."))
        else:
            out[f"{prefix}{f.name}"] = d
    return out


def test_config_reference_matches_schema():
    """Every key with its default; a phase option's row names the kinds that take it."""
    text = (ROOT / "docs" / "config.md").read_text()
    rows = dict(re.findall(r"^\| `([a-z0-9_.N]+)` \|[^|]*\| `([^`]*)` \|", text, flags=re.M))
    meaning = dict(re.findall(r"^\| `([a-z0-9_.N]+)` \|[^|]*\|[^|]*\| ([^|]*) \|", text, flags=re.M))
    keys = _schema(RunConfig)
    takes: dict[str, list[str]] = {}
    for kind, cls in PHASE_CONFIGS.items():
        for k, default in _schema(cls, "optim.phases.N.").items():
            takes.setdefault(k, []).append(kind)
            if k != "optim.phases.N.kind":
                assert keys.setdefault(k, default) == default, (k, kind)  # one default per key
    keys["optim.phases.N.kind"] = "adam"
    for k, kinds in takes.items():
        want = "all:" if len(kinds) == len(PHASE_CONFIGS) else ", ".join(kinds) + ":"
        assert meaning[k].startswith(want), (k, want, meaning[k][:40])
    keys.update(_schema(FourierConfig, "network.fourier."))
    keys.update(_schema(RwfConfig, "network.rwf."))
    keys.update(_schema(CornerConfig, "network.singular.N."))
    keys.update(_schema(CausalConfig, "weighting.causal."))
    keys.update(_schema(AdaptiveConfig, "sampler.adaptive."))
    keys.update(_schema(EarlyStoppingConfig, "train.early_stopping."))
    keys.update(_schema(WandbConfig, "logging.wandb."))
    keys.update(_schema(MlflowConfig, "logging.mlflow."))
    missing = set(keys) - set(rows)
    assert not missing, f"undocumented config keys: {sorted(missing)}"
    for k, default in keys.items():
        if k == "optim.phases":
            continue
        documented = yaml.safe_load(rows[k])
        assert documented == default, (k, documented, default)


def test_readme_quick_start_and_ci():
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## Quick start", 1)[1].split("```", 2)[1]
    commands = [ln.split("#")[0].strip() for ln in block.strip().splitlines()]
    assert commands == ["make demo", "make test"]
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def _python_blocks(text: str, section: str) -> list[str]:
    body = text.split(f"## {section}", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", body, flags=re.S)


def test_diffops_direct_use_example_runs():
    """The example of calling the derivative engine directly (docs/diffops.md) runs and
    its own assertions (against the exact derivatives and Autodiff) hold."""
    (block,) = _python_blocks((ROOT / "docs" / "diffops.md").read_text(), "Calling the engine directly")
    exec(compile(block, "docs/diffops.md", "exec"), {})


def test_own_problem_sphere_example_builds_and_is_exact_at_t0():
    import jax
    import jax.numpy as jnp

    from pinnkit.diffops import Taylor

    (block,) = _python_blocks((ROOT / "docs" / "own-problem.md").read_text(), "Domains")
    scope = {}
    exec(compile(block, "docs/own-problem.md", "exec"), scope)
    p = scope["make_problem"]()
    pts = p.domain.sample(jax.random.key(0), 8, "initial")
    h = jax.vmap(lambda x: p.hard_constraint(x, jnp.ones(1)))(pts)[:, 0]
    assert jnp.allclose(h, jnp.exp(10.0 * (pts[:, 1] - 1.0)), atol=1e-6)
    res = p.residuals(lambda x: p.hard_constraint(x, jnp.zeros(1)), p.coeff_values(),
                      {"transport": p.domain.sample(jax.random.key(1), 8)}, Taylor())
    assert jnp.all(jnp.isfinite(res["transport"]))


def test_own_problem_flow_example_is_built_from_public_pieces(x64):
    """The user flow problem of docs/own-problem.md: Poiseuille flow (which ignores the
    obstacle) zeroes every term but the obstacle's no-slip, in both the Navier–Stokes and
    the Stokes variant; the hard constraint gives the inflow and no-slip exactly."""
    import jax
    import jax.numpy as jnp

    from pinnkit.diffops import Autodiff

    (block,) = _python_blocks((ROOT / "docs" / "own-problem.md").read_text(), "A flow problem")
    scope = {}
    exec(compile(block, "docs/own-problem.md", "exec"), scope)
    U, H, L = 1.0, 1.0, 3.0
    for stokes in (False, True):
        p = scope["make_problem"](Re=20.0, U_max=U, stokes=stokes)
        nu = float(p.coeffs["nu"])
        assert abs(nu - (2 * U / 3) * 0.3 / 20.0) < 1e-15

        def poiseuille(x, nu=nu):
            u = 4 * U * x[1] * (H - x[1]) / H**2
            return jnp.stack([u, jnp.zeros_like(u), 8 * nu * U * (L - x[0]) / H**2])

        batch = {k: p.domain.sample(jax.random.key(i), 64, t.where, jnp.float64)
                 for i, (k, t) in enumerate(sorted(p.terms.items()))}
        res = p.residuals(poiseuille, p.coeff_values(), batch, Autodiff())
        assert set(res) == {"momentum", "continuity", "outlet", "inlet", "walls", "obstacle"}
        # polynomials of degree 2: float64 round-off only
        assert all(float(jnp.max(jnp.abs(r))) < 1e-12 for k, r in res.items() if k != "obstacle"), res
        assert float(jnp.max(jnp.abs(res["obstacle"]))) > 0.1  # u = O(1) on the disk
    hc, y = p.hard_constraint, jnp.asarray([0.7, -0.3, 0.2])
    for piece, want in (("inlet", poiseuille), ("walls", None), ("obstacle", None)):
        pts = p.domain.sample(jax.random.key(7), 16, piece, jnp.float64)
        got = jax.vmap(lambda x: hc(x, y))(pts)
        ref = jnp.zeros((16, 2)) if want is None else jax.vmap(want)(pts)[:, :2]
        assert jnp.allclose(got[:, :2], ref, atol=1e-12), piece
        assert jnp.allclose(got[:, 2], 0.2)  # the pressure stays free
