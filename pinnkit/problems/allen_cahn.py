r"""Allen–Cahn equation (benchmark P6), periodic in $x$.

$$u_t - d\,u_{xx} + r\,(u^3 - u) = 0,\quad x\in[-1, 1)\ \text{periodic},\ t\in[0, 1],
\quad u(x, 0) = x^2\cos\pi x,\qquad d = 10^{-4},\ r = 5.$$

Coordinates ``(t, x)``; field ``u``; coefficients ``d``, ``r``. Periodicity is left to the
network (``network.periodic: {x: 2.0}``, an exact periodic embedding), or dropped: $u_0$
has a kink at the seam $x = \pm 1$ that decays like $e^{-10t}$, and diffusion couples the
two sides only over $\sqrt{dt} \le 0.01$, so `configs/allen_cahn.yaml` uses plain input
normalisation and no boundary term. That costs accuracy only at the seam, but there it
dominates below ~1e-4 (unless ``seam_layer``, below): a non-periodic network keeps the
one-sided solution, and the smoothed kink it misses is ~2√(dt) high (docs/benchmarks.md,
P6). The initial condition is a loss term, or exact with ``network.hard_constraint: true``
($u = u_0(x) + \frac{t - t_0}{t_1 - t_0} N(t, x)$). With ``seam_layer=True`` the exact
initial condition's lift also carries that smoothed kink in closed form
(`seam_layer_lift`), so that the network's part is smooth across the seam and a
non-periodic network gets the periodic solution there too
(`configs/allen_cahn_ssbroyden.yaml`).

The reference is `pinnkit.solvers.solve_allen_cahn` (Fourier ETDRK4, float64) on ``n_x``
points and ``n_t`` (201) times in $[0, 1]$, computed on first use. A point is evaluated
by the trigonometric interpolant of the neighbouring stored times, linearly interpolated
in $t$ (exact on the stored times: the eval grid ``resolution: 201`` hits them).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..geometry.domains import Interval, SpaceTime
from ..physics.constraints import HardDirichlet
from ..physics.host import HostFunction
from ..physics.problem import Problem
from ..physics.terms import Equation, Initial


def allen_cahn_pde(f, c):
    """$u_t - d u_{xx} + r (u^3 - u)$ at one point."""
    u = f["u"]
    return f.partial("u", "t") - c["d"] * f.partial("u", "x", "x") + c["r"] * (u * u * u - u)


def _initial(z):
    x = z[-1]
    return (x * x * jnp.cos(jnp.pi * x))[None]


# `seam_layer_lift`: A (u0 ~ -1 + A rho at the seam), the cut-off's width, the time shift
_KINK, _CUT, _T_EPS = 2.0, 0.2, 1e-10


def seam_layer_lift(d: float, r: float):
    r"""The lift $g(t, x) = u_0(x) + A\,\chi(\rho)\,[e^{-2rt} m_\sigma(\rho) - \rho]$ of the hard
    initial condition, $u = g + t N$: the kink of the periodic $u_0$ at the seam
    $x = \pm1$ ($\rho = 1 - |x|$, $A = 2$ half its slope jump) heat-smoothed and damped
    as the equation linearised about $u = -1$ does it, with
    $m_\sigma(\rho) = \sigma\sqrt{2/\pi}\,e^{-\rho^2/2\sigma^2} + \rho\,\mathrm{erf}(\rho/\sigma\sqrt2)$,
    $\sigma^2 = 2d(t + 10^{-10})$ (the shift keeps the derivatives finite at $t = 0$; the
    initial value is then $u_0$ to within $4\sqrt{10^{-10} d/\pi} = 2.3\cdot10^{-7}$ at the seam),
    and the cut-off $\chi = e^{-(\rho/0.2)^2}$ (its kink at $x = 0$ is $10^{-11}$).
    For $t > 0$, $g$ is smooth across the seam, so the network's part
    $u - g$ is smooth there too and a non-periodic network can represent it.
    Returns ``z = (t, x) -> (1,)``."""

    def value(z):
        t, x = z[0], z[-1]
        rho = 1.0 - jnp.abs(x)
        sigma = jnp.sqrt(2.0 * d * (t + _T_EPS))
        m = sigma * jnp.sqrt(2.0 / jnp.pi) * jnp.exp(-0.5 * (rho / sigma) ** 2) + rho * jax.scipy.special.erf(
            rho / (sigma * jnp.sqrt(2.0)))
        chi = jnp.exp(-((rho / _CUT) ** 2))
        return _initial(z) + _KINK * chi * (jnp.exp(-2.0 * r * t) * m - rho)

    return value


def allen_cahn_exact(d: float, r: float, n_x: int = 1024, n_t: int = 201, t_end: float = 1.0):
    """Reference ``(t, x) -> (1,)`` on $[0, t_\text{end}]$ computed on the host (a
    `HostFunction`: numpy interpolation of the spectral table of ``n_t`` times; never
    differentiated). The ETDRK4 solve runs once, lazily."""
    cache = {}

    def table():
        if not cache:
            from ..solvers import allen_cahn_grid, allen_cahn_initial_condition, solve_allen_cahn

            with jax.enable_x64(True):
                x = allen_cahn_grid(n_x)
                t = jnp.linspace(0.0, t_end, n_t, dtype=jnp.float64)
                u = solve_allen_cahn(allen_cahn_initial_condition(x), t, diffusion=d, reaction=r)
                cache["coef"] = np.fft.rfft(np.asarray(u), axis=-1) / n_x  # (n_t, n_x//2+1)
        return cache["coef"]

    def host(z):
        z = np.asarray(z, np.float64).reshape(-1, 2)
        coef = table()
        k = np.arange(coef.shape[1])
        scale = np.where((k == 0) | (k == n_x // 2), 1.0, 2.0)  # real series from rfft
        pos = np.clip(z[:, 0] / t_end, 0.0, 1.0) * (n_t - 1)
        i0 = np.minimum(np.floor(pos).astype(int), n_t - 2)
        w = pos - i0
        out = np.empty(len(z))
        for s in range(0, len(z), 2048):
            sl = slice(s, s + 2048)
            basis = np.exp(1j * np.pi * np.outer(z[sl, 1] + 1.0, k)) * scale
            u0 = np.real(np.sum(coef[i0[sl]] * basis, axis=1))
            u1 = np.real(np.sum(coef[i0[sl] + 1] * basis, axis=1))
            out[sl] = (1 - w[sl]) * u0 + w[sl] * u1
        return out[:, None]

    return HostFunction(host, 1)


def allen_cahn(d: float = 1e-4, r: float = 5.0, n_x: int = 1024, seam_layer: bool = False,
               t_end: float = 1.0, n_t: int = 201) -> Problem:
    """P6: Allen–Cahn on $[0, 1]\\times[-1, 1)$ (or $[0, t_\\text{end}]$), $u_0 = x^2\\cos\\pi x$.

    **Arguments:**
    - `d`: diffusion (default 1e-4); `r`: reaction rate (default 5).
    - `n_x`: reference grid points (default 1024: rel. L2 error 7.7e-6 against 8192 over
      $[0, 1]$, 4e-5 over $[0, 0.1]$, where the smoothed kink is thinnest; 4096: 3.7e-7).
    - `seam_layer`: the hard initial condition lifts the seam's smoothed kink
      (`seam_layer_lift`; default False: $u = u_0 + t N$).
    - `t_end`: the final time (default 1; P6 is $[0, 1]$, a shorter interval is its first
      time window on its own, e.g. 0.1 for the optimiser ablation).
    - `n_t`: stored reference times, equally spaced in $[0, t_\\text{end}]$ (default 201: the
      eval grid ``resolution: 201`` hits them). Between them the reference is linear in
      $t$, an error of up to ~3e-5 at a spacing of 0.005: time windows evaluate on their
      own grids (10 windows of 201 times need 2001).
    """
    if not t_end > 0 or int(n_t) < 2:
        raise ValueError(f"allen_cahn needs t_end > 0 and n_t >= 2: actual t_end={t_end}, n_t={n_t}")
    domain = SpaceTime(Interval(-1.0, 1.0), 0.0, float(t_end))
    lo, hi = domain.bounds()
    return Problem(
        domain,
        ("u",),
        {"pde": Equation(allen_cahn_pde), "initial": Initial(("u",), _initial)},
        coeffs={"d": float(d), "r": float(r)},
        reference=allen_cahn_exact(float(d), float(r), int(n_x), int(n_t), float(t_end)),
        hard_constraint=HardDirichlet(lo, hi, (), (0,), t_axis=0,
                                      value=seam_layer_lift(float(d), float(r)) if seam_layer else _initial),
        enforced=("initial",),
        name="allen_cahn",
        description=f"P6: Allen-Cahn, d = {float(d):g}, r = {float(r):g}, periodic in x",
    )
