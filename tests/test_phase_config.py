"""Optimiser phases in the config: a tagged union over the phase registry (one dataclass
per kind), errors that name the kind and its options, run folders written with the old
flat phase schema still readable, and every shipped config valid."""

import subprocess
import sys
import typing
from pathlib import Path

import numpy as np
import pytest
import yaml

from pinnkit.errors import ConfigError
from pinnkit.nn.layers import ACTIVATIONS, INITS
from pinnkit.nn.nets import KINDS
from pinnkit.run.config import PHASE_CONFIGS, NetworkConfig, TrainConfig, dump_config, from_dict, load_config
from pinnkit.train.loss import REMAT
from pinnkit.train.phases import PHASES, AbstractPhase

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "configs" / "tiny" / "poisson2d.yaml"


def test_kinds_come_from_the_registry_and_tables():
    assert list(PHASE_CONFIGS) == list(PHASES)
    for kind, cls in PHASES.items():
        assert issubclass(cls, AbstractPhase) and cls.kind == kind and cls.Config is PHASE_CONFIGS[kind]
    hints = typing.get_type_hints(NetworkConfig)
    assert typing.get_args(hints["kind"]) == KINDS
    assert typing.get_args(hints["activation"]) == tuple(ACTIVATIONS)
    assert typing.get_args(hints["init"]) == INITS
    assert typing.get_args(typing.get_type_hints(TrainConfig)["remat"]) == REMAT


def test_each_kind_gets_its_own_dataclass():
    cfg = load_config(TINY, ["train.steps=300", "optim.phases.0.steps=100",
                             "optim.phases.1={kind: lbfgs, memory: 20, steps: 100}",
                             "optim.phases.2={kind: natural_gradient, damping: 1.0e-6}"])
    a, b, c = cfg.optim.phases
    assert type(a) is PHASE_CONFIGS["adam"] and a.lr == 1e-2
    assert type(b) is PHASE_CONFIGS["lbfgs"] and b.memory == 20 and not hasattr(b, "lr")
    assert type(c) is PHASE_CONFIGS["natural_gradient"] and c.damping == 1e-6 and c.steps is None
    dumped = yaml.safe_load(dump_config(cfg))["optim"]["phases"]
    assert set(dumped[0]) == {"kind", "steps", "lr", "schedule", "clip_norm", "freeze"}
    assert "lr" not in dumped[1] and "memory" not in dumped[0]


@pytest.mark.parametrize("phase,key,kind,others", [
    ("{kind: adam, memory: 5}", "memory", "adam", "lbfgs"),
    ("{kind: lbfgs, lr: 0.1}", "lr", "lbfgs", "adam, sgd, soap"),
    ("{kind: natural_gradient, clip_norm: 1.0}", "clip_norm", "natural_gradient", "adam, lbfgs, sgd, soap"),
    ("{kind: sgd, precondition_frequency: 3}", "precondition_frequency", "sgd", "soap"),
])
def test_an_option_of_another_kind_names_the_kind_and_its_options(phase, key, kind, others):
    with pytest.raises(ConfigError) as e:
        load_config(TINY, [f"optim.phases.0={phase}"])
    msg = str(e.value)
    assert f"optim.phases.0.{key}: phases of kind {kind!r} do not take {key!r} ({others} phases do)" in msg
    names = ", ".join(f for f in PHASE_CONFIGS[kind].__dataclass_fields__)
    assert f"The options of kind {kind!r} are: {names}." in msg


def test_through_the_cli_it_exits_2():
    r = subprocess.run([sys.executable, "-m", "pinnkit.cli", "train", str(TINY), "--set",
                        "optim.phases.0.memory=5", "--dry-run"], capture_output=True, text=True,
                       timeout=300)
    err = " ".join(r.stderr.split())  # the CLI wraps its paragraph
    assert r.returncode == 2 and "kind 'adam' do not take 'memory'" in err, r.stderr
    assert "Traceback" not in r.stderr


def test_a_run_folder_of_the_flat_schema_still_reads():
    """config.yaml of a run trained before phases became a union holds every option in
    every phase (the resolved flat schema); those the kind does not take were unused and
    are dropped, whatever their value, so such runs resume, evaluate and plot."""
    flat = {"kind": "lbfgs", "steps": None, "lr": 0.001,
            "schedule": {"kind": "constant", "decay_steps": 1000, "rate": 0.9, "warmup_steps": 0,
                         "final_fraction": 0.0},
            "clip_norm": None, "memory": 50, "max_linesearch_steps": 16, "precondition_frequency": 10,
            "damping": 1e-10, "step_grid": 20, "safeguard": False}
    data = yaml.safe_load(TINY.read_text())
    data["optim"]["phases"] = [{**flat, "kind": "adam", "steps": 400, "lr": 0.01}, flat]
    cfg = from_dict(data, where="runs/old/config.yaml")
    a, b = cfg.optim.phases
    assert a.lr == 0.01 and a.steps == 400 and b.memory == 50 and not hasattr(b, "damping")
    # A user's mapping with one stray key is still an error (it is not a flat dump).
    data["optim"]["phases"] = [{"kind": "adam", "steps": 400, "memory": 50}, {"kind": "lbfgs"}]
    with pytest.raises(ConfigError, match="do not take 'memory'"):
        from_dict(data, where="mine.yaml")


def test_every_shipped_config_is_valid():
    bad = {}
    for path in sorted((ROOT / "configs").rglob("*.yaml")):
        try:
            load_config(path)
        except ConfigError as e:
            bad[str(path.relative_to(ROOT))] = str(e)
    assert not bad, bad


def test_a_run_folder_written_before_the_redesign_loads_and_resumes(tmp_path):
    """tests/golden/legacy_run was written by the code before phases became classes (the
    flat phase schema in config.yaml; Adam for 20 steps, then L-BFGS; checkpoints at step
    20 with Adam's state and 40 with L-BFGS's). It loads, resumes from the L-BFGS state
    to 60 steps, and from the Adam state to the same losses as the old run logged (bit
    for bit on the machine that wrote it; rtol 1e-4 elsewhere, float32 rounding)."""
    import json
    import shutil

    from pinnkit.parallel.mesh import make_mesh
    from pinnkit.run.build import build_run
    from pinnkit.run.rundir import load_run, read_config
    from pinnkit.train import RESULTS, fit

    legacy = ROOT / "tests" / "golden" / "legacy_run"
    a = shutil.copytree(legacy, tmp_path / "a")
    assert load_run(a).step == 40
    res = fit(build_run(read_config(a, ["train.steps=60"]), mesh=make_mesh(1)), out_dir=a,
              resume=True, progress=False)
    assert res.result is RESULTS.successful and res.step == 60
    b = shutil.copytree(legacy, tmp_path / "b")
    (b / "checkpoints" / "step_00000040.eqx").unlink()
    res = fit(build_run(read_config(b), mesh=make_mesh(1)), out_dir=b, resume=True, progress=False)
    assert res.step == 40
    old = {r["step"]: r["loss"] for r in map(json.loads, (legacy / "metrics.jsonl").read_text().splitlines())}
    new = {h["step"]: h["loss"] for h in res.history}
    assert sorted(new) == [20, 30, 39]
    np.testing.assert_allclose([new[s] for s in new], [old[s] for s in new], rtol=1e-4)


def test_a_new_phase_is_one_class_and_one_registry_entry(monkeypatch):
    """What docs/architecture.md promises: a phase kind is a class (with its config
    dataclass) plus its entry in `PHASES`; the config loader, the builder and the loop
    need nothing else. Here RMSprop, registered for this test only, trains tiny P1."""
    from dataclasses import dataclass
    from typing import ClassVar, Literal

    import optax

    from pinnkit.parallel.mesh import make_mesh
    from pinnkit.run.build import build_run
    from pinnkit.train import RESULTS, fit
    from pinnkit.train.phases.optax import AbstractOptaxPhase, GradientConfig

    @dataclass(frozen=True)
    class RmspropConfig(GradientConfig):
        kind: Literal["rmsprop"] = "rmsprop"

    class RmspropPhase(AbstractOptaxPhase):
        kind: ClassVar[str] = "rmsprop"
        Config: ClassVar[type] = RmspropConfig

        @staticmethod
        def transformation(cfg, lr):
            return optax.rmsprop(lr)

    monkeypatch.setitem(PHASES, "rmsprop", RmspropPhase)
    cfg = load_config(TINY, ["optim.phases.0={kind: rmsprop, lr: 1.0e-2}", "train.steps=60",
                             "train.chunk=30", "train.log_every=10"])
    assert type(cfg.optim.phases[0]) is RmspropConfig
    res = fit(build_run(cfg, mesh=make_mesh(1)), progress=False)
    losses = [h["loss"] for h in res.history]
    assert res.result is RESULTS.successful and losses[-1] < losses[0] / 2, losses


def test_a_built_phase_states_the_learning_rate_it_was_built_with():
    """The live log asks the built phase (`AbstractPhase.learning_rate`): a first-order
    phase's schedule as optax computes it, None for phases that choose their step."""
    import optax

    cfg = load_config(TINY, ["train.steps=300", "optim.phases.0.steps=200",
                             "optim.phases.0.schedule={kind: cosine, final_fraction: 0.1}",
                             "optim.phases.1={kind: lbfgs, steps: 100}"])
    adam_cfg, lbfgs_cfg = cfg.optim.phases
    adam = PHASES["adam"].from_config(adam_cfg, 0, 200, {})
    want = optax.cosine_decay_schedule(adam_cfg.lr, 200, alpha=0.1)
    for k in (0, 50, 199):
        assert float(adam.learning_rate(k)) == float(want(k))
    assert float(adam.learning_rate(199)) < adam_cfg.lr / 2  # it decays
    assert PHASES["lbfgs"].from_config(lbfgs_cfg, 200, 100, {}).learning_rate is None
    const = PHASES["sgd"].from_config(load_config(TINY, ["optim.phases.0={kind: sgd, lr: 0.05}"])
                                      .optim.phases[0], 0, 10, {})
    assert const.learning_rate == 0.05


def test_model_hash_accepts_added_neutral_keys_and_nothing_else():
    """A checkpoint written before an option existed resumes when the option holds its
    neutral value; any real change of the model sections is still refused."""
    from pinnkit.train import checkpoint as ckpt

    old = {"problem": {"name": "poisson2d"}, "network": {"width": 16}, "numerics": {"x64": False}}
    old_hash = ckpt.manifest(old, phase=0, n_devices=1, n_processes=1, seed=0)["model_sha256"]
    now = {**old, "network": {"width": 16, "singular": []}, "optim": {"phases": []}}
    assert old_hash in ckpt.model_hashes(now)
    enriched = {**now, "network": {"width": 16, "singular": [{"at": [0, 0]}]}}
    wider = {**now, "network": {"width": 32, "singular": []}}
    assert old_hash not in ckpt.model_hashes(enriched) | ckpt.model_hashes(wider)


def test_a_checkpoint_of_every_earlier_schema_version_matches_its_model():
    """A checkpoint hashes the model sections as its version of the schema wrote them: one
    from before `squares` (with `singular`), one from before both, and one from before
    `allow_exact_lift` all match today's config when the added keys hold their neutral
    value; a changed width or a key set away from neutral does not."""
    from pinnkit.train.checkpoint import config_hash, model_hashes

    net = {"width": 32, "singular": [], "squares": False, "allow_exact_lift": False}
    cfg = {"problem": {"name": "poisson2d"}, "network": net, "train": {"steps": 5}}
    hashes = model_hashes(cfg)

    def written(**network):
        return config_hash({"problem": {"name": "poisson2d"}, "network": network})

    for old in ({"width": 32}, {"width": 32, "singular": []},
                {"width": 32, "singular": [], "squares": False}, net):
        assert written(**old) in hashes, old
    assert written(width=64) not in hashes
    assert config_hash({"problem": {"name": "poisson2d"}, "network": {"width": 32}}) not in model_hashes(
        {**cfg, "network": {**net, "squares": True}})
