r"""Flow past a cylinder: the DFG benchmark 2D-2, periodic vortex shedding (Schäfer & Turek 1996).

The channel and cylinder of 2D-1 (`pinnkit.problems.dfg`) with $U_m = 1.5$, so
$\bar U = 2U_m/3 = 1$ and Re $= \bar U D/\nu = 100$ at $\nu = 10^{-3}$: the flow settles
into periodic vortex shedding. Reported over a period (`DFG2_BANDS`): $c_{D,\max}$,
$c_{L,\max}$, the Strouhal number St $= D f/\bar U$ with $f$ the frequency of $c_L$, and
$\Delta p = p(0.15, 0.2) - p(0.25, 0.2)$ at $t_0 + 1/(2f)$, $t_0$ a time of maximal $c_L$.

**One period, unknown** (the choice of this problem). A PINN started from a symmetric
state converges to the symmetric, unstable, steady solution, and from a perturbed steady
state the shedding grows over many periods of about 0.33 s (seconds of flow): more time
windows than a CPU budget can train. So the unknown here is the limit cycle itself.
The coordinate ``t`` is the *phase* $s = f\,t \in [0, 1]$ (time in periods; the network
must be periodic in it: ``network.periodic: {t: 1}``), the shedding frequency $f$ (Hz) is
the trainable coefficient ``frequency`` (bounded: ``St_range``), and the residuals are

$$f\,\partial_s\mathbf u + (\mathbf u\cdot\nabla)\mathbf u + \nabla p - \nu\Delta\mathbf u = 0,
\qquad \nabla\cdot\mathbf u = 0.$$

Every steady flow solves these too (with any $f$). The term ``anchor`` removes them and
fixes the phase, at a probe $x_p$ in the near wake: $v(0, x_p) = 0$ and
$\partial_s v(0, x_p) \ge 2\pi a$, i.e. the cross-flow velocity rises through zero at
$s = 0$ at least as fast as a sinusoid of amplitude $a$ (``amplitude``, default 0.1 m/s,
a tenth of the mean inflow). Its residual is
$(v,\ \max(0, 2\pi a - \partial_s v))$: zero on any limit cycle whose probe velocity is
fast enough, so it breaks the up-down symmetry without prescribing the amplitude.
Inflow and no-slip are exact with ``network.hard_constraint: true`` (`pinnkit.problems.dfg.no_slip`).

The figures (`shedding_quantities`) come from the trained network at `samples` phases
per period over two periods: the forces of 2D-1 (`circle_force`, and `volume_force`
with the unsteady term) on each time slice, maxima refined by a parabola (`peak`), the
frequency of $c_L$ from its mean crossings (`oscillation`; None when $c_L$ does not
oscillate), so St is read off the lift, not off the coefficient (both are reported).

Measured (``configs/ns_cylinder_dfg2.yaml``, docs/benchmarks.md): no shedding after 4500 Adam
steps on a CPU or 106 000 on a TPU: the steady wake, the anchor met locally, the frequency
drifting down. The option ``oscillation`` asks for the oscillation over a wake region instead.

**From sparse probes** (`dfg_assimilation`): the same unknown fitted to velocity samples
$(t, x, y, u, v)$, times mapped to the phase with the data's frequency (`time_to_phase`,
`probe_frequency`), no anchor; field errors against a reference table (`field_errors`).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Float

from ..geometry.domains import SpaceTime
from ..physics.flow import continuity_residual, momentum_residual
from ..physics.limit_cycle import oscillation_terms
from ..physics.observations import DataError, load_observations
from ..physics.problem import Problem
from ..physics.terms import Equation, Observation, PointEquation
from .dfg import (
    BACK,
    CENTER,
    FRONT,
    HEIGHT,
    LENGTH,
    RADIUS,
    boundary_terms,
    channel_domain,
    circle_force,
    no_slip,
    parabolic_inflow,
    volume_force,
)

DFG2_BANDS = {"c_D_max": (3.22, 3.24), "c_L_max": (0.99, 1.01), "St": (0.295, 0.305),
              "delta_p": (2.46, 2.50)}
"""DFG 2D-2 acceptance intervals (Schäfer & Turek 1996), for U_max = 1.5, ν = 1e-3."""

MIN_LIFT_AMPLITUDE = 0.01
"""Below this half peak-to-peak $c_L$ (1 % of the benchmark's) the lift is called steady."""

_COPIES = 8  # the anchor point repeated: its count divides any device count up to 8


# ------------------------------------------------------------------ signal analysis


def peak(t: Float[np.ndarray, " n"], y: Float[np.ndarray, " n"]) -> tuple[float, float]:
    r"""``(t*, y*)``: the largest interior sample of ``y`` refined by the parabola through it
    and its two neighbours (uniform ``t``): $\delta = \frac{y_{-} - y_{+}}{2(y_{-} - 2y_0 + y_{+})}$
    samples, $y^* = y_0 - \frac14(y_- - y_+)\delta$. For a sinusoid sampled $n$ times per
    period the error is $O((2\pi/n)^4)$ of its amplitude (the raw sample's is $O(n^{-2})$)."""
    t, y = np.asarray(t, np.float64), np.asarray(y, np.float64)
    i = int(np.argmax(y[1:-1])) + 1
    ym, y0, yp = y[i - 1], y[i], y[i + 1]
    curv = ym - 2 * y0 + yp
    if not curv < 0:  # flat or a kink: the sample itself
        return float(t[i]), float(y0)
    delta = 0.5 * (ym - yp) / curv
    return float(t[i] + delta * (t[1] - t[0])), float(y0 - 0.25 * (ym - yp) * delta)


def oscillation(t: Float[np.ndarray, " n"], y: Float[np.ndarray, " n"],
                min_amplitude: float = MIN_LIFT_AMPLITUDE) -> dict:
    r"""The frequency of a sampled signal from its upward crossings of its mean.

    A crossing counts once the signal has been below mean $- h$ since the last one
    ($h$ = half the amplitude: hysteresis against wiggles and harmonics); its time is the
    linear interpolation between the two samples. $f = (k - 1)/(t_k - t_1)$ over the $k$
    crossings. Sampled at a fixed number of points per period of a periodic signal, every
    crossing sees the same samples, so the interpolation errors cancel and $f$ is exact to
    rounding; otherwise the error is that of the interpolated crossing, $O((2\pi f\Delta t)^3)$.

    **Returns:** ``{"frequency" (Hz or None), "amplitude" (half peak-to-peak), "mean",
    "crossings" (their times), "note"}``; None with a note when the amplitude is below
    ``min_amplitude`` or fewer than two crossings are seen.
    """
    t, y = np.asarray(t, np.float64), np.asarray(y, np.float64)
    mean, amp = float(y.mean()), float(0.5 * (y.max() - y.min()))
    out = {"frequency": None, "amplitude": amp, "mean": mean, "crossings": [], "note": None}
    if not amp >= min_amplitude:
        out["note"] = f"no oscillation: half peak-to-peak {amp:.3g} < {min_amplitude:g}"
        return out
    armed, crossings = bool(y[0] < mean), []
    for i in range(1, len(y)):
        if y[i] < mean - 0.5 * amp:
            armed = True
        elif armed and y[i - 1] < mean <= y[i]:
            crossings.append(t[i - 1] + (mean - y[i - 1]) / (y[i] - y[i - 1]) * (t[i] - t[i - 1]))
            armed = False
    out["crossings"] = [float(c) for c in crossings]
    if len(crossings) < 2:
        out["note"] = f"no period: {len(crossings)} upward crossing(s) of the mean in the samples"
        return out
    out["frequency"] = (len(crossings) - 1) / (crossings[-1] - crossings[0])
    return out


# ------------------------------------------------------------------ forces over a period


def _rows(fn, points, rows: int) -> np.ndarray:
    """``fn(points)`` with the points padded to a multiple of ``rows`` (the last one repeated):
    every call has one shape, so the network is compiled once per kind of evaluation."""
    points = np.asarray(points, np.float64)
    pad = (-points.shape[0]) % rows
    full = np.concatenate([points, np.repeat(points[-1:], pad, axis=0)]) if pad else points
    return np.asarray(fn(full), np.float64)[: points.shape[0]]


class TimeSlice:
    r"""A space-time `pinnkit.run.metrics.Predictor` (points ``(t, x, y)``, ``t`` the phase)
    seen at one phase ``s``: ``slice(points (n, 2)) -> (n, 3)``, ``slice.jacobian(points)
    -> (n, 3, 2)`` (spatial), ``slice.dudt(points) -> (n, 2)``, $\partial_t(u, v) = f\,
    \partial_s(u, v)$ in 1/s at the frequency ``frequency``: what `circle_force` and
    `volume_force` read. Calls are padded to multiples of ``rows`` points."""

    def __init__(self, predict, s: float, frequency: float, rows: int = 2048):
        self.predict, self.s, self.frequency, self.rows = predict, float(s), float(frequency), rows

    def _at(self, points):
        points = np.asarray(points, np.float64)
        return np.concatenate([np.full((points.shape[0], 1), self.s), points], axis=1)

    def __call__(self, points):
        return _rows(self.predict, self._at(points), self.rows)

    def jacobian(self, points):
        return _rows(self.predict.jacobian, self._at(points), self.rows)[:, :, 1:]

    def dudt(self, points):
        return self.frequency * _rows(self.predict.jacobian, self._at(points), self.rows)[:, :2, 0]


def _band(value, name: str) -> dict:
    lo, hi = DFG2_BANDS[name]
    return {"value": value, "band": [lo, hi], "met": None if value is None else bool(lo <= value <= hi)}


def shedding_quantities(predict, nu: float, u_mean: float, frequency: float, probe=(0.5, 0.2),
                        amplitude: float = 0.1, samples: int = 48, n: int = 128) -> dict:
    r"""The DFG 2D-2 figures of a phase network (module docstring).

    **Arguments:**
    - `predict`: a `pinnkit.run.metrics.Predictor` of points ``(s, x, y)``.
    - `nu`, `u_mean`: viscosity (m²/s) and mean inflow $\bar U$ (m/s): $c = 2F/(\bar U^2 D)$.
    - `frequency`: $f$ (Hz), the trained coefficient: time $t = s/f$.
    - `probe`, `amplitude`: the anchor's point and floor (reported: $v$, $\partial_s v$ there).
    - `samples`: phases per period; the series cover two periods, ``2 samples + 1`` slices.
    - `n`: angles of the surface rule, and of the volume rule (16 Gauss radii).

    **Returns:** the series ``t`` (s), ``c_D``, ``c_L`` (surface), ``c_D_volume``,
    ``c_L_volume``; ``c_D_max``, ``c_L_max`` (and ``_volume``), ``frequency_lift`` (Hz, from
    $c_L$, or None), ``St``, ``St_coefficient`` ($D f/\bar U$ of the coefficient),
    ``delta_p`` at $t_0 + 1/(2f)$ (or None), ``bands`` (value, band, met), ``anchor``,
    ``periodic_defect`` ($\max|y(0) - y(1)|$ at three points: 0 for a periodic network)
    and ``note``.
    """
    scale = 2.0 / (u_mean**2 * 2 * RADIUS)
    phases = np.arange(2 * samples + 1) / samples
    rows = 16 * n  # the volume rule's size: one shape for every evaluation below
    surf, vol = [], []
    for s in phases:
        sl = TimeSlice(predict, s, frequency, rows)
        surf.append(circle_force(sl, nu, n=n) * scale)
        vol.append(volume_force(sl, nu, n_r=16, n_theta=n, dudt=sl.dudt) * scale)
    surf, vol = np.asarray(surf), np.asarray(vol)
    t = phases / frequency
    out = {"t": t.tolist(), "c_D": surf[:, 0].tolist(), "c_L": surf[:, 1].tolist(),
           "c_D_volume": vol[:, 0].tolist(), "c_L_volume": vol[:, 1].tolist()}
    out["c_D_max"] = peak(t, surf[:, 0])[1]
    out["c_D_volume_max"] = peak(t, vol[:, 0])[1]
    t0, out["c_L_max"] = peak(t, surf[:, 1])
    out["c_L_volume_max"] = peak(t, vol[:, 1])[1]
    lift = oscillation(t, surf[:, 1])
    f_lift = lift["frequency"]
    out["frequency_lift"] = f_lift
    out["St"] = None if f_lift is None else f_lift * 2 * RADIUS / u_mean
    f_vol = oscillation(t, vol[:, 1])["frequency"]
    out["St_volume"] = None if f_vol is None else f_vol * 2 * RADIUS / u_mean
    out["frequency_coefficient"] = float(frequency)
    out["St_coefficient"] = float(frequency) * 2 * RADIUS / u_mean
    out["lift_amplitude"] = lift["amplitude"]
    out["t0"] = t0
    if f_lift is None:
        out["delta_p"] = None
        out["note"] = f"c_L: {lift['note']}; St and delta_p need a shedding frequency"
    else:
        s_half = frequency * (t0 + 0.5 / f_lift)  # the phase of t0 + 1/(2f)
        p = _rows(predict, [[s_half, *FRONT], [s_half, *BACK]], rows)[:, 2]
        out["delta_p"] = float(p[0] - p[1])
        out["note"] = None
    out["bands"] = {k: _band(out[k], k) for k in DFG2_BANDS}
    at_probe = [[0.0, *probe]]
    v = float(_rows(predict, at_probe, rows)[0, 1])
    dv_ds = float(_rows(predict.jacobian, at_probe, rows)[0, 1, 0])
    floor = 2 * math.pi * amplitude
    out["anchor"] = {"v": v, "dv_ds": dv_ds, "floor": floor, "active": bool(dv_ds < floor)}
    ends = np.asarray([[s, *x] for s in (0.0, 1.0) for x in (probe, FRONT, BACK)])
    y = _rows(predict, ends, rows)
    out["periodic_defect"] = float(np.max(np.abs(y[:3] - y[3:])))
    return out


# ------------------------------------------------------------------ problem


def _check(U_max, nu, St0, St_range, probe, amplitude, samples) -> None:
    """Raises ValueError naming the first parameter out of range and the fix."""
    for name, pair in (("St_range", St_range), ("probe", probe)):
        if len(pair) != 2:
            raise ValueError(f"{name}={list(pair)} must be two numbers, e.g. "
                             f"{[0.1, 0.5] if name == 'St_range' else [0.5, 0.2]}")
    lo, hi = (float(v) for v in St_range)
    if not (math.isfinite(U_max) and U_max > 0):
        raise ValueError(f"U_max={U_max} must be a positive inflow centre-line velocity (m/s); "
                         "DFG 2D-2 has 1.5")
    if not (math.isfinite(nu) and nu > 0):
        raise ValueError(f"nu={nu} must be a positive kinematic viscosity (m²/s); DFG 2D-2 has 1e-3")
    if not 0 < lo < hi:
        raise ValueError(f"St_range={list(St_range)} must be two Strouhal numbers 0 < low < high, "
                         "e.g. [0.1, 0.5]")
    if not lo < St0 < hi:
        raise ValueError(f"St0={St0} must lie strictly inside St_range={[lo, hi]}: choose St0 "
                         "inside it or widen St_range")
    px, py = probe
    if not (CENTER[0] + RADIUS < px < LENGTH and 0 < py < HEIGHT):
        raise ValueError(f"probe={list(probe)} must be a point of the fluid downstream of the "
                         f"cylinder: {CENTER[0] + RADIUS} < x < {LENGTH}, 0 < y < {HEIGHT}, e.g. [0.5, 0.2]")
    if not (math.isfinite(amplitude) and amplitude >= 0):
        raise ValueError(f"amplitude={amplitude} must be >= 0 (m/s): the anchor's floor on the "
                         "probe's cross-flow amplitude; 0 admits the steady flow")
    if int(samples) != samples or samples < 4:
        raise ValueError(f"samples={samples} must be an integer >= 4 (phases per period in the "
                         "figures); 48 resolves c_L to 1e-5")


def _phase_flow(U_max: float, extra: dict) -> tuple:
    r"""``(domain, inflow, terms)`` of the periodic channel flow in the phase: the space-time
    domain, the parabolic inflow and the terms ``momentum`` ($f\,\partial_s\mathbf u$ plus
    the steady part), ``continuity``, the ``extra`` terms, ``outlet``, ``inlet``, ``walls``,
    ``cylinder``."""
    domain = SpaceTime(channel_domain(), 0.0, 1.0)
    inflow = parabolic_inflow(U_max, y_axis=2)

    def momentum(f, c):  # f ∂u/∂s plus the steady part
        rate = jnp.stack([f.partial("u", "t"), f.partial("v", "t")])
        return momentum_residual(f, c) + c["frequency"] * rate

    terms = {"momentum": Equation(momentum), "continuity": Equation(continuity_residual),
             **extra, **boundary_terms(inflow)}
    return domain, inflow, terms


def dfg_shedding(U_max: float = 1.5, nu: float = 1e-3, St0: float = 0.2,
                 St_range: tuple[float, float] = (0.1, 0.5), probe: tuple[float, float] = (0.5, 0.2),
                 amplitude: float = 0.1, samples: int = 48, oscillation: float = 0.0,
                 oscillation_box=((0.4, 1.2), (0.1, 0.3)), oscillation_points: int = 256) -> Problem:
    r"""DFG benchmark 2D-2 as one period of the limit cycle (module docstring): fields
    ``u, v, p`` of ``(t, x, y)`` with ``t`` the phase in $[0, 1]$; terms ``momentum``,
    ``continuity``, ``outlet``, ``anchor`` and the Dirichlet terms ``inlet``, ``walls``,
    ``cylinder``; coefficients ``nu`` and the trainable ``frequency``.

    **Arguments:**
    - `U_max`: inflow centre-line velocity (m/s; 1.5: $\bar U = 1$, Re = 100).
    - `nu`: kinematic viscosity (m²/s).
    - `St0`: the initial frequency as a Strouhal number, $f_0 = St_0\bar U/D$ (0.2, the
      textbook value for a cylinder, not the benchmark's 0.3).
    - `St_range`: the frequency's bounds as Strouhal numbers (its ``bounded`` transform).
    - `probe`: the anchor's point $x_p$ (m), in the wake.
    - `amplitude`: the anchor's floor $a$ (m/s) on the probe's cross-flow velocity.
    - `samples`: phases per period of the figures (`shedding_quantities`).
    - `oscillation`: if > 0, a term ``oscillation`` (`pinnkit.physics.limit_cycle`): $v$'s phase
      std at least this (m/s) at `oscillation_points` points of `oscillation_box` ``[[x0, x1], [y0, y1]]``.

    Needs ``network.periodic: {t: 1}`` (`Problem.periodic`: the builder refuses a config
    without it); ``summary.json`` gets ``metrics`` with the
    figures against `DFG2_BANDS` (which hold for the default U_max and nu).
    """
    U_max, nu, St0, amplitude = float(U_max), float(nu), float(St0), float(amplitude)
    St_range, probe = (tuple(float(v) for v in np.ravel(a)) for a in (St_range, probe))
    _check(U_max, nu, St0, St_range, probe, amplitude, samples)
    u_mean = 2 * U_max / 3
    to_hz = u_mean / (2 * RADIUS)
    floor = 2 * math.pi * amplitude

    def anchor(f, c):  # phase v = 0, and v rising at least like a sinusoid of amplitude a
        return jnp.stack([f["v"], jnp.maximum(floor - f.partial("v", "t"), 0.0)])

    domain, inflow, terms = _phase_flow(U_max, {
        "anchor": PointEquation(anchor, np.repeat([[0.0, *probe]], _COPIES, axis=0)),
        **oscillation_terms(oscillation, oscillation_box, oscillation_points)})
    lo, hi = (float(v) * to_hz for v in St_range)
    return Problem(
        domain, ("u", "v", "p"), terms, coeffs={"nu": nu, "frequency": St0 * to_hz},
        trainable=("frequency",), coeff_transforms={"frequency": ("bounded", lo, hi)},
        hard_constraint=no_slip(domain, inflow), enforced=("inlet", "walls", "cylinder"),
        metrics=lambda predict: shedding_quantities(
            predict, nu, u_mean, predict.coeffs["frequency"], probe, amplitude, int(samples)),
        periodic={"t": 1.0},
        name="dfg_shedding",
        description=f"DFG 2D-2 vortex shedding over one period (t: phase), Re = {u_mean * 2 * RADIUS / nu:g}",
    )


# ------------------------------------------------------------------ data assimilation


def time_to_phase(t, frequency: float, t_ref: float) -> np.ndarray:
    r"""The phase $s = ((t - t_{ref})\,f) \bmod 1 \in [0, 1)$ of times ``t`` (s) of a flow
    periodic with frequency ``frequency`` (Hz): the coordinate ``t`` of the phase problems."""
    return np.mod((np.asarray(t, np.float64) - float(t_ref)) * float(frequency), 1.0)


def probe_frequency(points, values, path="observation data") -> float:
    r"""The frequency (Hz) of periodic velocity samples: rows ``(t, x, y)`` with ``(u, v)``,
    grouped by probe $(x, y)$; per probe the frequency of $v$ over time (`oscillation`,
    mean crossings: it needs somewhat more than one period of samples), then the median
    over the probes that oscillate. Raises `pinnkit.physics.observations.DataError` (naming
    ``path``) when no probe shows two upward crossings."""
    pts, vals = np.asarray(points, np.float64), np.asarray(values, np.float64)
    keys, inverse = np.unique(np.round(pts[:, 1:], 9), axis=0, return_inverse=True)
    found = []
    for k in range(len(keys)):
        rows = np.flatnonzero(inverse.ravel() == k)
        rows = rows[np.argsort(pts[rows, 0])]
        if len(rows) >= 4:
            f = oscillation(pts[rows, 0], vals[rows, 1], min_amplitude=1e-6)["frequency"]
            if f is not None:
                found.append(f)
    if not found:
        raise DataError(
            f"{path}: no probe's cross-flow velocity v shows a period (two upward crossings of "
            f"its mean) over the times given ({len(keys)} probe(s)); sample more than one period "
            "at each probe, or give the frequency: problem.params.frequency (Hz)")
    return float(np.median(found))


def _file_param(spec, name: str) -> str:
    """A file parameter: a path, or ``{file: PATH}`` (found relative to the config file)."""
    if isinstance(spec, dict) and isinstance(spec.get("file"), str):
        return spec["file"]
    if isinstance(spec, str | bytes) or hasattr(spec, "__fspath__"):
        return str(spec)
    raise ValueError(f"{name}={spec!r} must be a file path or {{file: PATH}} (an observation table: "
                     ".csv, .npz or .nc)")


def _phase_table(path, fields, frequency, t_ref, what: str):
    """``(points (n, 3) as (s, x, y), values (n, len(fields)), t_ref, frequency)`` of a table
    with columns ``t, x, y`` and ``fields``; ``frequency``/``t_ref`` None: from the data
    (`probe_frequency`, the earliest time). Points off the fluid raise `DataError`."""
    obs = load_observations(path, list(fields), coords={"t": "t", "x": "x", "y": "y"})
    pts, vals = np.asarray(obs.points, np.float64), np.asarray(obs.values, np.float64)
    with jax.enable_x64(True):
        inside = np.asarray(jax.vmap(channel_domain().contains)(jnp.asarray(pts[:, 1:], jnp.float64)))
    if not inside.all():
        i = int(np.argmin(inside))
        raise DataError(f"{what} {str(path)!r}: {int((~inside).sum())} point(s) lie outside the "
                        f"channel's fluid; first at row {i}: x={pts[i, 1]:g}, y={pts[i, 2]:g} "
                        f"(the channel is [0, {LENGTH}] x [0, {HEIGHT}] less the cylinder)")
    if frequency is None:
        frequency = probe_frequency(pts, vals, f"{what} {str(path)!r}")
    t_ref = float(pts[:, 0].min()) if t_ref is None else float(t_ref)
    return np.concatenate([time_to_phase(pts[:, :1], frequency, t_ref), pts[:, 1:]], axis=1), vals, \
        t_ref, float(frequency)


def field_errors(predict, points, values, rows: int = 2048) -> dict:
    r"""Relative $L^2$ errors of a phase network against a field table: ``u``, ``v``,
    ``uv`` (the velocity vector, $\|\mathbf u - \mathbf u_{ref}\| / \|\mathbf u_{ref}\|$) and,
    with a third column, ``p`` gauge-consistent (each phase's mean over its points taken
    from both); ``phases``: how many distinct phases the table has."""
    pred = _rows(predict, points, rows)
    ref = np.asarray(values, np.float64)
    d = pred[:, :2] - ref[:, :2]
    out = {"u": float(np.linalg.norm(d[:, 0]) / np.linalg.norm(ref[:, 0])),
           "v": float(np.linalg.norm(d[:, 1]) / np.linalg.norm(ref[:, 1])),
           "uv": float(np.linalg.norm(d) / np.linalg.norm(ref[:, :2]))}
    phases, which = np.unique(np.round(points[:, 0], 9), return_inverse=True)
    if ref.shape[1] > 2:
        dp, rp = pred[:, 2].copy(), ref[:, 2].copy()
        for k in range(len(phases)):
            m = which.ravel() == k
            dp[m] -= dp[m].mean()
            rp[m] -= rp[m].mean()
        out["p"] = float(np.linalg.norm(dp - rp) / np.linalg.norm(rp))
    out["phases"] = len(phases)
    return out


def dfg_assimilation(data, reference=None, U_max: float = 1.5, nu: float = 1e-3,
                     frequency: float | None = None, t_ref: float | None = None,
                     reference_figures: dict | None = None, samples: int = 48) -> Problem:
    r"""DFG 2D-2 reconstructed from sparse velocity probes (hidden fluid mechanics): the
    phase formulation of `dfg_shedding` (``t`` the phase over one period, the network
    periodic in it, ``momentum``, ``continuity``, ``outlet`` and the Dirichlet terms) with
    the term ``data``, the measured $(u, v)$ at points $(t, x, y)$ in seconds mapped to the
    phase $s = ((t - t_{ref})f) \bmod 1$ (`time_to_phase`). Pressure, forces and the rest
    of the field are inferred. The data fix the phase and break the up-down symmetry, so
    there is no ``anchor``; the frequency is the data's and held fixed (a trained one
    would move the data's phases).

    **Arguments:**
    - `data`: observation table (a path, or ``{file: PATH}`` relative to the config file),
      columns ``t`` (s), ``x``, ``y`` (m), ``u``, ``v`` (m/s); ``scripts/dfg2_probes.py``
      writes one from the finite-element solution.
    - `reference`: optional field table, columns ``t, x, y, u, v, p``, at a few times of
      one period: ``summary.json`` ``metrics.field`` gets the relative $L^2$ errors
      (`field_errors`), mapped to the phase like the data.
    - `U_max`, `nu`: as `dfg_shedding`.
    - `frequency` (Hz): the shedding frequency; None: from the data (`probe_frequency`).
    - `t_ref` (s): the time of phase 0; None: the data's earliest time.
    - `reference_figures`: optional ``{St, c_D_max, c_L_max}`` of the data's source (the
      FEM's, printed by the script): ``metrics.relative_to_reference`` gets the relative
      differences of the trained network's figures.
    - `samples`: phases per period of the figures (`shedding_quantities`).
    - `oscillation`: if > 0, a term ``oscillation`` (`pinnkit.physics.limit_cycle`): $v$'s phase
      std at least this (m/s) at `oscillation_points` points of `oscillation_box` ``[[x0, x1], [y0, y1]]``.

    ``metrics`` also has ``data_misfit``: the relative $L^2$ misfit of $(u, v)$ at the data
    points.
    """
    U_max, nu = float(U_max), float(nu)
    _check(U_max, nu, 0.3, (0.1, 0.5), (0.5, 0.2), 0.0, samples)
    if frequency is not None and not (math.isfinite(float(frequency)) and float(frequency) > 0):
        raise ValueError(f"frequency={frequency} must be a positive frequency (Hz), or null to "
                         "take it from the data")
    path = _file_param(data, "data")
    pts, vals, t_ref, f = _phase_table(path, ("u", "v"), frequency, t_ref, "observation file")
    ref = None
    if reference is not None:
        rpath = _file_param(reference, "reference")
        ref = _phase_table(rpath, ("u", "v", "p"), f, t_ref, "reference file")[:2]
    figures = dict(reference_figures or {})
    unknown = set(figures) - {"St", "c_D_max", "c_L_max"}
    if unknown:
        raise ValueError(f"reference_figures has {sorted(unknown)}: it takes St, c_D_max, c_L_max")
    u_mean = 2 * U_max / 3
    domain, inflow, terms = _phase_flow(U_max, {"data": Observation(pts, vals, ("u", "v"))})

    def metrics(predict):
        out = shedding_quantities(predict, nu, u_mean, f, samples=int(samples))
        out.pop("anchor")
        out["data_misfit"] = field_errors(predict, pts, vals)["uv"]
        if ref is not None:
            out["field"] = field_errors(predict, *ref)
        out["relative_to_reference"] = {
            k: None if out[k] is None else float(out[k] / float(v) - 1) for k, v in figures.items()}
        out["frequency_data"], out["t_ref"] = f, t_ref
        return out

    return Problem(
        domain, ("u", "v", "p"), terms, coeffs={"nu": nu, "frequency": f},
        hard_constraint=no_slip(domain, inflow), enforced=("inlet", "walls", "cylinder"),
        metrics=metrics, periodic={"t": 1.0}, name="dfg_assimilation",
        description=f"DFG 2D-2 over one period (t: phase) from {len(pts)} velocity samples, "
                    f"f = {f:.4g} Hz from the data",
    )
