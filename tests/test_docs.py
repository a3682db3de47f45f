"""Documentation stays true: every config key is in docs/config.md with its default,
and the README's quick start is the two make commands that CI runs."""

import dataclasses
import re
import typing
from pathlib import Path

import yaml

from pinnkit.run.config import (
    AdaptiveConfig,
    CausalConfig,
    FourierConfig,
    PhaseConfig,
    RunConfig,
    RwfConfig,
)

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
    text = (ROOT / "docs" / "config.md").read_text()
    rows = dict(re.findall(r"^\| `([a-z0-9_.N]+)` \|[^|]*\| `([^`]*)` \|", text, flags=re.M))
    keys = _schema(RunConfig)
    keys.update(_schema(PhaseConfig, "optim.phases.N."))
    keys.update(_schema(FourierConfig, "network.fourier."))
    keys.update(_schema(RwfConfig, "network.rwf."))
    keys.update(_schema(CausalConfig, "weighting.causal."))
    keys.update(_schema(AdaptiveConfig, "sampler.adaptive."))
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
