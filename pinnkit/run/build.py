"""From a validated `RunConfig` to the objects training needs (`Run`).

Lookup tables from config names to classes are plain dicts used here and nowhere else.
Problem factories' own argument errors are re-raised as `ConfigError` naming
``problem.params``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import warnings
from contextvars import ContextVar
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.sharding import Mesh

from .._loader import load_callable, provider_factories
from ..diffops import ESTIMATORS, METHODS, AbstractDiffMethod
from ..errors import ConfigError
from ..geometry.config import resolve_files
from ..geometry.domains import SpaceTime
from ..geometry.singular import enrich
from ..nn.nets import build_network as build_core_network
from ..nn.nets import physics_informed_init
from ..nn.network import Network, Parity
from ..parallel.mesh import make_mesh
from ..physics.coeffs import constrained
from ..physics.problem import Problem
from ..physics.terms import Initial
from ..sphere.domain import Sphere, SphereEmbedding
from ..train.adaptive import Adaptive
from ..train.collocation import Sampler
from ..train.phases import PHASES, AbstractPhase, check_frozen
from ..train.spec import Run, TimeWindows
from ..train.weighting import Causal, Weighting
from .config import RunConfig, did_you_mean
from .exactlift import HardValueIsExactWarning, check_exact_lift

# Inside `reusing_problems`, the problem the plan built is the one `build_run` gets
# (`_factory`): some references are solved when the problem is made (seconds).
_MEMO: ContextVar[dict | None] = ContextVar("pinnkit_problem_memo", default=None)


@contextlib.contextmanager
def reusing_problems():
    """Within this block, building the same problem twice builds it once."""
    token = _MEMO.set({})
    try:
        yield
    finally:
        _MEMO.reset(token)


def memoized(factory, name: str):
    """``factory`` itself, or inside `reusing_problems` a wrapper returning the problem
    already built for the same name and parameters (problems are immutable)."""
    memo = _MEMO.get()
    if memo is None:
        return factory

    @functools.wraps(factory)
    def make(**params):
        key = (name, repr(sorted(params.items())))
        if key not in memo:
            memo[key] = factory(**params)
        return memo[key]

    return make


def _factory(cfg: RunConfig):
    """The problem factory named by ``problem.name``: a built-in, an installed provider's
    entry point, ``file.py:function`` or a provider module's ``module:function``
    (`pinnkit._loader`)."""
    from ..problems import PROBLEMS

    name = cfg.problem.name
    if name in PROBLEMS:
        return memoized(PROBLEMS[name], name)
    provided = provider_factories()
    if name in provided:
        try:
            return memoized(provided[name].load(), name)
        except Exception as e:
            raise ConfigError(f"problem.name {name!r}: loading the provider's entry point "
                              f"{provided[name].value!r} failed with {type(e).__name__}: {e}") from e
    if ":" in name:
        base = Path(cfg.source_dir) if cfg.source_dir else None
        return memoized(load_callable(name, base_dir=base, what="problem.name"), f"{base}/{name}")
    extra = f"; from installed providers: {', '.join(sorted(provided))}" if provided else ""
    raise ConfigError(
        f"problem.name: unknown problem {name!r}.{did_you_mean(name, [*PROBLEMS, *provided])} "
        f"Built-in problems: {', '.join(sorted(PROBLEMS))} "
        f"(see `pinnkit problems`){extra}, or name your own factory as 'path/to/file.py:make_problem'."
    )


def build_problem(cfg: RunConfig) -> Problem:
    """Calls the problem factory with ``problem.params``, checking names first."""
    factory = _factory(cfg)
    params = resolve_files(cfg.problem.params, cfg.source_dir)  # mesh files: config-relative
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):
        sig = None
    if sig is not None and not any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values()):
        unknown = set(params) - set(sig.parameters)
        if unknown:
            allowed = ", ".join(
                f"{p.name}={p.default!r}" if p.default is not p.empty else p.name
                for p in sig.parameters.values()
            )
            raise ConfigError(
                f"problem.params: {sorted(unknown)} not accepted by problem "
                f"{cfg.problem.name!r}; its parameters are: {allowed}"
            )
    try:
        with warnings.catch_warnings():
            # the expression problem's own warning on an exact hard value: the check below
            # refuses it (or, opted in, warns) and says so once, for every problem
            warnings.simplefilter("ignore", HardValueIsExactWarning)
            problem = factory(**params)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"problem.params of {cfg.problem.name!r}: {e}") from None
    if not isinstance(problem, Problem):
        raise ConfigError(
            f"problem.name {cfg.problem.name!r} returned {type(problem).__name__}, not a "
            "pinnkit.Problem"
        )
    trainable = set(cfg.problem.trainable) | set(cfg.problem.coeffs)
    unknown = trainable - set(problem.coeffs)
    if unknown:
        raise ConfigError(
            f"problem.trainable/problem.coeffs: {sorted(unknown)} are not coefficients of "
            f"{cfg.problem.name!r}; its coefficients are {sorted(problem.coeffs) or 'none'}")
    if trainable:
        problem = problem.replace(trainable=trainable)
    if cfg.problem.coeffs:
        problem = _configure_coeffs(cfg, problem)
    if cfg.problem.observations:
        problem = _add_observations(cfg, problem)
    if cfg.network.hard_constraint:
        if problem.hard_constraint is None:
            raise ConfigError(
                f"network.hard_constraint: problem {cfg.problem.name!r} defines no hard "
                "constraint; set network.hard_constraint: false"
            )
        memo, key = _MEMO.get(), ("exact lift warned", cfg.problem.name, repr(cfg.problem.params))
        check_exact_lift(cfg, problem, warn=memo is None or key not in memo)  # once per run
        if memo is not None:
            memo[key] = True
        problem = problem.without(problem.enforced)
    return problem


def _configure_coeffs(cfg: RunConfig, problem: Problem) -> Problem:
    """Applies ``problem.coeffs``: initial values and transforms of learnt coefficients."""
    coeffs = dict(problem.coeffs)
    for k, c in cfg.problem.coeffs.items():
        init = c.init if c.init is not None else float(coeffs[k])
        try:
            coeffs[k] = constrained(init, c.transform, c.lower, c.upper)
        except ValueError as e:
            raise ConfigError(f"problem.coeffs.{k}: {e}") from None
    return eqx.tree_at(lambda p: p.coeffs, problem, coeffs)


def _add_observations(cfg: RunConfig, problem: Problem) -> Problem:
    """Adds the ``problem.observations`` terms, read from files (relative to the config)."""
    from ..physics.observations import load_observations

    terms = dict(problem.terms)
    for k, o in cfg.problem.observations.items():
        if k in terms:
            raise ConfigError(
                f"problem.observations.{k}: the problem already has a term {k!r}; its terms are "
                f"{sorted(terms)}; choose another name"
            )
        path = Path(o.file)
        if not path.is_absolute() and cfg.source_dir and (Path(cfg.source_dir) / path).exists():
            path = Path(cfg.source_dir) / path
        bad = set(o.fields) - set(problem.out_names)
        if bad:
            raise ConfigError(
                f"problem.observations.{k}.fields: {sorted(bad)} are not fields of the problem; "
                f"its fields are {problem.out_names}"
            )
        terms[k] = load_observations(path, o.fields, domain=problem.domain, coords=o.coords or None,
                                     weight=o.weight, sigma=o.sigma)
    return eqx.tree_at(lambda p: p.terms, problem, terms)


def build_method(cfg: RunConfig) -> AbstractDiffMethod:
    """The derivative method: ``diffops.method``, or a stochastic estimator on the Taylor
    engine when ``diffops.estimator`` is not ``exact`` (validated in `config.validate`)."""
    d = cfg.diffops
    if d.estimator == "exact":
        return METHODS[d.method]()
    return ESTIMATORS[d.estimator](samples=d.samples, draw=d.draw)


def build_network(cfg: RunConfig, problem: Problem, key, dtype) -> Network:
    n = cfg.network
    input_map = None
    if isinstance(problem.domain, Sphere):
        # pole-regular: the network sees unit vectors (and normalised time), see sphere.py
        if n.periodic:
            raise ConfigError(
                "network.periodic: a problem on the sphere is already exactly periodic in "
                "longitude through its unit-vector embedding; remove network.periodic"
            )
        input_map = SphereEmbedding(problem.domain.t0, problem.domain.t1)
    bounds = problem.domain.bounds() if (n.normalize_inputs or n.periodic) else None
    fourier = (n.fourier.dim, n.fourier.scale) if n.fourier is not None else None
    transform = problem.hard_constraint if n.hard_constraint else None
    if n.singular:  # corner singular functions with trainable coefficients, after the constraint
        try:
            transform = enrich(problem.domain, problem.out_names, n.singular, transform, dtype)
        except ValueError as e:
            raise ConfigError(str(e)) from None
    unknown = set(n.periodic) - set(problem.domain.coords)
    if unknown:
        raise ConfigError(
            f"network.periodic: {sorted(unknown)} are not coordinates of the problem; its "
            f"coordinates are {problem.domain.coords}"
        )
    required = dict(problem.periodic)  # the formulation needs them (Problem.periodic)
    if any(k not in n.periodic or float(n.periodic[k]) != v for k, v in required.items()):
        raise ConfigError(
            f"network.periodic: problem {problem.name!r} needs a network periodic in "
            f"{required} (its formulation solves over one period), got {dict(n.periodic) or 'none'}; "
            f"add network.periodic: {{{', '.join(f'{k}: {v:g}' for k, v in required.items())}}}"
        )
    net = build_core_network(
        n.kind,
        problem.domain.coords,
        problem.out_names,
        width=n.width,
        depth=n.depth,
        activation=n.activation,
        init=n.init,
        bounds=bounds,
        fourier=fourier,
        periodic=dict(n.periodic) or None,
        rwf=(n.rwf.mean, n.rwf.std) if n.rwf is not None else None,
        transform=transform,
        input_map=input_map,
        squares=n.squares,
        key=key,
        dtype=dtype,
    )
    if n.pi_init is not None:
        net = _physics_informed_init(cfg, problem, net, jax.random.fold_in(key, 1), dtype)
    if n.parity:
        net = eqx.tree_at(lambda m: m.parity, net, build_parity(n.parity, problem),
                          is_leaf=lambda v: v is None)
    return net


def build_parity(parity: dict[str, str], problem: Problem) -> Parity:
    """`Parity` from ``network.parity`` (coordinate → odd/even), reflecting about the
    centre of the domain's bounding box in each coordinate."""
    coords = problem.domain.coords
    unknown = sorted(set(parity) - set(coords))
    if unknown:
        raise ConfigError(
            f"network.parity: {unknown} are not coordinates of the problem; its coordinates "
            f"are {coords}"
        )
    lo, hi = problem.domain.bounds()
    axes = tuple(coords.index(c) for c in sorted(parity, key=coords.index))
    return Parity(axes, tuple(0.5 * (float(lo[a]) + float(hi[a])) for a in axes),
                  tuple(-1.0 if parity[coords[a]] == "odd" else 1.0 for a in axes))


def _physics_informed_init(cfg: RunConfig, problem: Problem, net: Network, key, dtype) -> Network:
    """``network.pi_init``: least-squares fit of the PirateNet's last layer to data at
    ``pi_points`` interior points: ``"reference"`` (the problem's reference solution) or
    a Dirichlet/initial term's target $g$, evaluated on the whole domain (an initial
    condition $g(x)$ is extended constantly in time, as in Wang et al. 2024)."""
    from ..physics.terms import Dirichlet, Initial, _target_values

    name = cfg.network.pi_init
    outs = problem.out_names
    if name == "reference":
        if problem.reference is None:
            raise ConfigError(
                f"network.pi_init: 'reference' but problem {cfg.problem.name!r} has no reference "
                f"solution; name one of its Dirichlet/initial terms instead: {sorted(problem.terms)}"
            )
        fn, outputs = (lambda x: jnp.atleast_1d(problem.reference(x))), tuple(range(len(outs)))
    else:
        term = problem.terms.get(name)
        if not isinstance(term, Dirichlet | Initial):
            fit = sorted(k for k, t in problem.terms.items() if isinstance(t, Dirichlet | Initial))
            raise ConfigError(
                f"network.pi_init: {name!r} is not a Dirichlet or initial term of problem "
                f"{cfg.problem.name!r}; use 'reference' or one of {fit}"
            )
        fn = lambda x: _target_values(term.target, x, len(term.fields))  # noqa: E731
        outputs = tuple(outs.index(f) for f in term.fields)
    points = problem.domain.sample(key, cfg.network.pi_points, "interior", dtype)
    return physics_informed_init(net, points, jax.vmap(fn)(points), outputs)


def build_phases(cfg: RunConfig) -> tuple[AbstractPhase, ...]:
    """The optimiser phases of ``optim.phases``, consecutive from step 0, each built by
    its kind's class in the registry (`pinnkit.train.phases.PHASES`)."""
    own = {k: c.lr for k, c in cfg.problem.coeffs.items() if c.lr is not None}
    phases, start = [], 0
    for p, n in zip(cfg.optim.phases, cfg.phase_steps(), strict=True):
        phases.append(PHASES[p.kind].from_config(p, start, n, own))
        start += n
    return tuple(phases)


def build_run(cfg: RunConfig, *, mesh: Mesh | None = None, with_mesh: bool = True) -> Run:
    """Builds problem, network (initialised from ``train.seed``), sampler, derivative
    method, optimiser phases and mesh. Raises `ConfigError` for inconsistent configs."""
    dtype = jnp.float64 if cfg.numerics.x64 else jnp.float32
    if cfg.numerics.x64 and not jax.config.read("jax_enable_x64"):
        raise ConfigError(
            "numerics.x64 is true but JAX runs in float32: enable float64 before any JAX "
            "computation (the pinnkit CLI does this; in Python call "
            "jax.config.update('jax_enable_x64', True) first)"
        )
    problem = build_problem(cfg)
    if mesh is None and with_mesh:
        mesh = make_mesh(cfg.mesh.data)
    # A batch entry for a term that the hard constraint enforces is unused, not an error,
    # so that `--set network.hard_constraint=true` works on any config.
    dropped = set(problem.enforced) if cfg.network.hard_constraint else set()
    batch = {k: v for k, v in cfg.sampler.batch.items() if k not in dropped}
    sampler = Sampler(batch, cfg.sampler.method, cfg.sampler.resample, cfg.sampler.resample_every)
    n_dev = mesh.size if mesh is not None else 1
    try:
        sampler.check(problem, n_dev)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    # Weights of enforced terms are kept too: time windows restore those terms (windows.py).
    unknown_w = set(cfg.weighting.weights) - set(problem.terms) - dropped
    if unknown_w:
        raise ConfigError(
            f"weighting.weights: {sorted(unknown_w)} are not terms of the problem; its "
            f"terms are {sorted(problem.terms)}"
        )
    weights = {k: float(cfg.weighting.weights.get(k, 1.0)) for k in problem.terms}
    key = jax.random.key(cfg.train.seed)
    network = build_network(cfg, problem, jax.random.fold_in(key, 0), dtype)
    method = build_method(cfg)
    weighting = build_weighting(cfg, problem, weights)
    adaptive = build_adaptive(cfg, problem, batch)
    phases = build_phases(cfg)
    check_frozen(cfg.optim.phases, problem.trainable, cfg.problem.name)
    _check_whole_loss(cfg, phases)
    windows = build_windows(cfg, problem, network) if cfg.train.time_windows > 1 else None
    t = cfg.train
    return Run(problem, network, sampler, method, phases, weights, mesh, dtype,
               weighting=weighting, adaptive=adaptive, seed=t.seed, chunk=t.chunk,
               log_every=t.log_every, eval_every=t.eval_every,
               checkpoint_every=cfg.checkpoint.every, checkpoint_keep=cfg.checkpoint.keep,
               windows=windows, divergence_factor=t.divergence_factor, max_time=t.max_time,
               max_cpu_time=t.max_cpu_time,
               name=cfg.problem.name, record=cfg.to_dict(), config=cfg)


def _check_whole_loss(cfg: RunConfig, phases) -> None:
    """A phase that needs the residual Jacobian (``gauss_newton``: natural gradient)
    builds its Gramian with the fixed term weights; adaptive or causal weights would change
    the loss it does not see (adaptive point sets are its points: `Loss.gauss_newton`)."""
    kinds = sorted({ph.kind for ph in phases if ph.gauss_newton})
    if not kinds:
        return
    clash = [k for k, on in (("weighting.kind=" + cfg.weighting.kind, cfg.weighting.kind != "fixed"),
                             ("weighting.causal", cfg.weighting.causal is not None)) if on]
    if clash:
        raise ConfigError(
            f"optim.phases: a {kinds[0]} phase cannot be combined with {', '.join(clash)}: "
            "its Gauss-Newton matrix uses fixed term weights. "
            "Use weighting.kind=fixed without causal weights, or an adam/soap/lbfgs phase"
        )


def build_windows(cfg: RunConfig, problem: Problem, network: Network) -> TimeWindows:
    """`TimeWindows` of ``train.time_windows``; raises `ConfigError` unless the problem
    can be marched in time (a `SpaceTime` or timed `Sphere` domain, and an `Initial`
    term or a hard initial condition)."""
    from ..train.windows import hard_start

    n = cfg.train.time_windows
    d = problem.domain
    hard = hard_start(network)
    restored = {} if hard else _enforced_initial(cfg, problem)
    init = [k for k, t in problem.terms.items() if isinstance(t, Initial)] + list(restored)
    timed = isinstance(d, SpaceTime) or (isinstance(d, Sphere) and d.timed)
    if not timed or not (init or hard):
        raise ConfigError(
            f"train.time_windows={n}: time marching needs a time-dependent (SpaceTime or "
            f"timed Sphere) problem with an Initial term; {cfg.problem.name!r} has domain "
            f"{type(d).__name__} and terms {sorted(problem.terms)}. Set train.time_windows: 1"
        )
    missing = sorted(k for k in restored if k not in cfg.sampler.batch)
    if missing:
        raise ConfigError(
            f"train.time_windows={n} with network.hard_constraint: windows after the first "
            f"impose continuity through the term(s) {missing} that the hard constraint "
            f"removes, so they need a batch size: add e.g. sampler.batch.{missing[0]}: 512"
        )
    return TimeWindows(n, cfg.train.window_time == "local", restored,
                       {k: cfg.sampler.batch[k] for k in restored},
                       {k: float(cfg.weighting.weights.get(k, 1.0)) for k in restored})


def _enforced_initial(cfg: RunConfig, problem: Problem) -> dict[str, Initial]:
    """The `Initial` terms that ``network.hard_constraint`` removed from ``problem``
    (``{}`` without a hard constraint): taken from the problem as built without it."""
    if not cfg.network.hard_constraint:
        return {}
    soft = dataclasses.replace(cfg, network=dataclasses.replace(cfg.network, hard_constraint=False))
    full = build_problem(soft)
    return {k: t for k, t in full.terms.items()
            if isinstance(t, Initial) and k in full.enforced and k not in problem.terms}


def build_weighting(cfg: RunConfig, problem: Problem, weights: dict[str, float]) -> Weighting:
    """`Weighting` from ``weighting``; causal weights need a ``t`` coordinate and an
    ``interior`` term."""
    w = cfg.weighting
    causal = None
    if w.causal is not None:
        coords = problem.domain.coords
        terms = tuple(sorted(k for k, t in problem.terms.items() if t.where == "interior"))
        if "t" not in coords or not terms:
            raise ConfigError(
                f"weighting.causal: causal weights need a time-dependent problem (a 't' "
                f"coordinate and an 'interior' equation term); {cfg.problem.name!r} has "
                f"coordinates {coords} and terms {sorted(problem.terms)}. Remove weighting.causal"
            )
        lo, hi = problem.domain.bounds()
        ax = coords.index("t")
        causal = Causal(terms, ax, float(lo[ax]), float(hi[ax]), w.causal.chunks, w.causal.tol,
                        w.causal.final_tol)
    return Weighting(w.kind, weights, w.update_every, w.momentum, w.ntk_points, causal)


def build_adaptive(cfg: RunConfig, problem: Problem, batch: dict[str, int]) -> Adaptive | None:
    """`Adaptive` from ``sampler.adaptive`` (None when unset)."""
    a = cfg.sampler.adaptive
    if a is None:
        return None
    sampled = sorted(k for k, t in problem.terms.items() if t.where != "data")
    names = list(a.terms) or [k for k in sampled if problem.terms[k].where == "interior"]
    bad = sorted(set(names) - set(sampled))
    if bad or not names:
        raise ConfigError(
            f"sampler.adaptive.terms: {bad or names} are not sampled terms of the problem; "
            f"choose among {sampled}"
        )
    return Adaptive(a.kind, {k: batch[k] for k in names}, a.every, a.pool, a.k, a.c, a.rar_fraction,
                    a.until_step)
