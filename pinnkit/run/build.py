"""From a validated `RunConfig` to the objects training needs (`Run`).

Lookup tables from config names to classes are plain dicts used here and nowhere else.
Problem factories' own argument errors are re-raised as `ConfigError` naming
``problem.params``.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jax.sharding import Mesh

from .._loader import load_callable
from ..diffops import METHODS, AbstractDiffMethod
from ..errors import ConfigError
from ..geometry.config import resolve_files
from ..nn.layers import Network, Parity
from ..nn.nets import build_network as build_core_network
from ..nn.nets import physics_informed_init
from ..optim import natural_gradient, soap
from ..parallel.mesh import make_mesh
from ..physics.coeffs import constrained
from ..physics.problem import Problem
from ..sphere.domain import Sphere, SphereEmbedding
from ..train.adaptive import Adaptive
from ..train.sampling import Sampler
from ..train.weighting import Causal, Weighting
from .config import PhaseConfig, RunConfig


@dataclass(frozen=True)
class Phase:
    """One optimiser phase: ``steps`` steps of ``optimizer`` from step ``start``."""

    kind: str
    start: int
    steps: int
    optimizer: optax.GradientTransformation

    @property
    def end(self) -> int:
        return self.start + self.steps


@dataclass(frozen=True)
class Run:
    """Everything `fit` needs, built from a config."""

    config: RunConfig
    problem: Problem
    network: Network
    sampler: Sampler
    method: AbstractDiffMethod
    phases: tuple[Phase, ...]
    weights: dict[str, float]
    mesh: Mesh | None
    dtype: jnp.dtype
    weighting: Weighting | None = None
    adaptive: Adaptive | None = None

    @property
    def total_steps(self) -> int:
        return self.phases[-1].end


def _factory(cfg: RunConfig):
    from ..problems import PROBLEMS

    name = cfg.problem.name
    if name in PROBLEMS:
        return PROBLEMS[name]
    if ":" in name:
        base = Path(cfg.source_dir) if cfg.source_dir else None
        return load_callable(name, base_dir=base, what="problem.name")
    raise ConfigError(
        f"problem.name: unknown problem {name!r}. Built-in problems: {', '.join(sorted(PROBLEMS))} "
        "(see `pinnkit problems`), or name your own factory as 'path/to/file.py:make_problem'."
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
            f"{cfg.problem.name!r}; its coefficients are {sorted(problem.coeffs) or 'none'}"
        )
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
    unknown = set(n.periodic) - set(problem.domain.coords)
    if unknown:
        raise ConfigError(
            f"network.periodic: {sorted(unknown)} are not coordinates of the problem; its "
            f"coordinates are {problem.domain.coords}"
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


def _schedule(p: PhaseConfig, steps: int):
    s = p.schedule
    if s.kind == "constant":
        return p.lr
    if s.kind == "exponential_decay" and s.warmup_steps > 0:  # linear warm-up from 0 first
        return optax.warmup_exponential_decay_schedule(
            0.0, p.lr, min(s.warmup_steps, steps - 1), s.decay_steps, s.rate
        )
    if s.kind == "exponential_decay":
        return optax.exponential_decay(p.lr, s.decay_steps, s.rate)
    if s.kind == "cosine":
        return optax.cosine_decay_schedule(p.lr, steps, alpha=s.final_fraction)
    return optax.warmup_cosine_decay_schedule(
        0.0, p.lr, min(s.warmup_steps, steps - 1), steps, end_value=p.lr * s.final_fraction
    )


def build_optimizer(p: PhaseConfig, steps: int) -> optax.GradientTransformation:
    if p.kind == "lbfgs":
        ls = optax.scale_by_zoom_linesearch(max_linesearch_steps=p.max_linesearch_steps)
        opt = optax.lbfgs(memory_size=p.memory, linesearch=ls)
    elif p.kind == "natural_gradient":  # no lr, schedule or clipping: the line search sets the step
        return natural_gradient(damping=p.damping, grid=p.step_grid, safeguard=p.safeguard)
    elif p.kind == "soap":
        opt = soap(_schedule(p, steps), precondition_frequency=p.precondition_frequency)
    elif p.kind == "sgd":
        opt = optax.sgd(_schedule(p, steps))
    else:
        opt = optax.adam(_schedule(p, steps))
    if p.clip_norm is not None:
        opt = optax.chain(optax.clip_by_global_norm(p.clip_norm), opt)
    return opt


def _with_coeff_lrs(cfg: RunConfig, p: PhaseConfig, steps: int, net_opt):
    """Adam/SGD phases: coefficients with their own ``lr`` get their own optimiser
    (`optax.multi_transform` over the ``(network, coeffs)`` parameter tree). L-BFGS is
    one joint quasi-Newton model, so it keeps a single optimiser."""
    own = {k: c.lr for k, c in cfg.problem.coeffs.items() if c.lr is not None}
    if not own or p.kind in ("lbfgs", "natural_gradient"):
        return net_opt
    transforms = {"net": net_opt}
    for k, lr in own.items():
        transforms[f"coeff:{k}"] = build_optimizer(dataclasses.replace(p, lr=lr), steps)

    def labels(params):
        net, coeffs = params
        return (
            jax.tree_util.tree_map(lambda _: "net", net),
            {k: jax.tree_util.tree_map(lambda _, k=k: f"coeff:{k}" if k in own else "net", v)
             for k, v in coeffs.items()},
        )

    return optax.multi_transform(transforms, labels)


def build_phases(cfg: RunConfig) -> tuple[Phase, ...]:
    phases, start = [], 0
    for p, n in zip(cfg.optim.phases, cfg.phase_steps(), strict=True):
        phases.append(Phase(p.kind, start, n, _with_coeff_lrs(cfg, p, n, build_optimizer(p, n))))
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
    sampler = Sampler(batch, cfg.sampler.method, cfg.sampler.resample)
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
    method = METHODS[cfg.diffops.method]()
    weighting = build_weighting(cfg, problem, weights)
    adaptive = build_adaptive(cfg, problem, batch)
    _check_natural_gradient(cfg)
    return Run(cfg, problem, network, sampler, method, build_phases(cfg), weights, mesh, dtype,
               weighting, adaptive)


def _check_natural_gradient(cfg: RunConfig) -> None:
    """The Gauss-Newton Gramian is built from the fixed term weights and the sampler's
    points; adaptive weights, causal weights and adaptive point sets would change the loss
    it does not see."""
    if not any(p.kind == "natural_gradient" for p in cfg.optim.phases):
        return
    clash = [k for k, on in (("weighting.kind=" + cfg.weighting.kind, cfg.weighting.kind != "fixed"),
                             ("weighting.causal", cfg.weighting.causal is not None),
                             ("sampler.adaptive", cfg.sampler.adaptive is not None)) if on]
    if clash:
        raise ConfigError(
            f"optim.phases: a natural_gradient phase cannot be combined with {', '.join(clash)}: "
            "its Gauss-Newton matrix uses fixed term weights and the sampler's own points. "
            "Use weighting.kind=fixed without causal or adaptive sampling, or an adam/soap/lbfgs phase"
        )


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
