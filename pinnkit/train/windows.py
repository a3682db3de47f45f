r"""Time marching in windows (``train.time_windows``) for any time-dependent problem (a
domain with a ``t`` coordinate and an interval ``t0, t1``: `SpaceTime`, a timed `Sphere`)
with an ``initial`` term.

$[t_0, t_1]$ is split into $N$ equal windows $[\tau_w, \tau_{w+1}]$, trained one after
another, each for ``train.steps`` steps (the whole optimiser schedule restarts per
window). Window $w > 0$ solves the same PDE on $[\tau_w, \tau_{w+1}]\times\Omega$ with the
initial condition $u(\tau_w, x) = u_{w-1}(\tau_w, x)$, the previous window's trained
network (a frozen constant), and starts from that network's parameters (warm start).
Input normalisation keeps the full interval's bounds (``train.window_time: global``), so
a warm start is the previous network's extrapolation, or maps each window onto $[-1, 1]$
(``local``: the same temporal resolution in every window, whatever their number).
Causal weights are rebuilt on each window's interval.

The final model is `Windowed`: the piecewise network that evaluates, at a point with
time $t$, the network of the window containing $t$ (the earlier window at an edge).
Each window's run lives in ``RUN/windows/w{k}/`` (checkpoints, metrics.jsonl, and
timing.json: the steps timed (compilation excluded) and their seconds, over every process
that trained the window); a resumed run skips finished windows. The run's steps/s is
$\sum_w n_w / \sum_w s_w$ over those timed steps, so a resumed run still reports it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._jsonsafe import dumps as json_dumps
from .._types import Point
from ..errors import ConfigError
from ..nn.embeddings import AbstractTimeWindowed
from ..physics.constraints import AbstractTimeRestart
from ..physics.problem import Problem
from ..physics.terms import Initial
from .spec import Run


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


def cut_domain(domain, a: float, b: float):
    """The same domain on the time interval $[a, b]$ (`SpaceTime` or a timed `Sphere`:
    a dataclass domain with ``t0``, ``t1`` fields; the builder checks this)."""
    return dataclasses.replace(domain, t0=a, t1=b)


def hard_start(network) -> bool:
    """Whether the network's output transform is a hard initial condition that restarts
    at a window edge (an `AbstractTimeRestart`)."""
    return isinstance(network.transform, AbstractTimeRestart)


def window_run(run: Run, w: int, previous: eqx.Module | None) -> Run:
    """The run of window ``w``: domain cut to the window, initial condition(s) taken from
    ``previous`` (window ``w-1``'s trained network) and warm start from it. A soft initial
    condition (`Initial` term) gets ``previous`` as its target; a hard one (a transform
    with ``restart``, see `hard_start`) is restarted at the window's start with
    ``previous(τ_w, x)`` as its exact value, so the piecewise solution is continuous; a
    hard one without ``restart`` (``run.windows.restored``) is exact in window 0 and
    imposed as a soft term after it. The cost of a hard start grows with ``w``: window ``w``'s
    network evaluates the ``w`` earlier ones at their starts."""
    p, spec = run.problem, run.windows
    edges = window_edges(p, spec.count)
    a, b = edges[w], edges[w + 1]
    terms = dict(p.terms)
    sampler, weights, weighting = run.sampler, run.weights, run.weighting
    if previous is not None:
        # a hard initial condition without `restart`: continuity by the soft term after window 0
        restored = {} if hard_start(previous) else spec.restored
        if restored:
            terms.update(restored)
            sampler = dataclasses.replace(
                sampler, batch={**sampler.batch, **{k: spec.restored_batch[k] for k in restored}})
            extra_w = {k: spec.restored_weights[k] for k in restored}
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
                          (cut_domain(p.domain, a, b), terms))
    if weighting is not None and weighting.causal is not None:
        causal = dataclasses.replace(weighting.causal, t0=a, t1=b)
        weighting = eqx.tree_at(lambda x: x.causal, weighting, causal)
    network = previous if previous is not None else run.network
    if previous is not None and hard_start(previous):
        t_axis = p.domain.coords.index("t")

        def start(x, net=previous, a=a):  # the previous window's state at t = a (frozen)
            # `where`, not a scatter: the constant must not meet shard_map's varying axes
            return net(jnp.where(jnp.arange(x.shape[0]) == t_axis, jnp.asarray(a, x.dtype), x))

        network = eqx.tree_at(lambda n: n.transform, previous, previous.transform.restart(a, b, start))
    if spec.local_time:
        network = local_time(network, a, b, p.domain.coords.index("t"))
    try:
        sampler.check(problem, run.mesh.size if run.mesh is not None else 1)
    except ValueError as e:
        raise ConfigError(f"train.time_windows: {e}") from None
    return dataclasses.replace(run, problem=problem, network=network, sampler=sampler,
                               weights=weights, weighting=weighting)


def local_time(network: eqx.Module, a: float, b: float, t_axis: int) -> eqx.Module:
    """``network`` with its input map rescaled so that the window $[a, b]$ maps onto
    $[-1, 1]$ in time (``train.window_time: local``): a timed `SphereEmbedding` gets
    ``t0=a, t1=b``; `Normalize` and `PeriodicEmbedding` get their time entry of
    ``lower``/``upper`` replaced; other maps (Fourier features) see the rescaled input.
    Parameters are unchanged (warm start)."""

    def rescale(e):
        return e.in_time_window(a, b, t_axis) if isinstance(e, AbstractTimeWindowed) else e

    return eqx.tree_at(lambda n: n.embedding, network, tuple(rescale(e) for e in network.embedding))


def window_dir(out: Path | None, w: int) -> Path | None:
    return None if out is None else Path(out) / "windows" / f"w{w}"


def window_timing(out: Path | None, w: int, res, resume: bool) -> tuple[int, float]:
    """``(steps, seconds)`` timed in window ``w`` (every chunk, compilation excluded, as
    `pinnkit.train.loop.fit` times them): this process's (``res``, its `FitResult`) plus, when
    resuming, those of earlier processes read from ``windows/w{w}/timing.json``. The sum is
    written back there (process 0), so that a resumed run whose windows are already
    trained, or whose current window runs only a freshly compiled chunk, keeps the figure.
    An unreadable file counts as no earlier timing."""
    import json

    from ..parallel.mesh import is_main_process
    from .checkpoint import atomic_write_bytes

    path = None if out is None else window_dir(out, w) / "timing.json"
    steps, secs = 0, 0.0
    if resume and path is not None and path.is_file():
        try:
            saved = json.loads(path.read_text())
            steps, secs = int(saved["timed_steps"]), float(saved["timed_s"])
        except (OSError, ValueError, KeyError, TypeError):
            steps, secs = 0, 0.0
    if res.timed_steps > 0 and np.isfinite(res.steps_per_s) and res.steps_per_s > 0:
        steps, secs = steps + res.timed_steps, secs + res.timed_steps / res.steps_per_s
    if path is not None and path.parent.is_dir() and is_main_process():
        atomic_write_bytes(path, (json.dumps({"timed_steps": steps, "timed_s": secs}) + "\n").encode())
    return steps, secs


def fit_windows(run: Run, *, out_dir: str | Path | None = None, resume: bool | str = False,
                evaluate_window=None, **fit_options):
    """Trains the ``train.time_windows`` windows in sequence (`pinnkit.train.loop.fit` each).

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
    trained so far (all of them unless stopped early) and whose ``steps_per_s`` is that of
    the steps timed in any window (`window_timing`; NaN if no chunk ran, e.g. a resumed
    run of finished windows without their timing.json).
    """

    from ..parallel.mesh import is_main_process
    from .loop import RESULTS, FitResult, fit

    n, per = run.n_windows, run.total_steps
    edges = window_edges(run.problem, n)
    nets, history, wall, result, prev, res = [], [], 0.0, RESULTS.successful, None, None
    cpu = 0.0
    timed_steps, timed_s, compiled = 0, 0.0, {"compile_s": {}, "compile_cpu_s": {}}
    first_compile_s = None
    for w in range(n):
        rw = window_run(run, w, prev)
        if run.max_time is not None:  # the budgets are the whole run's
            rw = dataclasses.replace(rw, max_time=max(run.max_time - wall, 0.0))
        if run.max_cpu_time is not None:
            rw = dataclasses.replace(rw, max_cpu_time=max(run.max_cpu_time - cpu, 0.0))
        ev = evaluate_window(rw) if evaluate_window is not None else None
        res = fit(rw, out_dir=window_dir(out_dir, w), resume="auto" if resume else False,
                  evaluate=ev, **fit_options)
        history.extend({**h, "step": w * per + h["step"], "window": w} for h in res.history)
        wall, cpu = wall + res.wall_s, cpu + res.cpu_s
        n_w, s_w = window_timing(out_dir, w, res, bool(resume))
        timed_steps, timed_s = timed_steps + n_w, timed_s + s_w
        for k, per_phase in compiled.items():  # every window compiles its own chunks
            for name, t in getattr(res, k).items():
                per_phase[name] = per_phase.get(name, 0.0) + t
        first_compile_s = res.first_compile_s if first_compile_s is None else first_compile_s
        nets.append(res.network)
        prev, result = res.network, res.result
        if result not in (RESULTS.successful, RESULTS.converged):
            break
    steps = (len(nets) - 1) * per + res.step
    if out_dir is not None and is_main_process():
        text = "".join(json_dumps(h) + "\n" for h in history)
        (Path(out_dir) / "metrics.jsonl").write_text(text)
    model = Windowed(tuple(nets), edges[: len(nets) + 1], run.problem.domain.coords.index("t"))
    return FitResult(network=model, coeffs=res.coeffs, result=result, step=steps, history=history,
                     wall_s=wall, bad_step=res.bad_step, detail=res.detail, timed_steps=timed_steps,
                     cpu_s=cpu,
                     stop_reason=res.stop_reason,
                     steps_per_s=timed_steps / timed_s if timed_s > 0 else float("nan"),
                     first_compile_s=first_compile_s, **compiled)


def load_windows(run: Run, run_dir: Path) -> tuple[Windowed, dict, int]:
    """``(model, coeffs, steps)`` from the windows' newest checkpoints in ``run_dir``."""
    from ..errors import RunDirError
    from . import checkpoint as ckpt
    from .step import init_extra, split_model

    nets, coeffs, steps, prev = [], {}, 0, None
    edges = window_edges(run.problem, run.n_windows)
    for w in range(run.n_windows):
        found = ckpt.newest_valid(window_dir(run_dir, w) / "checkpoints")  # all damaged: raises
        if found is None:
            break
        path, head = found
        params, static = split_model(window_run(run, w, prev))  # w's layout (hard start)
        p, _ = ckpt.load_model(path, head, params, run.phases, init_extra(run))
        net, coeffs = eqx.combine(p, static)
        nets.append(net)
        prev = net
        steps = w * run.total_steps + int(head["step"])
    if not nets:
        raise RunDirError(f"{run_dir}: no valid checkpoint in windows/w0/checkpoints/")
    model = Windowed(tuple(nets), edges[: len(nets) + 1], run.problem.domain.coords.index("t"))
    return model, coeffs, steps

