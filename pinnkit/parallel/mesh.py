"""The device mesh: always one, with a single ``"data"`` axis over which points are sharded.

One CPU is a mesh of 1; eight GPUs are a mesh of 8; two nodes of four GPUs are a mesh of
8 spanning two processes. Parameters are replicated (``P()``), point arrays sharded
(``P("data")``). Placement goes through `jax.make_array_from_callback`, so in a
multi-process run each process transfers only the rows its own devices hold.

`evaluate_sharded` computes the reference errors with the evaluation grid sharded over
every device of the mesh; only per-field sums cross processes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from .._host import HostFunction
from ..errors import ConfigError
from .distributed import allgather_host, to_host


def make_mesh(n_devices: int = -1) -> Mesh:
    """A 1-D mesh named ``"data"`` over the first ``n_devices`` devices (-1: all).

    In a multi-process run the mesh always spans every device of every process.
    """
    devices = jax.devices()
    n = len(devices) if n_devices == -1 else n_devices
    if jax.process_count() > 1 and n != len(devices):
        raise ConfigError(
            f"mesh.data={n_devices}: a run with {jax.process_count()} processes uses all "
            f"{len(devices)} devices of all processes; set mesh.data: -1 (or {len(devices)})"
        )
    if n < 1 or n > len(devices):
        raise ConfigError(
            f"mesh.data={n_devices}: {len(devices)} {devices[0].platform} device(s) are "
            f"visible; use -1 (all) or a number from 1 to {len(devices)}"
        )
    return Mesh(np.asarray(devices[:n]), ("data",))


def _place(x, sharding: NamedSharding):
    # The exact sharding, not merely an equivalent one: a jitted chunk called with a
    # single-device array and then with its own NamedSharding output would retrace.
    if isinstance(x, jax.Array):
        if x.sharding == sharding:
            return x
        if jax.process_count() == 1:
            return jax.device_put(x, sharding)
    host = to_host(x) if isinstance(x, jax.Array) else np.asarray(x)
    return jax.make_array_from_callback(host.shape, sharding, lambda idx: host[idx])


def replicate(tree, mesh: Mesh):
    """Places every array of ``tree`` on all devices of ``mesh`` (every process must pass
    the same values)."""
    s = NamedSharding(mesh, P())
    return jax.tree_util.tree_map(lambda x: _place(x, s) if eqx.is_array(x) else x, tree)


def shard_rows(tree, mesh: Mesh):
    """Places arrays sharded along their first axis over ``mesh``'s ``"data"`` axis; each
    process transfers only the rows of its own devices."""
    s = NamedSharding(mesh, P("data"))
    return jax.tree_util.tree_map(lambda x: _place(x, s) if eqx.is_array(x) else x, tree)


def is_main_process() -> bool:
    """True on the process that writes files (process 0)."""
    return jax.process_index() == 0


# ------------------------------------------------------------ sharded evaluation


@eqx.filter_jit
def _apply_sharded(fn, points, sharding):
    out = jax.vmap(fn)(points)
    # Keep the output sharded like the points (a replicated output would be counted
    # once per process by the host-side sums below).
    return jax.lax.with_sharding_constraint(out, sharding)


def predict_sharded(fn, points: np.ndarray, mesh: Mesh, batch: int = 16384, dtype=jnp.float32):
    """``vmap(fn)`` over ``points`` ``(n, d)`` with the rows sharded over ``mesh``.

    Rows are processed in global chunks of ``batch`` rows per device (the last chunk
    padded by repeating the last point). **Returns:** ``(rows, values)``: the global row
    indices this process holds and their outputs ``(len(rows), m)``; padding removed.
    A `HostFunction` is evaluated on the host at the same rows, outside JAX.
    """
    n = points.shape[0]
    n_dev = mesh.size
    per_dev = max(1, min(batch, math.ceil(n / n_dev)))
    g = per_dev * n_dev
    padded = math.ceil(n / g) * g
    sharding = NamedSharding(mesh, P("data"))
    if isinstance(fn, HostFunction):
        held = sharding.addressable_devices_indices_map((g, points.shape[1])).values()
        spans = sorted({(i[0].start or 0, g if i[0].stop is None else i[0].stop) for i in held})
        rows = np.concatenate([np.arange(c + a, c + b) for c in range(0, padded, g) for a, b in spans])
        rows = rows[rows < n]
        return rows, fn.host(points[rows], np.dtype(dtype))
    pts = np.concatenate([points, np.repeat(points[-1:], padded - n, axis=0)]) if padded > n else points
    rows, vals = [], []
    for c in range(0, padded, g):
        block = np.asarray(pts[c : c + g], dtype)
        arr = jax.make_array_from_callback(block.shape, sharding, lambda idx, b=block: b[idx])
        out = _apply_sharded(fn, arr, sharding)
        for shard in out.addressable_shards:
            if shard.replica_id != 0:
                continue
            sl = shard.index[0]
            idx = np.arange(c + (sl.start or 0), c + (sl.stop if sl.stop is not None else g))
            keep = idx < n
            rows.append(idx[keep])
            vals.append(np.asarray(shard.data)[keep])
    return np.concatenate(rows), np.concatenate(vals)


ZERO_REFERENCE = 1e-6
"""A reference field whose $L^2$ norm is at most this fraction of the largest field's is
zero to rounding (``v`` of Poiseuille flow from a finite-element solve)."""


def relative_errors(out_names, num, den, n, vectors=()) -> dict[str, float]:
    r"""``{field: e}`` from the squared error sums ``num`` and squared reference sums ``den``
    of each field over ``n`` points: $\sqrt{num/den}$, the relative $L^2$ error, or the
    absolute RMS error $\sqrt{num/n}$ where the reference is zero to rounding (``den`` at
    most `ZERO_REFERENCE`² times the largest ``den``; all zero: every field). Dividing by
    the norm of rounding would report ~1e13 for a good prediction of a vanishing field.
    ``vectors``: ``(name, fields)`` pairs (`Problem.vectors`), each also reported as a whole
    from its fields' sums added."""
    num, den = np.asarray(num, np.float64), np.asarray(den, np.float64)
    # (a non-finite reference keeps $\sqrt{num/den}$: NaN, flagged in summary.json)
    floor = ZERO_REFERENCE**2 * float(np.max(den, initial=0.0, where=np.isfinite(den)))
    with np.errstate(invalid="ignore", divide="ignore"):
        out = {name: float(np.sqrt(num[i] / den[i])) if den[i] > floor and den[i] > 0
               or not np.isfinite(den[i]) else float(np.sqrt(num[i] / max(n, 1)))
               for i, name in enumerate(out_names)}
    for name, parts in vectors:
        idx = [list(out_names).index(f) for f in parts]
        out[name] = relative_errors((name,), [num[idx].sum()], [den[idx].sum()], n)[name]
    return out


def gauge_of(gauge) -> dict[str, str]:
    """``{field: kind}`` from a `Problem.gauge_map` or a sequence of mean-free names."""
    return dict(gauge) if isinstance(gauge, Mapping) else {str(k): "mean" for k in gauge}


def gauge_groups(problem, points: np.ndarray) -> tuple[np.ndarray, int]:
    """``(level, n_levels)``: the index of each evaluation point's time among the grid's
    times, what a ``mean_per_time`` gauge averages over (one level when no field has it).
    Computed from the whole grid, so every process agrees on the levels."""
    if "mean_per_time" not in problem.gauge_map.values():
        return np.zeros(points.shape[0], np.intp), 1
    times, level = np.unique(points[:, problem.domain.coords.index("t")], return_inverse=True)
    return level.ravel().astype(np.intp), int(times.shape[0])


def field_errors_sharded(out_names, gauge, pred: np.ndarray, ref: np.ndarray,
                         groups: tuple[np.ndarray, int] | None = None, vectors=()) -> dict:
    """`metrics.field_errors` from each process's rows: per-field sums in float64 on each
    host, added across processes. Same definitions (relative $L^2$, or RMS where the
    reference is zero to rounding, `relative_errors`; $L^\\infty$), fields with a gauge
    (``{field: kind}``, or a sequence of ``mean`` fields) compared less their means: over
    all rows (``mean``) or over the rows of each time level (``mean_per_time``;
    ``groups``: each row's level and the number of levels, `gauge_groups`); ``vectors``:
    `Problem.vectors`, relative $L^2$ only."""
    p, r = pred.astype(np.float64), ref.astype(np.float64)
    n = allgather_host(np.float64(p.shape[0])).sum()
    shift_p = np.zeros(p.shape)
    shift_r = np.zeros(p.shape)
    level, n_levels = groups if groups is not None else (np.zeros(p.shape[0], np.intp), 1)
    for i, kind in ((out_names.index(k), v) for k, v in gauge_of(gauge).items() if k in out_names):
        if kind == "mean_per_time":  # per-level sums and counts, added across processes
            local = np.stack([np.bincount(level, minlength=n_levels).astype(np.float64),
                              np.bincount(level, p[:, i], n_levels), np.bincount(level, r[:, i], n_levels)])
            cnt, sp, sr = allgather_host(local).sum(0)
            cnt = np.maximum(cnt, 1.0)
            shift_p[:, i], shift_r[:, i] = (sp / cnt)[level], (sr / cnt)[level]
        else:
            sums = allgather_host(np.stack([p[:, i].sum(), r[:, i].sum()])).sum(0)
            shift_p[:, i], shift_r[:, i] = sums[0] / n, sums[1] / n
    diff = (p - shift_p) - (r - shift_r)
    local = np.stack([(diff**2).sum(0), ((r - shift_r) ** 2).sum(0)])
    sq = allgather_host(local).sum(0)
    linf = allgather_host(np.abs(diff).max(0, initial=0.0)).max(0)
    rel = relative_errors(out_names, sq[0], sq[1], n, vectors)
    return {"rel_l2": rel, "linf": {name: float(linf[i]) for i, name in enumerate(out_names)}}


# Grids up to this many points are evaluated in one pass, their errors summed over the
# whole grid at once; larger grids stream through blocks of this many rows (bounded
# memory, moments combined exactly in float64), and their plots use a coarser grid.
STREAM_ROWS = 1 << 22


class _Moments:
    """Per-field running moments of $d = u - u^*$ and $u^*$ over row blocks (Chan et al.'s
    pairwise update of centred sums), kept per group of rows (the time levels of a
    ``mean_per_time`` gauge; one group otherwise), enough for `field_errors_sharded`'s
    definitions."""

    def __init__(self, m: int, groups: int = 1):
        self.n = np.zeros(groups)
        self.mean = np.zeros((groups, 2, m))  # means of d and r
        self.m2 = np.zeros((groups, 2, m))  # centred sums of squares of d and r
        self.sq = np.zeros((groups, 2, m))  # raw sums of squares of d and r
        self.hi = np.full((groups, m), -np.inf)  # max d
        self.lo = np.full((groups, m), np.inf)  # min d
        self.absmax = np.zeros((groups, m))  # max |d|

    def add(self, n, mean, m2, sq, hi, lo, absmax) -> None:
        """Adds the moments of other rows, group by group (``n``: rows per group)."""
        tot = self.n + n
        zero = np.zeros_like(tot)
        cross = np.divide(self.n * n, tot, out=zero.copy(), where=tot > 0)[:, None, None]
        share = np.divide(n, tot, out=zero, where=tot > 0)[:, None, None]
        delta = mean - self.mean
        self.m2 = self.m2 + m2 + delta**2 * cross
        self.mean = self.mean + delta * share
        self.n = tot
        self.sq = self.sq + sq
        self.hi, self.lo = np.maximum(self.hi, hi), np.minimum(self.lo, lo)
        self.absmax = np.maximum(self.absmax, absmax)

    def add_rows(self, pred: np.ndarray, ref: np.ndarray, level: np.ndarray | None = None) -> None:
        d, r = pred.astype(np.float64) - ref.astype(np.float64), ref.astype(np.float64)
        if d.shape[0] == 0:
            return
        g, m = self.n.shape[0], d.shape[1]
        n, mean, m2, sq = np.zeros(g), np.zeros((g, 2, m)), np.zeros((g, 2, m)), np.zeros((g, 2, m))
        hi, lo, absmax = np.full((g, m), -np.inf), np.full((g, m), np.inf), np.zeros((g, m))
        if g == 1:
            parts = [(0, slice(None))]
        else:
            order = np.argsort(level, kind="stable")
            ids, starts = np.unique(level[order], return_index=True)
            parts = list(zip(ids, np.split(order, starts[1:]), strict=True))
        for k, rows in parts:
            both = np.stack([d[rows], r[rows]])
            mean[k] = both.mean(1)
            n[k] = both.shape[1]
            m2[k] = ((both - mean[k][:, None]) ** 2).sum(1)
            sq[k] = (both**2).sum(1)
            hi[k], lo[k], absmax[k] = both[0].max(0), both[0].min(0), np.abs(both[0]).max(0)
        self.add(n, mean, m2, sq, hi, lo, absmax)

    def gathered(self) -> _Moments:
        """The moments of every process's rows together (a collective)."""
        if jax.process_count() == 1:
            return self
        g, m = self.hi.shape
        flat = np.concatenate([self.n, self.mean.ravel(), self.m2.ravel(), self.sq.ravel(),
                               self.hi.ravel(), self.lo.ravel(), self.absmax.ravel()])
        out = _Moments(m, g)
        for row in allgather_host(flat):
            parts = np.split(row, np.cumsum([g, 2 * g * m, 2 * g * m, 2 * g * m, g * m, g * m]))
            out.add(parts[0], *(q.reshape(g, 2, m) for q in parts[1:4]),
                    *(q.reshape(g, m) for q in parts[4:]))
        return out

    def errors(self, out_names, gauge, vectors=()) -> dict:
        gauge = gauge_of(gauge)
        total = self.n.sum()
        if self.n.shape[0] == 1:
            mean, m2, hi, lo = self.mean[0], self.m2[0], self.hi[0], self.lo[0]
        else:  # the groups together (Chan's combination of centred sums)
            w = self.n[:, None, None]
            mean = (w * self.mean).sum(0) / total
            m2 = self.m2.sum(0) + (w * (self.mean - mean) ** 2).sum(0)
            hi, lo = self.hi.max(0), self.lo.min(0)
        sq, absmax = self.sq.sum(0), self.absmax.max(0)
        has = self.n > 0
        nums, dens, inf = [], [], {}
        for i, name in enumerate(out_names):
            kind = gauge.get(name)
            if kind == "mean_per_time":  # less the mean of each time level
                num, den = self.m2[has, 0, i].sum(), self.m2[has, 1, i].sum()
                c = self.mean[has, 0, i]
                linf = float(np.max(np.maximum(self.hi[has, i] - c, c - self.lo[has, i])))
            elif kind is not None:  # less the mean over all rows
                num, den = m2[0, i], m2[1, i]
                linf = max(hi[i] - mean[0, i], mean[0, i] - lo[i])
            else:
                num, den, linf = sq[0, i], sq[1, i], absmax[i]
            nums.append(num)
            dens.append(den)
            inf[name] = float(linf)
        return {"rel_l2": relative_errors(out_names, nums, dens, total, vectors), "linf": inf}


def _reference_rows(problem, pts, rows, mesh, batch, dtype):
    """The reference at this process's ``rows`` of ``pts`` (those of `predict_sharded`): a
    numpy `HostFunction` on the host (never inside a compiled computation, see
    `pinnkit.physics.host`), anything else sharded like the network."""
    if isinstance(problem.reference, HostFunction):
        return problem.reference.host(pts[rows], np.dtype(dtype))
    return predict_sharded(problem.reference, pts, mesh, batch, dtype)[1]


def _streamed_errors(network, problem, pts, mesh, batch, dtype) -> dict:
    level, n_levels = gauge_groups(problem, pts)
    acc = _Moments(len(problem.out_names), n_levels)
    for start in range(0, pts.shape[0], STREAM_ROWS):
        block = pts[start : start + STREAM_ROWS]
        rows, pred = predict_sharded(network, block, mesh, batch, dtype)
        ref = _reference_rows(problem, block, rows, mesh, batch, dtype)
        inside = problem.error_mask(block)  # shapes: the grid points in the domain
        ok = slice(None) if inside is None else inside[rows]
        acc.add_rows(pred[ok], ref[ok], level[start : start + STREAM_ROWS][rows][ok])
    return acc.gathered().errors(problem.out_names, problem.gauge_map, problem.vectors)


def evaluate_sharded(network, problem, mesh: Mesh, resolution: int = 101, batch: int = 16384,
                     dtype=jnp.float32, grid: bool = True):
    """Errors of ``network`` against ``problem.reference`` on the bounding-box grid, with
    the grid sharded over all devices of ``mesh`` (a collective: every process calls it).

    **Returns:** ``(errors, grid)`` like `metrics.evaluate`. With ``grid=True`` the
    predictions are all-gathered for plotting (``grid["pred"]``, ``grid["ref"]``);
    otherwise ``grid`` is ``None`` and nothing but the per-field sums is exchanged.
    A grid of more than `STREAM_ROWS` points streams through blocks of that many rows
    (memory bounded by the block, not the grid), and its plotting grid is the coarsest
    resolution with at most `STREAM_ROWS` points. The reference of a `HostFunction` is
    computed on the host.
    """
    pts, shape = problem.domain.grid(resolution)
    if pts.shape[0] > STREAM_ROWS:
        errors = {}
        if problem.reference is not None:
            errors = _streamed_errors(network, problem, pts, mesh, batch, dtype)
        if not grid:
            return errors, None
        del pts
        coarse = max(2, int(resolution * (STREAM_ROWS / math.prod(shape)) ** (1 / len(shape))))
        return errors, evaluate_sharded(network, problem, mesh, coarse, batch, dtype, grid=True)[1]
    rows, pred = predict_sharded(network, pts, mesh, batch, dtype)
    ref = None
    errors = {}
    if problem.reference is not None:
        ref = _reference_rows(problem, pts, rows, mesh, batch, dtype)
        inside = problem.error_mask(pts)  # shapes: errors over the grid points in the domain
        ok = slice(None) if inside is None else inside[rows]
        level, n_levels = gauge_groups(problem, pts)
        errors = field_errors_sharded(problem.out_names, problem.gauge_map, pred[ok], ref[ok],
                                      (level[rows][ok], n_levels), problem.vectors)
    if not grid:
        return errors, None

    def full(vals):
        if vals is None:
            return None
        out = np.zeros((pts.shape[0], vals.shape[1]), vals.dtype)
        if jax.process_count() == 1:
            out[rows] = vals
            return out
        # Processes hold different numbers of rows: pad to the largest before gathering.
        m = int(allgather_host(np.int64(rows.shape[0])).max())
        pad = m - rows.shape[0]
        r_all = allgather_host(np.concatenate([rows, np.full(pad, -1)]))
        v_all = allgather_host(np.concatenate([vals, np.zeros((pad, vals.shape[1]), vals.dtype)]))
        for r_p, v_p in zip(r_all, v_all, strict=True):
            ok = r_p >= 0
            out[r_p[ok]] = v_p[ok]
        return out

    return errors, {"points": pts, "shape": shape, "pred": full(pred), "ref": full(ref)}
