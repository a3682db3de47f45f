r"""2-D periodic flow from a given initial vorticity (optionally Kolmogorov-forced), with
the pseudo-spectral solver as its reference (`pinnkit.solvers.solve_vorticity`, evaluated
pointwise by `pinnkit.solvers.spectral_reference`). The equations are those of
`pinnkit.problems.navier_stokes`."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from .._loader import is_callable_spec, load_callable
from ..geometry.domains import Box, SpaceTime
from ..physics.constraints import HardDirichlet
from ..physics.flow import check_form, equations, out_names
from ..physics.problem import Problem
from ..physics.terms import Initial
from ..solvers.spectral_reference import complex_of, fourier_eval, spectral_reference, truncate_modes


def _omega0_function(spec, L: float) -> Callable:
    """``omega0(x, y)`` on arrays from a name, a list of modes or a callable (see `periodic_flow`)."""
    k = 2 * math.pi / L
    if spec == "taylor_green":
        return lambda x, y: 2 * jnp.cos(k * x) * jnp.cos(k * y)
    if callable(spec):
        return spec
    if is_callable_spec(spec):
        return load_callable(spec, what="problem.params.omega0")
    if isinstance(spec, str):
        raise ValueError(
            f"omega0 must be 'taylor_green', a list of modes [mx, my, amplitude(, phase)] or "
            f"'path/to/file.py:function': actual={spec!r}"
        )
    modes = [tuple(float(v) for v in m) for m in spec]
    for m in modes:
        if len(m) not in (3, 4) or m[0] != int(m[0]) or m[1] != int(m[1]) or m[:2] == (0.0, 0.0):
            raise ValueError(
                f"each omega0 mode is [mx, my, amplitude] or [mx, my, amplitude, phase] with "
                f"integer wavenumbers, not both zero: actual={list(m)}"
            )

    def omega0(x, y):
        return sum(m[2] * jnp.cos(k * (m[0] * x + m[1] * y) + (m[3] if len(m) == 4 else 0.0))
                   for m in modes)

    return omega0


def _hashable(spec):
    if isinstance(spec, list | tuple):
        return tuple(_hashable(v) for v in spec)
    if isinstance(spec, Mapping):
        return tuple(sorted((k, _hashable(v)) for k, v in spec.items()))
    return spec


@functools.lru_cache(maxsize=8)
def spectral_snapshots(omega0, nu: float, T: float, forcing, n: int, n_times: int, L: float,
                       form: str) -> np.ndarray:
    r"""Solves the periodic problem with `pinnkit.solvers.solve_vorticity` (float64,
    rtol 1e-10) at ``n_times`` equally spaced times and returns the centred Fourier
    coefficients of the fields of `form`, shape ``(n_times, n_fields, M, M)``
    (see `pinnkit.solvers.spectral_reference.truncate_modes`; coefficients below 1e-11 of
    the largest are dropped). Cached."""
    from ..solvers import (
        KolmogorovForcing,
        periodic_grid,
        primitive_from_vorticity,
        solve_vorticity,
    )

    force = None if forcing is None else KolmogorovForcing(**dict(forcing))
    with jax.enable_x64(True):
        x, y = periodic_grid(n, L, jnp.float64)
        w0 = jnp.asarray(_omega0_function(omega0, L)(x, y), jnp.float64)
        w0 = w0 - jnp.mean(w0)  # a torus carries no net vorticity
        times = np.linspace(0.0, T, n_times)
        omega = solve_vorticity(w0, nu, times, L, force, rtol=1e-10, atol=1e-12)
        if form == "vorticity_streamfunction":
            m = np.fft.fftfreq(n, 1.0 / n) * (2 * math.pi / L)
            k2 = m[:, None] ** 2 + m[None, :] ** 2
            w_hat = np.fft.fft2(np.asarray(omega), axes=(-2, -1))
            psi = np.real(np.fft.ifft2(np.where(k2 > 0, w_hat / np.where(k2 > 0, k2, 1), 0), axes=(-2, -1)))
            fields = np.stack([psi, np.asarray(omega)], axis=1)
        else:
            fields = np.stack([np.stack([np.asarray(a) for a in primitive_from_vorticity(w, L)])
                               for w in omega])
    coef = np.fft.fftshift(np.fft.fft2(fields, norm="forward", axes=(-2, -1)), axes=(-2, -1))
    return truncate_modes(coef, 1e-11)


def periodic_flow(
    omega0=((1, 1, 2.0), (2, -1, 1.0, 0.5), (1, 3, 0.5, 1.0)),
    nu: float = 0.01,
    T: float = 1.0,
    forcing: Mapping | None = None,
    L: float = 2 * math.pi,
    form: str = "velocity_pressure",
    n: int = 64,
    n_times: int = 41,
) -> Problem:
    r"""2-D periodic flow on $[0, L]^2 \times [0, T]$ from a given initial vorticity, with
    the pseudo-spectral solver (`pinnkit.solvers.solve_vorticity`) as the reference.

    **Arguments:**
    - `omega0`: the initial vorticity: ``"taylor_green"`` ($2\cos kx \cos ky$,
      $k = 2\pi/L$); a list of modes ``[mx, my, a]`` or ``[mx, my, a, phase]`` giving
      $\sum a\cos(k(m_x x + m_y y) + \text{phase})$; or ``"path/to/file.py:function"``
      (a callable ``(x, y) -> omega`` on arrays). Its mean is removed.
    - `nu`: kinematic viscosity.
    - `T`: final time.
    - `forcing`: optional Kolmogorov forcing ``{amplitude: A, wavenumber: m, drag: α}``:
      body force $(A\sin(2\pi m y/L), 0) - \alpha\mathbf u$ (see
      `pinnkit.solvers.KolmogorovForcing`).
    - `L`: period in $x$ and $y$ (use ``network.periodic: {x: L, y: L}``).
    - `form`: ``"velocity_pressure"`` or ``"vorticity_streamfunction"``.
    - `n`: spectral grid points per direction; `n_times`: stored snapshots (the
      reference interpolates between them in time, to ~1e-7 for smooth flows at the
      defaults).

    The initial data (``initial`` term, hard constraint) come from the same Fourier
    series at $t = 0$; building the problem runs the solver once (cached per process).
    """
    check_form(form)
    nu, T, L = float(nu), float(T), float(L)
    forcing = None if forcing is None else dict(forcing)
    if forcing is not None:
        unknown = set(forcing) - {"amplitude", "wavenumber", "drag"}
        if unknown or "amplitude" not in forcing or "wavenumber" not in forcing:
            raise ValueError(
                f"forcing needs amplitude and wavenumber (and optionally drag): actual={forcing}"
            )
    coef = spectral_snapshots(_hashable(omega0), nu, T, _hashable(forcing), int(n), int(n_times), L, form)
    initial_coef = truncate_modes(coef[0, :2], 1e-11)
    reference = spectral_reference(coef, 0.0, T, L)

    def initial(z):
        return fourier_eval(jnp.asarray(complex_of(initial_coef, z.dtype)), L, z[1], z[2])

    force = curl_force = None
    if forcing is not None:
        amp, kf = float(forcing["amplitude"]), 2 * math.pi * int(forcing["wavenumber"]) / L
        drag = float(forcing.get("drag", 0.0))

        def force(z, vel):
            return jnp.stack([amp * jnp.sin(kf * z[2]), jnp.zeros_like(z[2])]) - drag * vel

        def curl_force(z, omega):
            return -amp * kf * jnp.cos(kf * z[2]) - drag * omega

    domain = SpaceTime(Box((0.0, 0.0), (L, L)), 0.0, T)
    out = out_names(form, 2)
    terms = {
        **equations(form, 2, unsteady=True, force=force, curl_force=curl_force),
        "initial": Initial(out[:2], initial),
    }
    return Problem(
        domain,
        out,
        terms,
        coeffs={"nu": nu},
        reference=reference,
        hard_constraint=HardDirichlet(*domain.bounds(), (), (0, 1), value=initial, t_axis=0),
        enforced=("initial",),
        gauge={"p" if form == "velocity_pressure" else "psi": "mean_per_time"},  # up to c(t)
        name="periodic_flow",
        description=f"2-D periodic flow, ν = {nu:g}, t ∈ [0, {T:g}]"
        + (", Kolmogorov forcing" if forcing else ""),
    )
