r"""Inverse problems and data assimilation with synthetic observations.

Each factory draws its "measurements" from the exact solution at the *true* coefficient,
adds Gaussian noise, and starts the learnt coefficient from a wrong guess; the PINN fits
the data and the physics together and the coefficient is read off the trained model
(``summary.json``: ``coeffs``). The reference (for errors) is the true solution.

Noise model: ``noise`` is relative to the standard deviation of each observed field over
the observation points (Raissi et al. 2019's convention): ``y_obs = y + noise·std(y)·ε``,
$\varepsilon \sim N(0, 1)$ i.i.d., seeded by ``seed``.

- `burgers_inverse`: Burgers with unknown $\nu$ (P3 physics).
- `kovasznay_inverse`: steady Navier–Stokes (Kovasznay flow, P2) with unknown Re.
- `ebm_inverse`: the steady energy-balance model (C1) with unknown diffusivity $D$, from
  "station" temperatures.
- `flow_assimilation`: reconstruct the whole Kovasznay flow (u, v and the never-measured
  p) from sparse noisy velocity measurements, without any boundary data.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from ..geometry.domains import Box, Interval
from ..physics.constraints import AbstractHardConstraint
from ..physics.energy_balance import EBM_A as EBM_A
from ..physics.energy_balance import EBM_B as EBM_B
from ..physics.energy_balance import EBM_Q as EBM_Q
from ..physics.energy_balance import absorbed_fraction, legendre_p2, legendre_p4
from ..physics.energy_balance import ebm_steady_modes as ebm_steady_modes
from ..physics.problem import Problem
from ..physics.terms import Dirichlet, Equation, Observation
from .burgers import burgers


def synthetic_observations(domain, exact, fields, n: int, noise: float, seed: int,
                           pick=None) -> Observation:
    """``n`` observations of ``fields`` at uniform random points of ``domain``'s box.

    ``exact(points (n, d)) -> (n, m)`` (numpy) gives the true values; ``pick`` selects
    the observed columns (default all). Noise as in the module docstring.
    """
    rng = np.random.default_rng(seed)
    lo, hi = (np.asarray(b, np.float64) for b in domain.bounds())
    pts = lo + rng.random((n, len(lo))) * (hi - lo)
    vals = np.asarray(exact(pts), np.float64)
    if pick is not None:
        vals = vals[:, list(pick)]
    vals = vals + noise * vals.std(axis=0, keepdims=True) * rng.standard_normal(vals.shape)
    return Observation(pts, vals, tuple(fields))


# ---------------------------------------------------------------------------- Burgers


def burgers_inverse(nu_true: float = 0.01 / math.pi, nu_init: float = 0.05, n_obs: int = 500,
                    noise: float = 0.01, seed: int = 1234, known_initial: bool = True) -> Problem:
    r"""Burgers (P3 physics) with unknown viscosity $\nu$ from ``n_obs`` noisy observations.

    **Arguments:**
    - `nu_true`: viscosity of the data (default $0.01/\pi$).
    - `nu_init`: starting guess of the learnt ``nu`` (positive transform).
    - `n_obs`, `noise`, `seed`: the measurements (module docstring).
    - `known_initial`: also impose the initial and boundary conditions (``initial``,
      ``boundary`` terms); False: data and PDE only, as in Raissi et al. (2019).
    """
    fwd = burgers(nu_true)
    from ..solvers import burgers_cole_hopf

    obs = synthetic_observations(
        fwd.domain, lambda z: burgers_cole_hopf(z[:, 1], z[:, 0], nu=nu_true)[:, None],
        ("u",), n_obs, noise, seed,
    )
    terms = {"pde": fwd.terms["pde"], "data": obs}
    if known_initial:
        terms.update(initial=fwd.terms["initial"], boundary=fwd.terms["boundary"])
    return Problem(
        fwd.domain, ("u",), terms, coeffs={"nu": nu_init}, trainable=("nu",),
        coeff_transforms={"nu": "positive"}, reference=fwd.reference,
        name="burgers_inverse",
        description=f"Burgers inverse: nu (true {nu_true:.5g}) from {n_obs} points, {noise:.0%} noise",
    )


# -------------------------------------------------------------------------- Kovasznay


def kovasznay_exact(x, Re: float = 20.0):
    r"""Kovasznay's flow at one point (or rows) ``x = (x, y)``: ``(u, v, p)`` stacked last;
    $\lambda = \text{Re}/2 - \sqrt{\text{Re}^2/4 + 4\pi^2}$ (benchmark P2, docs/benchmarks.md)."""
    lam = Re / 2 - math.sqrt(Re**2 / 4 + 4 * math.pi**2)
    xp = jnp if isinstance(x, jnp.ndarray) else np
    e = xp.exp(lam * x[..., 0])
    c, s = xp.cos(2 * math.pi * x[..., 1]), xp.sin(2 * math.pi * x[..., 1])
    return xp.stack([1 - e * c, lam / (2 * math.pi) * e * s, 0.5 * (1 - e**2)], axis=-1)


def _ns_terms(nu_of):
    """Steady incompressible NS residuals with $\\nu$ = ``nu_of(coeffs)``."""

    def momentum(f, c):
        nu = nu_of(c)
        u, v = f["u"], f["v"]
        ru = u * f.partial("u", "x") + v * f.partial("u", "y") + f.partial("p", "x") - nu * f.laplacian("u")
        rv = u * f.partial("v", "x") + v * f.partial("v", "y") + f.partial("p", "y") - nu * f.laplacian("v")
        return jnp.stack([ru, rv])

    return {"momentum": Equation(momentum), "continuity": Equation(lambda f, c: f.divergence(("u", "v")))}


def kovasznay_inverse(Re_true: float = 20.0, Re_init: float = 10.0, n_obs: int = 500,
                      noise: float = 0.01, seed: int = 1234, boundary: bool = True) -> Problem:
    r"""Kovasznay flow (P2) with unknown Reynolds number from noisy velocity measurements.

    Steady Navier–Stokes $(\mathbf u\cdot\nabla)\mathbf u + \nabla p - \text{Re}^{-1}\Delta\mathbf u
    = 0$, $\nabla\cdot\mathbf u = 0$ on $[-0.5, 1]\times[-0.5, 1.5]$; the learnt
    coefficient is ``Re`` itself (positive transform), so ``summary.json`` reports it.

    **Arguments:**
    - `Re_true`, `Re_init`: the data's and the starting Reynolds number.
    - `n_obs`, `noise`, `seed`: velocity (u, v) measurements; p is never observed.
    - `boundary`: impose the exact velocity on the boundary (``boundary`` term).
    """
    domain = Box((-0.5, -0.5), (1.0, 1.5))

    def exact(x):
        return kovasznay_exact(x, Re_true).astype(x.dtype)

    terms = {**_ns_terms(lambda c: 1.0 / c["Re"]),
             "data": synthetic_observations(domain, lambda z: kovasznay_exact(z, Re_true), ("u", "v"),
                                            n_obs, noise, seed, pick=(0, 1))}
    if boundary:
        terms["boundary"] = Dirichlet("boundary", ("u", "v"), lambda x: exact(x)[:2])
    return Problem(
        domain, ("u", "v", "p"), terms, coeffs={"Re": Re_init}, trainable=("Re",),
        coeff_transforms={"Re": "positive"}, reference=exact, mean_free=("p",),
        name="kovasznay_inverse",
        description=f"Kovasznay inverse: Re (true {Re_true:g}) from {n_obs} velocity points",
    )


def flow_assimilation(Re: float = 20.0, n_obs: int = 200, noise: float = 0.01, seed: int = 1234) -> Problem:
    r"""Data assimilation: the whole Kovasznay flow from ``n_obs`` sparse noisy velocity
    measurements and the Navier–Stokes equations, with **no boundary conditions** and the
    pressure never measured. The errors in ``summary.json`` (against the exact flow, p up
    to a constant) measure the reconstruction.
    """
    p = kovasznay_inverse(Re, Re, n_obs, noise, seed, boundary=False)
    return p.replace(trainable=(), name="flow_assimilation",
                     description=f"Kovasznay flow (Re = {Re:g}) reconstructed from {n_obs} velocity points")


# ------------------------------------------------------------------ energy balance (C1)

# The energy-balance pieces are public in `pinnkit.physics.energy_balance`; these names
# stay importable from here (the private ones for one release).
_p2, _p4 = legendre_p2, legendre_p4


def ebm_inverse(D_true: float = 0.55, D_init: float = 0.3, n_obs: int = 64, noise_C: float = 0.1,
                seed: int = 1234, T_scale: float = 20.0, a0: float = 0.7, a2: float = 0.078,
                s2: float = 0.48) -> Problem:
    r"""Steady energy-balance model (C1) with unknown diffusivity $D$ from station temperatures.

    $$D\,\partial_x\big[(1 - x^2)\,T_x\big] - (A + B\,T) + Q\,s(x)\,a(x) = 0,\qquad
    x = \sin\varphi \in [-1, 1],$$

    insolation $s = 1 - s_2P_2$, co-albedo $a = a_0 - a_2P_2$ (`s2`, `a0`, `a2`: North's
    0.48, 0.7, 0.078), $A = 210$, $B = 2$, $Q = 1365.2/4$; $T$ in °C.
    The operator is singular at the poles ($1 - x^2 = 0$), where boundedness is the only
    condition: no boundary term. The exact solution is $T_0 + T_2P_2 + T_4P_4$
    (`pinnkit.physics.energy_balance.ebm_steady_modes`; 15.733, −25.971, 0.5055 °C at $D = 0.55$).

    **Arguments:**
    - `D_true`, `D_init`: the data's and the starting diffusivity (W m⁻² K⁻¹; positive transform).
    - `n_obs`: stations at random $x$ (uniform in $x$ = uniform in area);
      `noise_C`: their noise standard deviation in °C (absolute); `seed`.
    - `T_scale`: the network's output is multiplied by this (°C), so that an O(1)
      network output covers the ±40 °C range (an output transform, ``network.hard_constraint: true``).

    The residual is divided by $B$, i.e. measured in °C.
    """
    domain = Interval(-1.0, 1.0)
    T0, T2, T4 = ebm_steady_modes(D_true, a0=a0, a2=a2, s2=s2)

    def exact_np(x):
        return (T0 + T2 * legendre_p2(x[:, 0]) + T4 * legendre_p4(x[:, 0]))[:, None]

    def exact(x):
        return jnp.stack([T0 + T2 * legendre_p2(x[0]) + T4 * legendre_p4(x[0])]).astype(x.dtype)

    def energy(f, c):
        x = f.coord("x")
        T, Tx, Txx = f["T"], f.partial("T", "x"), f.partial("T", "x", "x")
        sa = absorbed_fraction(x, a0, a2, s2)
        transport = c["D"] * ((1 - x**2) * Txx - 2 * x * Tx)
        return (transport - (EBM_A + EBM_B * T) + EBM_Q * sa) / EBM_B

    rng = np.random.default_rng(seed)
    pts = rng.uniform(-1.0, 1.0, (n_obs, 1))
    vals = exact_np(pts) + noise_C * rng.standard_normal((n_obs, 1))
    return Problem(
        domain, ("T",),
        {"energy": Equation(energy), "stations": Observation(pts, vals, ("T",))},
        coeffs={"D": D_init}, trainable=("D",), coeff_transforms={"D": "positive"},
        reference=exact, hard_constraint=OutputScale(T_scale), enforced=(),
        name="ebm_inverse",
        description=f"EBM inverse: D (true {D_true:g}) from {n_obs} stations, noise {noise_C:g} °C",
        units={"x": "1", "T": "degC"},
    )


class OutputScale(AbstractHardConstraint):
    """Output transform $y \\mapsto s\\,y$ (used as a problem's ``hard_constraint``)."""

    scale: float = eqx.field(static=True)

    def __call__(self, x, y):
        return self.scale * y
