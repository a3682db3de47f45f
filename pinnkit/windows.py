r"""Time marching in windows (``train.time_windows``) for any `SpaceTime` problem with an
``initial`` term.

$[t_0, t_1]$ is split into $N$ equal windows $[\tau_w, \tau_{w+1}]$, trained one after
another, each for ``train.steps`` steps (the whole optimiser schedule restarts per
window). Window $w > 0$ solves the same PDE on $[\tau_w, \tau_{w+1}]\times\Omega$ with the
initial condition $u(\tau_w, x) = u_{w-1}(\tau_w, x)$, the previous window's trained
network (a frozen constant), and starts from that network's parameters (warm start).
Input normalisation keeps the full interval's bounds, so all windows share one network
layout. Causal weights are rebuilt on each window's interval.

The final model is `Windowed`: the piecewise network that evaluates, at a point with
time $t$, the network of the window containing $t$ (the earlier window at an edge).
Each window's run lives in ``RUN/windows/w{k}/`` (checkpoints, metrics.jsonl); a resumed
run skips finished windows.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._types import Point
from .build import Run
from .domains import SpaceTime
from .errors import ConfigError
from .problem import Problem
from .terms import Initial


class Windowed(eqx.Module):
    """Piecewise-in-time network: ``networks[w]`` on $[\\tau_w, \\tau_{w+1}]$.

    **Arguments:**
    - `networks`: one trained network per window (same layout).
    - `edges`: $\\tau_0 < \\dots < \\tau_N$.
    - `t_axis`: column of ``t`` in a point.
    """

    networks: tuple[eqx.Module, ...]
    edges: tuple[float, ...] = eqx.field(static=True)
    t_axis: int = eqx.field(static=True, default=0)

    @property
    def out_names(self) -> tuple[str, ...]:
        return self.networks[0].out_names

    @property
    def in_names(self) -> tuple[str, ...]:
        return self.networks[0].in_names

    def window(self, t) -> Array:
        """Index of the window holding ``t`` (clipped to the first/last window)."""
        inner = jnp.asarray(self.edges[1:-1], jnp.result_type(t))
        return jnp.clip(jnp.searchsorted(inner, t, side="left"), 0, len(self.networks) - 1)

    def __call__(self, x: Point) -> Float[Array, " m"]:
        ys = jnp.stack([net(x) for net in self.networks])
        return ys[self.window(x[self.t_axis])]

    def fields(self, x: Point) -> dict[str, Array]:
        y = self(x)
        return {n: y[i] for i, n in enumerate(self.out_names)}


def window_edges(problem: Problem, n: int) -> tuple[float, ...]:
    d = problem.domain
    return tuple(float(v) for v in np.linspace(d.t0, d.t1, n + 1))


def enforced_initial(run: Run) -> dict[str, Initial]:
    """The `Initial` terms that ``network.hard_constraint`` removed from ``run.problem``
    (``{}`` without a hard constraint): taken from the problem as built without it."""
    cfg = run.config
    if not cfg.network.hard_constraint:
        return {}
    from .build import build_problem

    soft = dataclasses.replace(cfg, network=dataclasses.replace(cfg.network, hard_constraint=False))
    full = build_problem(soft)
    return {k: t for k, t in full.terms.items()
            if isinstance(t, Initial) and k in full.enforced and k not in run.problem.terms}


def check_windows(run: Run) -> None:
    """Raises `ConfigError` unless the problem can be marched in time."""
    p, cfg = run.problem, run.config
    restored = enforced_initial(run)
    init = [k for k, t in p.terms.items() if isinstance(t, Initial)] + list(restored)
    if not isinstance(p.domain, SpaceTime) or not init:
        raise ConfigError(
            f"train.time_windows={cfg.train.time_windows}: time marching needs a "
            f"SpaceTime problem with an Initial term; {cfg.problem.name!r} has domain "
            f"{type(p.domain).__name__} and terms {sorted(p.terms)}. Set train.time_windows: 1"
        )
    missing = sorted(k for k in restored if k not in cfg.sampler.batch)
    if missing:
        raise ConfigError(
            f"train.time_windows={cfg.train.time_windows} with network.hard_constraint: "
            f"windows after the first impose continuity through the term(s) {missing} that "
            "the hard constraint removes, so they need a batch size: add e.g. "
            f"sampler.batch.{missing[0]}: 512"
        )


def window_run(run: Run, w: int, previous: eqx.Module | None) -> Run:
    """The run of window ``w``: domain cut to the window, initial condition(s) taken from
    ``previous`` (window ``w-1``'s trained network) and warm start from it."""
    p, cfg = run.problem, run.config
    edges = window_edges(p, cfg.train.time_windows)
    a, b = edges[w], edges[w + 1]
    terms = dict(p.terms)
    sampler, weights, weighting = run.sampler, run.weights, run.weighting
    if previous is not None:
        restored = enforced_initial(run)
        if restored:  # hard initial condition: continuity by the soft term after window 0
            terms.update(restored)
            sampler = dataclasses.replace(
                sampler, batch={**sampler.batch, **{k: cfg.sampler.batch[k] for k in restored}})
            extra_w = {k: float(cfg.weighting.weights.get(k, 1.0)) for k in restored}
            weights = {**weights, **extra_w}
            if weighting is not None:
                weighting = dataclasses.replace(weighting, initial={**weighting.initial, **extra_w})
        for k, t in terms.items():
            if isinstance(t, Initial):
                idx = [previous.out_names.index(f) for f in t.fields]

                def target(x, net=previous, idx=idx):
                    return net(x)[jnp.asarray(idx)]

                terms[k] = dataclasses.replace(t, target=target)
    problem = eqx.tree_at(lambda q: (q.domain, q.terms), p,
                          (SpaceTime(p.domain.space, a, b), terms))
    if weighting is not None and weighting.causal is not None:
        causal = dataclasses.replace(weighting.causal, t0=a, t1=b)
        weighting = eqx.tree_at(lambda x: x.causal, weighting, causal)
    network = previous if previous is not None else run.network
    try:
        sampler.check(problem, run.mesh.size if run.mesh is not None else 1)
    except ValueError as e:
        raise ConfigError(f"train.time_windows: {e}") from None
    return dataclasses.replace(run, problem=problem, network=network, sampler=sampler,
                               weights=weights, weighting=weighting)


def window_dir(out: Path | None, w: int) -> Path | None:
    return None if out is None else Path(out) / "windows" / f"w{w}"


def fit_windows(run: Run, *, out_dir: str | Path | None = None, resume: bool | str = False,
                evaluate_window=None, **fit_options):
    """Trains the ``train.time_windows`` windows in sequence (`pinnkit.train.fit` each).

    **Arguments:**
    - `run`: the full problem's run (`build_run`).
    - `out_dir`: run directory; window ``w`` writes ``out_dir/windows/w{w}/``, and the
      merged history (global step ``w·train.steps + step``, key ``window``) is written
      to ``out_dir/metrics.jsonl``.
    - `resume`: truthy: finished windows are loaded, the current one resumed.
    - `evaluate_window`: optional ``window_run -> evaluate`` callback factory (errors on
      the window's own domain, logged in its metrics).
    - `fit_options`: passed to `fit`.

    **Returns:** a `FitResult` whose ``network`` is the `Windowed` model of the windows
    trained so far (all of them unless stopped early).
    """
    import json

    from .parallel import is_main_process
    from .train import RESULTS, FitResult, fit

    check_windows(run)
    n, per = run.config.train.time_windows, run.total_steps
    edges = window_edges(run.problem, n)
    nets, history, wall, timed, result, prev, res = [], [], 0.0, 0.0, RESULTS.successful, None, None
    for w in range(n):
        rw = window_run(run, w, prev)
        ev = evaluate_window(rw) if evaluate_window is not None else None
        res = fit(rw, out_dir=window_dir(out_dir, w), resume="auto" if resume else False,
                  evaluate=ev, **fit_options)
        history.extend({**h, "step": w * per + h["step"], "window": w} for h in res.history)
        wall += res.wall_s
        if np.isfinite(res.steps_per_s) and res.steps_per_s > 0:
            timed += res.step / res.steps_per_s
        nets.append(res.network)
        prev, result = res.network, res.result
        if result is not RESULTS.successful:
            break
    steps = (len(nets) - 1) * per + res.step
    if out_dir is not None and is_main_process():
        text = "".join(json.dumps(h) + "\n" for h in history)
        (Path(out_dir) / "metrics.jsonl").write_text(text)
    model = Windowed(tuple(nets), edges[: len(nets) + 1], run.problem.domain.coords.index("t"))
    return FitResult(network=model, coeffs=res.coeffs, result=result, step=steps, history=history,
                     wall_s=wall, steps_per_s=steps / timed if timed > 0 else float("nan"),
                     bad_step=res.bad_step)


def load_windows(run: Run, run_dir: Path) -> tuple[Windowed, dict, int]:
    """``(model, coeffs, steps)`` from the windows' newest checkpoints in ``run_dir``."""
    from . import checkpoint as ckpt
    from .errors import RunDirError
    from .train import init_extra, split_model

    nets, coeffs, steps = [], {}, 0
    params, static = split_model(run)
    edges = window_edges(run.problem, run.config.train.time_windows)
    for w in range(run.config.train.time_windows):
        found = ckpt.latest_valid(window_dir(run_dir, w) / "checkpoints")
        if found is None:
            break
        path, head = found
        phase = run.phases[min(head["phase"], len(run.phases) - 1)]
        _, (p, _, _) = ckpt.load(path, (params, phase.optimizer.init(params), init_extra(run)))
        net, coeffs = eqx.combine(p, static)
        nets.append(net)
        steps = w * run.total_steps + int(head["step"])
    if not nets:
        raise RunDirError(f"{run_dir}: no valid checkpoint in windows/w0/checkpoints/")
    model = Windowed(tuple(nets), edges[: len(nets) + 1], run.problem.domain.coords.index("t"))
    return model, coeffs, steps

