r"""Pseudo-spectral reference solver for 2-D incompressible Navier–Stokes on a periodic box.

Vorticity form on $[0, L)^2$ (density 1, so "pressure" is kinematic pressure):

$$\omega_t + \mathbf{u}\cdot\nabla\omega = \nu\,\Delta\omega - \alpha\,\omega + f,
\qquad -\Delta\psi = \omega,\qquad \mathbf{u} = (u, v) = (\psi_y, -\psi_x).$$

**Method.** Fourier in both directions; the advection term is evaluated in physical space
with the 2/3 rule (every mode with $|k_x|$ or $|k_y|$ above $K = \lfloor (n-1)/3 \rfloor$
is zeroed in both factors and in the product, so the quadratic term is alias-free). The
linear term $-(\nu|k|^2 + \alpha)\hat\omega$ is removed exactly by an integrating factor
and what remains, the advection, is non-stiff and integrated by `diffrax.Tsit5`
(explicit 5(4) Runge–Kutta) with a PID step-size controller. Why this combination:
the integrating factor makes the solver exact for any purely viscous decay (Taylor–Green
is reproduced to round-off for any $\nu$), removes the $\Delta t \lesssim 1/(\nu k^2)$
limit, and the remaining CFL-type limit $\Delta t \lesssim 1/(|u| k_{\max})$ is exactly what
an adaptive explicit method handles well; implicit diffrax solvers would need a dense
Jacobian of size $(2n^2)^2$.

The integrating factor $e^{\lambda (t - t_0)}$ is reset at the start of every output
interval and of every sub-interval short enough that $\lambda_{\max}(t - t_0) \le 30$, so
it never overflows (even in float32). The step-size controller measures the error of
$\hat\omega$ itself, not of the integration variable $e^{\lambda(t - t_0)}\hat\omega$, in
which round-off in negligible modes is amplified by up to $e^{30}$ and would be chased.

**Conventions.** Fields are arrays of shape `(n, n)` indexed `[i, j]` ↔ $(x_i, y_j)$ with
$x_i = iL/n$ (``indexing="ij"``). All functions work in float32 or float64 and keep the
input dtype; a reference solution to ~1e-10 needs float64 (enable x64 in the caller, e.g.
``with jax.enable_x64(True): ...``).
"""

from __future__ import annotations

import math

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

_TWO_PI = 2.0 * math.pi

# Largest exponent of the integrating factor within one segment: e^30 ~ 1e13 cannot
# overflow even in float32.
_MAX_IF_EXPONENT = 30.0


class KolmogorovForcing(eqx.Module):
    r"""Kolmogorov forcing with optional linear drag.

    Body force $\mathbf{F} = (A \sin(k_f y), 0) - \alpha\,\mathbf{u}$ with
    $k_f = 2\pi m / L$, i.e. in vorticity form
    $f = -A k_f \cos(k_f y)$ plus the damping $-\alpha\omega$.

    **Arguments:**

    - `amplitude`: $A$ (units of acceleration, length/time²).
    - `wavenumber`: $m$, the integer number of forcing periods across the box.
    - `drag`: $\alpha \ge 0$ (1/time). Defaults to 0.
    """

    amplitude: float
    wavenumber: int
    drag: float = 0.0

    def vorticity_forcing(self, y: Float[Array, "n n"], L: float) -> Float[Array, "n n"]:
        """The vorticity source $f(x, y) = -A k_f \\cos(k_f y)$ on the grid."""
        k = _TWO_PI * self.wavenumber / L
        return -self.amplitude * k * jnp.cos(k * y)


def periodic_grid(n: int, L: float = _TWO_PI, dtype=None) -> tuple[Float[Array, "n n"], Float[Array, "n n"]]:
    r"""The collocation grid $x_i = iL/n$, $y_j = jL/n$, $i, j = 0..n-1$.

    **Arguments:**

    - `n`: points per direction.
    - `L`: box side length. Defaults to $2\pi$.
    - `dtype`: floating dtype; defaults to JAX's default float (float64 under x64).

    **Returns:**

    `(x, y)`, each of shape `(n, n)`, meshed with ``indexing="ij"``.
    """
    s = jnp.arange(n, dtype=dtype if dtype is not None else float) * (L / n)
    return jnp.meshgrid(s, s, indexing="ij")


def _wavenumbers(n: int, L: float, dtype) -> tuple[Array, Array, Array, Array, Array]:
    """`(kx, ky, kx_d, ky_d, k2)` for an rfft2 layout `(n, n//2 + 1)`.

    `kx_d`, `ky_d` are the first-derivative symbols with the Nyquist mode zeroed (its
    derivative is not representable as a real field); `k2` keeps it for the Laplacian.
    """
    m = np.fft.fftfreq(n, 1.0 / n)
    my = np.fft.rfftfreq(n, 1.0 / n)
    scale = _TWO_PI / L
    kx = (scale * m)[:, None]
    ky = (scale * my)[None, :]
    kx_d = np.where(np.abs(m) == n / 2, 0.0, scale * m)[:, None]
    ky_d = np.where(my == n / 2, 0.0, scale * my)[None, :]
    k2 = kx**2 + ky**2
    return tuple(jnp.asarray(a, dtype=dtype) for a in (kx, ky, kx_d, ky_d, k2))


def _dealias_mask(n: int, dtype) -> Float[Array, "n m"]:
    """2/3 rule as a 0/1 array: keep $|m_x|, |m_y| \\le \\lfloor (n-1)/3 \\rfloor$, which
    makes quadratic products alias-free."""
    K = (n - 1) // 3
    mx = np.abs(np.fft.fftfreq(n, 1.0 / n))[:, None]
    my = np.fft.rfftfreq(n, 1.0 / n)[None, :]
    return jnp.asarray((mx <= K) & (my <= K), dtype=dtype)


def _rfft2(a):
    # "forward" normalisation: coefficients are mode amplitudes, independent of n.
    return jnp.fft.rfft2(a, norm="forward")


def _irfft2(a, n):
    return jnp.fft.irfft2(a, s=(n, n), norm="forward")


def _velocity_hat(omega_hat, kx_d, ky_d, k2):
    psi_hat = jnp.where(k2 == 0, 0, omega_hat / jnp.where(k2 == 0, 1, k2))
    return 1j * ky_d * psi_hat, -1j * kx_d * psi_hat


@eqx.filter_jit
def velocity_from_vorticity(
    omega: Float[Array, "n n"], L: float = _TWO_PI
) -> tuple[Float[Array, "n n"], Float[Array, "n n"]]:
    r"""Velocity from vorticity through the stream function.

    Solves $-\Delta\psi = \omega$ spectrally (the mean of $\psi$ is set to 0; the mean
    of $\omega$ is ignored, as it must vanish on a torus) and returns
    $u = \psi_y$, $v = -\psi_x$.

    **Arguments:**

    - `omega`: vorticity on the grid of `periodic_grid(n, L)`, shape `(n, n)`, 1/time.
    - `L`: box side length. Defaults to $2\pi$.

    **Returns:**

    `(u, v)`, each `(n, n)`, length/time; divergence-free to round-off, zero mean.
    """
    n = omega.shape[-1]
    _, _, kx_d, ky_d, k2 = _wavenumbers(n, L, omega.dtype)
    u_hat, v_hat = _velocity_hat(_rfft2(omega), kx_d, ky_d, k2)
    return _irfft2(u_hat, n), _irfft2(v_hat, n)


@eqx.filter_jit
def vorticity_from_velocity(
    u: Float[Array, "n n"], v: Float[Array, "n n"], L: float = _TWO_PI
) -> Float[Array, "n n"]:
    r"""Vorticity $\omega = v_x - u_y$, differentiated spectrally.

    **Arguments:**

    - `u`, `v`: velocity components on the grid of `periodic_grid(n, L)`, shape `(n, n)`.
    - `L`: box side length. Defaults to $2\pi$.

    **Returns:**

    $\omega$, shape `(n, n)`.
    """
    n = u.shape[-1]
    _, _, kx_d, ky_d, _ = _wavenumbers(n, L, u.dtype)
    return _irfft2(1j * kx_d * _rfft2(v) - 1j * ky_d * _rfft2(u), n)


@eqx.filter_jit
def pressure_from_velocity(
    u: Float[Array, "n n"], v: Float[Array, "n n"], L: float = _TWO_PI
) -> Float[Array, "n n"]:
    r"""Pressure from the pressure Poisson equation, zero mean.

    $$\Delta p = -\nabla\cdot(\mathbf{u}\cdot\nabla\mathbf{u})
    = -\partial_i\partial_j(u_i u_j)
    \quad\Longrightarrow\quad
    \hat p = -\frac{k_i k_j \widehat{u_i u_j}}{|k|^2},$$

    using $\nabla\cdot\mathbf{u} = 0$. The products are formed with the same 2/3-rule
    dealiasing as the solver.

    **Arguments:**

    - `u`, `v`: divergence-free velocity on the grid, shape `(n, n)`, length/time.
    - `L`: box side length. Defaults to $2\pi$.

    **Returns:**

    $p$ (kinematic, length²/time²), shape `(n, n)`, with zero mean.
    """
    n = u.shape[-1]
    _, _, kx_d, ky_d, k2 = _wavenumbers(n, L, u.dtype)
    mask = _dealias_mask(n, u.dtype)
    u_f = _irfft2(mask * _rfft2(u), n)
    v_f = _irfft2(mask * _rfft2(v), n)
    uu, uv, vv = (mask * _rfft2(a) for a in (u_f * u_f, u_f * v_f, v_f * v_f))
    rhs = kx_d**2 * uu + 2 * kx_d * ky_d * uv + ky_d**2 * vv
    p_hat = jnp.where(k2 == 0, 0, -rhs / jnp.where(k2 == 0, 1, k2))
    return _irfft2(p_hat, n)


@eqx.filter_jit
def primitive_from_vorticity(
    omega: Float[Array, "n n"], L: float = _TWO_PI
) -> tuple[Float[Array, "n n"], Float[Array, "n n"], Float[Array, "n n"]]:
    """`(u, v, p)` on the grid from a vorticity field: `velocity_from_vorticity` then
    `pressure_from_velocity`. Shapes `(n, n)`; see those functions for conventions."""
    u, v = velocity_from_vorticity(omega, L)
    return u, v, pressure_from_velocity(u, v, L)


def _advection_hat(omega_hat, kx_d, ky_d, k2, mask, n):
    """Dealiased $-\\widehat{\\mathbf{u}\\cdot\\nabla\\omega}$."""
    omega_hat = mask * omega_hat
    u_hat, v_hat = _velocity_hat(omega_hat, kx_d, ky_d, k2)
    u, v = _irfft2(u_hat, n), _irfft2(v_hat, n)
    wx, wy = _irfft2(1j * kx_d * omega_hat, n), _irfft2(1j * ky_d * omega_hat, n)
    return -mask * _rfft2(u * wx + v * wy)


def _to_real(z):
    return jnp.stack([z.real, z.imag])


def _to_complex(r):
    return r[0] + 1j * r[1]


class _IntegratingFactorPID(diffrax.AbstractAdaptiveStepSizeController):
    r"""A PID controller that judges the error of $\hat\omega = e^{-\lambda s} w$, the
    variable we care about, rather than of the integration variable $w$, where modes at
    round-off level are amplified by up to $e^{\lambda s}$ and would make the controller
    chase noise."""

    pid: diffrax.PIDController
    lam: Array  # decay rates, shape (1, n, n//2 + 1) to match the (re, im) state

    @property
    def rtol(self):
        return self.pid.rtol

    @property
    def atol(self):
        return self.pid.atol

    @property
    def norm(self):
        return self.pid.norm

    def wrap(self, direction):
        return self

    def init(self, terms, t0, t1, y0, dt0, args, func, error_order):
        # Initial step selection happens at s = 0, where w = omega_hat.
        return self.pid.init(terms, t0, t1, y0, dt0, args, func, error_order)

    def adapt_step_size(self, t0, t1, y0, y1_candidate, args, y_error, error_order, state):
        back0, back1 = jnp.exp(-self.lam * t0), jnp.exp(-self.lam * t1)
        return self.pid.adapt_step_size(
            t0, t1, back0 * y0, back1 * y1_candidate, args, back1 * y_error, error_order, state
        )


@eqx.filter_jit
def _solve_hat(omega0_hat, t_eval, lam, force_hat, mask, ks, n, n_sub, rtol, atol, max_steps):
    kx_d, ky_d, k2 = ks
    # Modes outside the 2/3 band only decay (their advection term is zero): factor 1 for
    # them avoids inf * 0 = nan if their much larger lambda would overflow.
    lam_if = jnp.where(mask > 0, lam, 0)

    def vector_field(s, w, args):
        # w = e^{lambda s} omega_hat(t0 + s), stored as (re, im) stacked.
        grow = jnp.exp(lam_if * s)
        omega_hat = _to_complex(w) / grow
        return _to_real(grow * (_advection_hat(omega_hat, kx_d, ky_d, k2, mask, n) + force_hat))

    term = diffrax.ODETerm(vector_field)
    controller = _IntegratingFactorPID(diffrax.PIDController(rtol=rtol, atol=atol), lam_if[None])

    def segment(_, carry):
        omega_hat, ok, h = carry
        # throw=False keeps host callbacks out of the compiled program (so it can be cached);
        # failures (max_steps hit) are collected in `ok` and raised by the caller.
        sol = diffrax.diffeqsolve(
            term,
            diffrax.Tsit5(),
            t0=0.0,
            t1=h,
            dt0=None,
            y0=_to_real(omega_hat),
            stepsize_controller=controller,
            saveat=diffrax.SaveAt(t1=True),
            max_steps=max_steps,
            throw=False,
        )
        ok = ok & (sol.result == diffrax.RESULTS.successful)
        return _to_complex(sol.ys[0]) * jnp.exp(-lam * h), ok, h

    def interval(carry, dt):
        omega_hat, ok = carry
        omega_hat, ok, _ = jax.lax.fori_loop(0, n_sub, segment, (omega_hat, ok, dt / n_sub))
        return (omega_hat, ok), omega_hat

    (_, ok), out = jax.lax.scan(interval, (omega0_hat, jnp.array(True)), jnp.diff(t_eval))
    return jnp.concatenate([omega0_hat[None], out]), ok


def solve_vorticity(
    omega0: Float[Array, "n n"],
    nu: float,
    t_eval: ArrayLike,
    L: float = _TWO_PI,
    forcing: KolmogorovForcing | None = None,
    rtol: float = 1e-8,
    atol: float = 1e-10,
    max_steps: int = 16384,
) -> Float[Array, "nt n n"]:
    r"""Integrates $\omega_t + \mathbf{u}\cdot\nabla\omega = \nu\Delta\omega + f$ on the
    periodic box $[0, L)^2$ (see the module docstring for the method).

    Float64 is needed for tolerances below ~1e-6 (enable x64 in the caller); the result
    has the dtype of `omega0`. The integrator restarts at every entry of `t_eval` (and
    within long intervals, see the module docstring): closely spaced outputs cost extra
    restarts, never accuracy.

    **Arguments:**

    - `omega0`: initial vorticity at `t_eval[0]` on `periodic_grid(n, L)`, shape `(n, n)`,
        1/time. Modes beyond the 2/3 band are kept but only diffuse.
    - `nu`: kinematic viscosity $\nu \ge 0$, length²/time. Must be a concrete number.
    - `t_eval`: increasing output times, shape `(nt,)`, concrete (it sets the
        integration segments); `t_eval[0]` is the initial time.
    - `L`: box side length. Defaults to $2\pi$.
    - `forcing`: optional `KolmogorovForcing`; its wavenumber must be resolved,
        $|m| \le \lfloor (n-1)/3 \rfloor$. Defaults to `None` (decaying flow).
    - `rtol`, `atol`: tolerances of the PID controller, on the Fourier amplitudes of
        $\omega$ (amplitude normalisation: a mode $a\cos(kx)$ has coefficient $a/2$).
        Defaults 1e-8 and 1e-10.
    - `max_steps`: step limit per segment. Defaults to 16384.

    **Returns:**

    Vorticity snapshots, shape `(nt, n, n)`; entry 0 is `omega0` itself.

    **Raises:**

    `RuntimeError` if a segment needs more than `max_steps` steps.
    """
    n = omega0.shape[-1]
    if omega0.shape != (n, n):
        raise ValueError(f"omega0 must be square (n, n); got shape {omega0.shape}")
    t_np = np.asarray(t_eval, dtype=np.float64)
    if t_np.ndim != 1 or t_np.size < 1 or np.any(np.diff(t_np) <= 0):
        raise ValueError("t_eval must be a non-empty, strictly increasing 1-D array")
    dtype = omega0.dtype
    _, _, kx_d, ky_d, k2 = _wavenumbers(n, L, dtype)
    mask = _dealias_mask(n, dtype)
    drag = 0.0 if forcing is None else float(forcing.drag)
    lam = nu * k2 + drag
    K = (n - 1) // 3
    if forcing is not None and not 0 < abs(forcing.wavenumber) <= K:
        raise ValueError(
            f"forcing wavenumber {forcing.wavenumber} must be a non-zero integer of magnitude "
            f"at most {K}, the largest mode the 2/3 rule keeps on an n = {n} grid"
        )
    # Largest retained decay rate fixes how finely each output interval is split.
    lam_max = nu * 2 * (_TWO_PI * K / L) ** 2 + drag
    dt_max = float(np.max(np.diff(t_np))) if t_np.size > 1 else 0.0
    n_sub = max(1, math.ceil(lam_max * dt_max / _MAX_IF_EXPONENT))
    if forcing is None:
        force_hat = jnp.zeros_like(k2, dtype=jnp.result_type(dtype, jnp.complex64))
    else:
        _, y = periodic_grid(n, L, dtype)
        force_hat = mask * _rfft2(forcing.vorticity_forcing(y, L))
    omega_hat, ok = _solve_hat(
        _rfft2(omega0),
        jnp.asarray(t_np, dtype=dtype),
        lam,
        force_hat,
        mask,
        (kx_d, ky_d, k2),
        n,
        n_sub,
        rtol,
        atol,
        max_steps,
    )
    if not bool(ok):
        raise RuntimeError(
            f"solve_vorticity: a segment needed more than max_steps={max_steps} steps; raise "
            "max_steps, loosen rtol/atol, or refine t_eval"
        )
    return _irfft2(omega_hat, n)


def taylor_green(
    x: Float[ArrayLike, "..."], y: Float[ArrayLike, "..."], t: Float[ArrayLike, "..."], nu: float
) -> tuple[Float[Array, "..."], Float[Array, "..."], Float[Array, "..."]]:
    r"""The exact decaying Taylor–Green vortex on $[0, 2\pi)^2$:

    $$u = -\cos x \sin y\, e^{-2\nu t},\quad v = \sin x \cos y\, e^{-2\nu t},\quad
    p = -\tfrac14(\cos 2x + \cos 2y)\, e^{-4\nu t}.$$

    **Arguments:**

    - `x`, `y`, `t`: coordinates, broadcast together.
    - `nu`: kinematic viscosity.

    **Returns:**

    `(u, v, p)`, each of the broadcast shape.
    """
    x, y, t = jnp.asarray(x), jnp.asarray(y), jnp.asarray(t)
    decay = jnp.exp(-2 * nu * t)
    u = -jnp.cos(x) * jnp.sin(y) * decay
    v = jnp.sin(x) * jnp.cos(y) * decay
    p = -0.25 * (jnp.cos(2 * x) + jnp.cos(2 * y)) * decay**2
    return u, v, p


def taylor_green_vorticity(
    x: Float[ArrayLike, "..."], y: Float[ArrayLike, "..."], t: Float[ArrayLike, "..."], nu: float
) -> Float[Array, "..."]:
    r"""Vorticity of `taylor_green`: $\omega = v_x - u_y = 2\cos x\cos y\, e^{-2\nu t}$."""
    x, y, t = jnp.asarray(x), jnp.asarray(y), jnp.asarray(t)
    return 2 * jnp.cos(x) * jnp.cos(y) * jnp.exp(-2 * nu * t)


def _fourier_basis(x, n, L):
    """Rows $e^{i k x}$ of the 1-D trigonometric interpolant; the Nyquist column of an even
    `n` is $\\cos(k_N x)$ so that the interpolant is real and symmetric in $\\pm k_N$."""
    m = np.fft.fftfreq(n, 1.0 / n)
    k = jnp.asarray(_TWO_PI / L * m, dtype=x.dtype)
    basis = jnp.exp(1j * x[:, None] * k[None, :])
    if n % 2 == 0:
        basis = basis.at[:, n // 2].set(jnp.cos(x * k[n // 2]))
    return basis


@eqx.filter_jit
def fourier_interpolate(
    field: Float[Array, "n n"],
    x: Float[ArrayLike, "*shape"],
    y: Float[ArrayLike, "*shape"],
    L: float = _TWO_PI,
    batch_size: int = 4096,
) -> Float[Array, "*shape"]:
    r"""Evaluates the trigonometric interpolant of a grid field at arbitrary points.

    $$f(x, y) = \sum_{k_x, k_y} \hat f_{k_x k_y}\, e^{i(k_x x + k_y y)},$$

    the exact Fourier series the spectral solver represents (the grid values are
    reproduced to round-off; even-$n$ Nyquist modes are taken as cosines). Cost
    $O(n^2)$ per point, done in batches.

    **Arguments:**

    - `field`: values on `periodic_grid(n, L)`, shape `(n, n)`.
    - `x`, `y`: query coordinates (any real values; the series is $L$-periodic), same shape.
    - `L`: box side length. Defaults to $2\pi$.
    - `batch_size`: points evaluated at once (memory ~ `batch_size * n` complex numbers).

    **Returns:**

    Field values at the points, shape of `x`.
    """
    n = field.shape[-1]
    x, y = jnp.broadcast_arrays(jnp.asarray(x, field.dtype), jnp.asarray(y, field.dtype))
    coeffs = jnp.fft.fft2(field, norm="forward")

    def evaluate(xy):
        bx = _fourier_basis(xy[:, 0], n, L)
        by = _fourier_basis(xy[:, 1], n, L)
        return jnp.real(jnp.sum((bx @ coeffs) * by, axis=-1))

    pts = jnp.stack([x.ravel(), y.ravel()], axis=-1)
    # lax.map over chunks of points bounds the memory of the (points, n) basis matrices.
    n_pts = pts.shape[0]
    n_chunks = max(1, -(-n_pts // batch_size))
    pad = n_chunks * batch_size - n_pts
    pts = jnp.pad(pts, ((0, pad), (0, 0))).reshape(n_chunks, batch_size, 2)
    vals = jax.lax.map(evaluate, pts).reshape(-1)[:n_pts]
    return vals.reshape(x.shape)
