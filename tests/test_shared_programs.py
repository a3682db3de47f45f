"""Phases that differ only in numbers share one compiled chunk (issue 32).

- A phase's `numbers` (learning rate, damping, tolerances: ``Config.numbers``) are
  arguments of its chunk, not constants in it; its `program` is everything else. Two
  ``natural_gradient`` phases at damping 1e-3 then 1e-4 (the shipped flows' recipe) have
  one program; a different ``step_grid`` (a shape), a tolerance set on one of them
  only (a branch) or another scheduled learning rate (the schedule is built in Python)
  makes another.
- `fit` compiles the shared chunk once: the second phase's compile seconds in the
  result (``compile_s``, ``compile_cpu_s``: summary.json's) are exactly 0, the first's > 0.
- The shared program reads the second phase's own numbers: a run interrupted in the
  second ``natural_gradient`` phase and resumed (a new `fit`, which compiles that phase
  on its own) logs the uninterrupted run's losses bit for bit, and a run whose third
  phase has another damping logs other losses there.
"""

from pathlib import Path

from pinnkit.parallel.mesh import make_mesh
from pinnkit.run.build import build_run
from pinnkit.run.config import load_config
from pinnkit.train import RESULTS, fit

TINY = Path(__file__).resolve().parents[1] / "configs" / "tiny" / "poisson2d.yaml"
NG = "{kind: natural_gradient, steps: 6, damping: 1.0e-3, step_grid: 8}"


def _run(*phases: str, steps: int = 18):
    over = ["numerics.x64=true", "network.width=8", "sampler.batch.pde=64", f"train.steps={steps}",
            "train.chunk=3", "train.log_every=1", "checkpoint.every=3",
            "optim.phases.0={kind: adam, lr: 1.0e-2, steps: 6}",
            *(f"optim.phases.{i + 1}={p}" for i, p in enumerate(phases))]
    return build_run(load_config(TINY, over), mesh=make_mesh(1))


def test_numbers_and_programs_of_phases(x64):
    run = _run(NG, "{kind: natural_gradient, steps: 3, damping: 1.0e-4, step_grid: 8, tol: 1.0e-12}",
               "{kind: natural_gradient, steps: 3, damping: 1.0e-4, step_grid: 4, tol: 1.0e-9}",
               "{kind: natural_gradient, steps: 4, damping: 1.0e-2, step_grid: 8, tol: 1.0e-6}",
               "{kind: adam, lr: 3.0e-3, steps: 5}", steps=27)
    adam, ng1, ng2, ng3, ng4, adam2 = run.phases
    assert ng1.numbers == {"damping": 1e-3}
    assert ng2.numbers == {"damping": 1e-4, "tol": 1e-12}
    assert adam.numbers == {"lr": 1e-2} and adam2.numbers == {"lr": 3e-3}
    assert adam.program == adam2.program  # another learning rate, another length: one program
    assert ng2.program == ng4.program  # another damping and tolerance
    assert ng1.program != ng2.program  # a tolerance on one only: the stopping branch
    assert ng2.program != ng3.program  # another line-search grid: other shapes
    assert ng1.program != adam.program
    decay = "schedule: {kind: exponential_decay, decay_steps: 5}"
    _, a, b = _run(f"{{kind: adam, lr: 3.0e-3, steps: 6, {decay}}}",
                   f"{{kind: adam, lr: 1.0e-3, steps: 6, {decay}}}").phases
    assert a.numbers == b.numbers == {}  # a schedule is built from its numbers in Python
    assert a.program != b.program and a.program != adam.program


def _losses(res, phase=None):
    return {h["step"]: h["loss"] for h in res.history if "loss" in h and phase in (None, h["phase"])}


def test_second_phase_of_a_kind_compiles_nothing_and_resumes_to_the_bit(x64, tmp_path):
    second = "{kind: natural_gradient, damping: 1.0e-4, step_grid: 8}"
    full = fit(_run(NG, second), out_dir=tmp_path / "a", progress=False)
    assert full.result is RESULTS.successful and full.step == 18
    assert set(full.compile_s) == {"adam", "natural_gradient.1", "natural_gradient.2"}
    assert full.compile_s["natural_gradient.1"] > 0 and full.compile_cpu_s["natural_gradient.1"] > 0
    assert full.compile_s["natural_gradient.2"] == full.compile_cpu_s["natural_gradient.2"] == 0.0

    # interrupted 3 steps into the third phase (after 5 chunks), resumed in a new fit
    calls = iter(range(10_000))
    part = fit(_run(NG, second), out_dir=tmp_path / "b", progress=False,
               should_stop=lambda: next(calls) >= 5)
    assert part.result is RESULTS.interrupted and part.step == 15
    rest = fit(_run(NG, second), out_dir=tmp_path / "b", resume=True, progress=False)
    assert rest.step == 18 and rest.compile_s["natural_gradient.2"] > 0  # compiled on its own
    a, b = _losses(full), _losses(part) | _losses(rest)
    assert sorted(a) == sorted(b) == list(range(18))
    assert all(a[s] == b[s] for s in a), [(s, a[s], b[s]) for s in a if a[s] != b[s]]  # bitwise

    # the shared program runs on the phase's own damping: another damping, other losses
    other = fit(_run(NG, "{kind: natural_gradient, damping: 1.0e-1, step_grid: 8}"), progress=False)
    c = _losses(other)
    assert all(a[s] == c[s] for s in range(13))  # up to the third phase's first step
    assert all(a[s] != c[s] for s in range(13, 18))
