r"""Allen–Cahn equation (benchmark P6), periodic in $x$.

$$u_t - d\,u_{xx} + r\,(u^3 - u) = 0,\quad x\in[-1, 1)\ \text{periodic},\ t\in[0, 1],
\quad u(x, 0) = x^2\cos\pi x,\qquad d = 10^{-4},\ r = 5.$$

Coordinates ``(t, x)``; field ``u``; coefficients ``d``, ``r``. Periodicity is left to the
network (``network.periodic: {x: 2.0}``, an exact periodic embedding), or dropped: $u_0$
has a kink at the seam $x = \pm 1$ that decays like $e^{-10t}$, and diffusion couples the
two sides only over $\sqrt{dt} \le 0.01$, so `configs/allen_cahn.yaml` uses plain input
normalisation and no boundary term. That costs accuracy only at the seam, but there it
dominates below ~1e-4: a non-periodic network keeps the one-sided solution, and the
smoothed kink it misses is ~2√(dt) high (docs/benchmarks.md, P6). The initial condition
is a loss term, or exact with ``network.hard_constraint: true``
($u = u_0(x) + \frac{t - t_0}{t_1 - t_0} N(t, x)$).

The reference is `pinnkit.solvers.solve_allen_cahn` (Fourier ETDRK4, float64) on ``n_x``
points and 201 times in $[0, 1]$, computed on first use. A point is evaluated by the
trigonometric interpolant of the neighbouring stored times, linearly interpolated in $t$
(exact on the stored times: the eval grid ``resolution: 201`` hits them).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..geometry.domains import Interval, SpaceTime
from ..nn.layers import HardDirichlet
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


def allen_cahn_exact(d: float, r: float, n_x: int = 1024, n_t: int = 201):
    """Reference ``(t, x) -> (1,)`` computed on the host (a `HostFunction`: numpy
    interpolation of the spectral table; never differentiated). The ETDRK4 solve runs
    once, lazily."""
    cache = {}

    def table():
        if not cache:
            from ..solvers import allen_cahn_grid, allen_cahn_initial_condition, solve_allen_cahn

            with jax.enable_x64(True):
                x = allen_cahn_grid(n_x)
                t = jnp.linspace(0.0, 1.0, n_t, dtype=jnp.float64)
                u = solve_allen_cahn(allen_cahn_initial_condition(x), t, diffusion=d, reaction=r)
                cache["coef"] = np.fft.rfft(np.asarray(u), axis=-1) / n_x  # (n_t, n_x//2+1)
        return cache["coef"]

    def host(z):
        z = np.asarray(z, np.float64).reshape(-1, 2)
        coef = table()
        k = np.arange(coef.shape[1])
        scale = np.where((k == 0) | (k == n_x // 2), 1.0, 2.0)  # real series from rfft
        pos = np.clip(z[:, 0], 0.0, 1.0) * (n_t - 1)
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


def allen_cahn(d: float = 1e-4, r: float = 5.0, n_x: int = 1024) -> Problem:
    """P6: Allen–Cahn on $[0, 1]\\times[-1, 1)$, $u_0 = x^2\\cos\\pi x$.

    **Arguments:**
    - `d`: diffusion (default 1e-4); `r`: reaction rate (default 5).
    - `n_x`: reference grid points (1024: reference error ~3e-6 relative L2).
    """
    domain = SpaceTime(Interval(-1.0, 1.0), 0.0, 1.0)
    lo, hi = domain.bounds()
    return Problem(
        domain,
        ("u",),
        {"pde": Equation(allen_cahn_pde), "initial": Initial(("u",), _initial)},
        coeffs={"d": float(d), "r": float(r)},
        reference=allen_cahn_exact(float(d), float(r), int(n_x)),
        hard_constraint=HardDirichlet(lo, hi, (), (0,), value=_initial, t_axis=0),
        enforced=("initial",),
        name="allen_cahn",
        description=f"P6: Allen-Cahn, d = {float(d):g}, r = {float(r):g}, periodic in x",
    )
