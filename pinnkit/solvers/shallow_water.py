r"""Spectral reference for the shallow-water equations on the sphere (Williamson test 6).

The reference model is `dinosaur` (Google's JAX spectral dynamical core, the optional
``climate`` extra: ``pip install -e .[climate]``); this module sets up Williamson et al.
(1992) test 6 in it, integrates, and evaluates the result on a pinnkit Gaussian grid.

**Equations** (dinosaur's `ShallowWaterEquations`, one layer, no orography): vorticity
$\zeta$, divergence $\delta$ and geopotential $\Phi = gh$ in spherical-harmonic space,

$$\partial_t\zeta = -\nabla\cdot[(\zeta + f)\mathbf v],\quad
\partial_t\delta = \mathbf k\cdot\nabla\times[(\zeta + f)\mathbf v]
 - \Delta(\Phi + |\mathbf v|^2/2),\quad \partial_t\Phi = -\nabla\cdot(\Phi\mathbf v),$$

$f = 2\Omega\sin\theta$; triangular truncation T$L$ on the quadratically dealiased
Gaussian grid (T85: 256 × 128, T170: 512 × 256). **Time stepping**: the IMEX
Runge–Kutta scheme SIL3 of Whitaker & Kar (2013) (gravity-wave terms linearised about the
mean geopotential implicit, the rest explicit; third order explicit, second order
implicit), fixed step ``dt_s``. **Dissipation**: none by default, only the truncation
(dinosaur clips the top degree of every tendency). Optional $\nabla^4$ hyperdiffusion
after each step, the exact decay $e^{-\Delta t\,\nu_4 (l(l+1))^2/a^4}$ of every
coefficient with $\nu_4 = a^4/(\tau\,(L(L+1))^2)$: the top degree $L$ decays with
e-folding time $\tau$ = ``diffusion_hours`` (6 h: $\nu_4 \approx 1.4\times10^{15}$ m⁴/s at
T85, $8.8\times10^{13}$ at T170). Off because over the one-day horizon the Rossby–Haurwitz
wave stays smooth without it (T85 and T170 agree to 3.5e-7 in the height anomaly at
day 1, docs/climate.md), while 6 h at the top degree would damp the degree-5 wave itself
by ~1.6e-5 per 6 h at T85. Needed for long runs (Williamson's 14 days), where the
cascade reaches the truncation.

**Units**: SI in and out; inside, dinosaur's scales (length $a$, time $1/(2\Omega)$).
Everything runs in float64 (enabled locally, restored after). Convergence (day 1,
compared on a 48-latitude Gaussian grid) is recorded in docs/climate.md.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..errors import PinnkitError
from ..sphere.domain import DAY, EARTH_OMEGA, EARTH_RADIUS, GRAVITY


def _dinosaur():
    """The dinosaur modules this file uses, or a one-paragraph error naming the extra."""
    try:
        import dinosaur  # noqa: F401
        from dinosaur import (
            coordinate_systems,
            filtering,
            layer_coordinates,
            shallow_water,
            spherical_harmonic,
            time_integration,
            units,
        )
    except ImportError as e:
        raise PinnkitError(
            "the Williamson test 6 reference needs the spectral model `dinosaur`, an optional "
            f"dependency that is not installed ({e}); install the climate extra with "
            "`pip install -e .[climate]` (or `pip install dinosaur`), or leave out the reference "
            "(`problem.params.with_reference: false`)."
        ) from None
    return dict(coords=coordinate_systems, filtering=filtering, layers=layer_coordinates,
                sw=shallow_water, sh=spherical_harmonic, ti=time_integration, units=units)


def williamson6_initial(lon, lat, *, omega_rh: float = 7.848e-6, K_rh: float = 7.848e-6, wave: int = 4,
                        h0: float = 8000.0, radius: float = EARTH_RADIUS, omega: float = EARTH_OMEGA,
                        gravity: float = GRAVITY) -> dict[str, np.ndarray]:
    r"""Williamson test 6 initial state (Rossby–Haurwitz wave, $R$ = `wave`), SI units:

    $u = a\omega\cos\theta + aK\cos^{R-1}\theta\,(R\sin^2\theta - \cos^2\theta)\cos R\lambda$,
    $v = -aKR\cos^{R-1}\theta\sin\theta\sin R\lambda$,
    $\Phi = gh_0 + a^2[A(\theta) + B(\theta)\cos R\lambda + C(\theta)\cos 2R\lambda]$ with
    $A = \tfrac\omega2(2\Omega + \omega)\cos^2\theta + \tfrac14K^2\cos^{2R}\theta
    [(R + 1)\cos^2\theta + 2R^2 - R - 2 - 2R^2\cos^{-2}\theta]$,
    $B = \frac{2(\Omega + \omega)K}{(R + 1)(R + 2)}\cos^R\theta[R^2 + 2R + 2 - (R + 1)^2\cos^2\theta]$,
    $C = \tfrac14K^2\cos^{2R}\theta[(R + 1)\cos^2\theta - (R + 2)]$,
    $\zeta = 2\omega\sin\theta - K(R + 1)(R + 2)\sin\theta\cos^R\theta\cos R\lambda$.

    ``lon``, ``lat`` radians (any broadcastable shapes). **Returns** ``u, v`` (m/s),
    ``phi`` (m²/s²), ``zeta`` (1/s).
    """
    a, w, K, R, om = radius, omega_rh, K_rh, int(wave), omega
    c, s = np.cos(lat), np.sin(lat)
    u = a * w * c + a * K * c ** (R - 1) * (R * s * s - c * c) * np.cos(R * lon)
    v = -a * K * R * c ** (R - 1) * s * np.sin(R * lon)
    A = 0.5 * w * (2 * om + w) * c * c + 0.25 * K * K * (
        c ** (2 * R) * ((R + 1) * c * c + 2 * R * R - R - 2) - 2 * R * R * c ** (2 * R - 2))
    B = 2 * (om + w) * K / ((R + 1) * (R + 2)) * c**R * (R * R + 2 * R + 2 - (R + 1) ** 2 * c * c)
    C = 0.25 * K * K * c ** (2 * R) * ((R + 1) * c * c - (R + 2))
    phi = gravity * h0 + a * a * (A + B * np.cos(R * lon) + C * np.cos(2 * R * lon))
    zeta = 2 * w * s - K * (R + 1) * (R + 2) * s * c**R * np.cos(R * lon)
    return {"u": u, "v": v, "phi": phi, "zeta": zeta}


TRUNCATIONS = (21, 31, 42, 85, 106, 119, 170, 213, 340, 425)  # dinosaur's Grid.T<L> constructors


def default_dt(truncation: int) -> float:
    r"""$600\cdot 85/L$ s rounded down to divide a day: 1200 s at T42, 600 s at T85, 300 s at T170."""
    return DAY / math.ceil(DAY / (600.0 * 85 / truncation))


def check_steps(truncation: int, days: float, dt_s: float) -> int:
    """The number of steps ``days``·86400/``dt_s``, or ValueError (bad truncation, or not a
    positive whole number of steps)."""
    if truncation not in TRUNCATIONS:
        raise ValueError(f"the reference truncation must be one of dinosaur's T grids {TRUNCATIONS}: "
                         f"actual={truncation}")
    steps = days * DAY / dt_s if dt_s > 0 else -1.0
    if not (days > 0 and steps >= 1 and abs(steps - round(steps)) < 1e-9):
        raise ValueError(f"days * 86400 / dt_s must be a positive whole number of reference steps: "
                         f"actual days={days}, dt_s={dt_s}")
    return int(round(steps))


def check_reference(truncation: int, days: float, dt_s: float | None) -> float:
    """The reference step ``dt_s`` (None: `default_dt`) after checking it (`check_steps`)
    and that dinosaur is installed: a problem calls this when it is built, so a bad
    setting or a missing extra fails before training, not after."""
    dt_s = default_dt(truncation) if dt_s is None else dt_s
    check_steps(truncation, days, dt_s)
    _dinosaur()
    return dt_s


def solve_shallow_water(initial: Callable, truncation: int, days: float, dt_s: float, nlat: int = 48, *,
                        diffusion_hours: float = math.inf, radius: float = EARTH_RADIUS,
                        omega: float = EARTH_OMEGA) -> dict:
    r"""Integrates the shallow-water equations from ``initial(lon, lat) -> {"u", "v", "phi"}``
    (SI, on numpy meshes) for ``days`` at triangular truncation ``truncation`` (a dinosaur
    ``Grid.T<truncation>``, e.g. 42, 85, 170) with step ``dt_s`` seconds (``days``·86400
    must be a whole number of steps).

    **Returns** a dict: ``u, v`` (m/s, east/north), ``phi`` (m²/s²) of shape
    ``(2 nlat, nlat)`` at ``days`` on `pinnkit.sphere.gaussian_grid` (``nlat``): the
    spectral series evaluated exactly at those nodes, not interpolated from the model
    grid; ``mass_drift``, ``energy_drift`` (relative change of $\int\Phi$ and
    $\int(\Phi|\mathbf v|^2 + \Phi^2)/2$ on the model grid), ``steps``, ``wall_s``.
    """
    steps = check_steps(truncation, days, dt_s)
    d = _dinosaur()
    import jax

    with jax.enable_x64(True), jax.numpy_rank_promotion("allow"):
        return _solve(d, initial, truncation, steps, dt_s, nlat, diffusion_hours, radius, omega)


def _solve(d, initial, truncation, steps, dt_s, nlat, diffusion_hours, radius, omega):
    import jax

    sh, ti = d["sh"], d["ti"]
    grid = getattr(sh.Grid, f"T{truncation}")()
    coords = d["coords"].CoordinateSystem(grid, d["layers"].LayerCoordinates(1))
    # lengths in a, time in 1/(2 Omega): the model sees radius 1 and Omega = 1/2 whatever a, Omega
    specs = dataclasses.replace(d["units"].SimUnits.from_si(), radius=1.0, angular_velocity=0.5)
    t_unit = 1.0 / (2 * omega)  # s
    v_unit, phi_unit = radius / t_unit, (radius / t_unit) ** 2
    lon, sin_lat = grid.nodal_mesh
    s0 = initial(lon, np.arcsin(sin_lat))
    weights = np.broadcast_to(np.polynomial.legendre.leggauss(grid.latitude_nodes)[1], lon.shape)
    phi = s0["phi"] / phi_unit
    phi_mean = float(np.sum(weights * phi) / np.sum(weights))
    vor, div = sh.uv_nodal_to_vor_div_modal(grid, s0["u"] / v_unit, s0["v"] / v_unit)
    state = d["sw"].State(vorticity=vor[None], divergence=div[None],
                          potential=grid.to_modal(phi - phi_mean)[None])
    equation = d["sw"].ShallowWaterEquations(coords, specs, None, np.array([phi_mean]))
    dt = dt_s / t_unit
    step = ti.imex_rk_sil3(equation, dt)
    if math.isfinite(diffusion_hours):
        L = grid.total_wavenumbers - 1
        nu4 = 1.0 / (diffusion_hours * 3600.0 / t_unit * (L * (L + 1)) ** 2)
        hyper = d["filtering"].horizontal_diffusion_filter(grid, dt * nu4, order=2)
        step = ti.step_with_filters(step, [ti.runge_kutta_step_filter(hyper)])
    start = time.perf_counter()
    end = jax.block_until_ready(jax.jit(ti.repeated(step, steps))(state))
    wall = time.perf_counter() - start

    def nodal(st):
        u, v = sh.vor_div_to_uv_nodal(grid, st.vorticity[0], st.divergence[0])
        return np.asarray(u), np.asarray(v), np.asarray(grid.to_nodal(st.potential[0])) + phi_mean

    (u0, v0, p0), (u1, v1, p1) = nodal(state), nodal(end)
    energy = [float(np.sum(weights * 0.5 * (p * (u * u + v * v) + p * p)))
              for u, v, p in ((u0, v0, p0), (u1, v1, p1))]
    mass = [float(np.sum(weights * p)) for p in (p0, p1)]
    out_u, out_v, out_phi = _on_gaussian_grid(sh, grid, end, nlat)
    return {"u": out_u * v_unit, "v": out_v * v_unit, "phi": (out_phi + phi_mean) * phi_unit,
            "mass_drift": (mass[1] - mass[0]) / mass[0], "energy_drift": (energy[1] - energy[0]) / energy[0],
            "steps": steps, "wall_s": wall, "truncation": truncation, "dt_s": dt_s, "nlat": nlat}


def _on_gaussian_grid(sh, grid, state, nlat: int):
    """East/north wind and geopotential of a model state at the nodes of `gaussian_grid`."""
    u_cos, v_cos = sh.get_cos_lat_vector(state.vorticity[0], state.divergence[0], grid)
    cos_lat = np.cos(np.arcsin(np.polynomial.legendre.leggauss(nlat)[0]))[None, :]
    at = lambda x: synthesis_at_gaussian_nodes(sh, grid, x, nlat)
    return at(u_cos) / cos_lat, at(v_cos) / cos_lat, at(state.potential[0])


def synthesis_at_gaussian_nodes(sh, grid, modal, nlat: int) -> np.ndarray:
    """The spherical-harmonic series ``modal`` (dinosaur layout of ``grid``) evaluated
    exactly at the nodes ``(2 nlat, nlat)`` of `pinnkit.sphere.gaussian_grid`: a dinosaur
    grid with the same truncation, ``nlat`` Gauss latitudes and ``k·2nlat`` longitudes (its
    Fourier basis needs at least as many nodes as wavenumbers), every k-th kept."""
    nlon = 2 * nlat
    k = -(-grid.longitude_wavenumbers // nlon)
    fine = sh.Grid(longitude_wavenumbers=grid.longitude_wavenumbers, total_wavenumbers=grid.total_wavenumbers,
                   longitude_nodes=k * nlon, latitude_nodes=nlat)
    return np.asarray(fine.to_nodal(modal))[::k]


def williamson6_reference(truncation: int = 85, days: float = 1.0, dt_s: float | None = 75.0,
                          nlat: int = 48, *, cache_dir: str | os.PathLike | None = None,
                          diffusion_hours: float = math.inf, **params) -> dict:
    r"""Williamson test 6 at ``days`` from `solve_shallow_water` (``params``: those of
    `williamson6_initial`), on the Gaussian grid of ``nlat`` latitudes, SI units.

    The defaults (T85, 75 s) are the converged one-day reference of docs/climate.md;
    ``dt_s=None`` takes `default_dt`. With ``cache_dir`` the result is stored as
    ``cache_dir/williamson6_T<L>_<hash>.npz``, the hash over every argument and dinosaur's
    version, and read back on the next call. Cost of one day (solve with compilation, one
    busy core at nice 10): T85 with 75 s 4.6 min, T85 with 600 s 40 s, T170 with 300 s 11 min.
    """
    dt_s = check_reference(truncation, days, dt_s)
    import dinosaur

    number = lambda v: float(v) if isinstance(v, int | float) else v  # 4 and 4.0: one key
    key = {k: number(v) for k, v in dict(truncation=truncation, days=days, dt_s=dt_s, nlat=nlat,
                                          diffusion_hours=diffusion_hours, **params).items()}
    key["dinosaur"] = dinosaur.__version__
    path = None
    if cache_dir is not None:
        digest = hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
        path = Path(cache_dir).expanduser() / f"williamson6_T{truncation}_{digest}.npz"
        if path.is_file():
            with np.load(path) as z:
                return {k: (z[k] if z[k].ndim else z[k].item()) for k in z.files}
    phys = {k: params[k] for k in ("radius", "omega") if k in params}
    initial = lambda lon, lat: williamson6_initial(lon, lat, **params)
    out = solve_shallow_water(initial, truncation, days, dt_s, nlat, diffusion_hours=diffusion_hours, **phys)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.npz")
        np.savez(tmp, **out)
        os.replace(tmp, path)
    return out

