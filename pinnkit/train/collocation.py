"""Collocation points (the training side of sampling; the geometry side, rejection, is
`pinnkit.geometry.rejection`): how many per term, how they are drawn, fixed or fresh each
step.

Every term gets a *global* batch size (the same whatever the number of devices); each
device holds ``size // n_devices`` of them. Points are produced from unit-cube samples,
as the domain's type says (`AbstractDomain.points`): mapped onto the term's piece
(`AbstractUnitCubeDomain`), or kept from candidates (`AbstractRejectionDomain`):

- ``resample: false`` (default, deepxde's fixed training set): one global set is drawn
  once on the host (uniform with the run's key, or scrambled Sobol), mapped, and passed
  into the training step sharded over devices. Identical for any device count.
- ``resample: true``: fresh points every step, drawn on each device (no host traffic);
  with ``every = k > 1`` every ``k`` steps (the step key, which draws them, is then
  ``fold_in(·, step // k)``: a second-order phase converges on one set for ``k`` steps,
  and the next set exposes what it learnt only between the points).
  ``uniform``: i.i.d. with a per-device key. ``sobol``: a scrambled Sobol set, sharded
  once, randomly shifted each step (Cranley–Patterson rotation), so the union over
  devices is always a shifted low-discrepancy set.

Observation terms (``where == "data"``) always use their full data set, sharded.
"""

from __future__ import annotations

from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..geometry.domains import AbstractRejectionDomain
from ..geometry.rejection import fixed_points, rejected
from ..geometry.rejection import sobol_unit as sobol_unit
from ..physics.problem import Problem

METHODS = ("uniform", "sobol")


class Sampler(eqx.Module):
    """Per-term batch sizes and the point-drawing policy (see module docstring).

    **Arguments:**
    - `batch`: global number of points per term name (data terms: ignored, all data used).
    - `method`: ``"uniform"`` or ``"sobol"``.
    - `resample`: draw fresh points every step (True) or use one fixed set (False).
    - `every`: with `resample`, keep each draw for this many steps (module docstring).
    """

    batch: dict[str, int] = eqx.field(static=True)
    method: Literal["uniform", "sobol"] = eqx.field(static=True, default="uniform")
    resample: bool = eqx.field(static=True, default=False)
    every: int = eqx.field(static=True, default=1)

    @property
    def hold(self) -> int:
        """Steps one draw of the points is used for: `every` with `resample`, else 1 (one
        fixed set: no redraw for the step key or the time budget to keep in step with)."""
        return self.every if self.resample else 1

    def check(self, problem: Problem, n_devices: int) -> None:
        """Raises ``ValueError`` (with both name sets) if batch and terms do not match."""
        sampled = {k for k, t in problem.terms.items() if t.where != "data"}
        missing = sampled - set(self.batch)
        extra = set(self.batch) - set(problem.terms)
        if missing or extra:
            raise ValueError(
                f"sampler.batch must name every sampled term of the problem: "
                f"missing={sorted(missing)}, unknown={sorted(extra)}, "
                f"terms={sorted(sampled)}"
            )
        # every offending term in one message, so that one fix suffices
        bad = [(k, self.batch[k]) for k in sorted(sampled)
               if self.batch[k] < n_devices or self.batch[k] % n_devices]
        rows = [(k, t.rows().shape[0]) for k, t in sorted(problem.terms.items()) if t.where == "data"]
        bad_rows = [(k, n) for k, n in rows if n % n_devices]
        if bad or bad_rows:
            parts = [f"sampler.batch.{k}={n} (use e.g. {max(n_devices, n - n % n_devices)})" for k, n in bad]
            parts += [f"term {k!r} with {n} observations (drop {n % n_devices} rows)" for k, n in bad_rows]
            raise ValueError(
                f"every batch must be a positive multiple of the number of devices ({n_devices}); "
                f"not so: {'; '.join(parts)}; or change the device count"
            )

    def host_arrays(self, key, problem: Problem, dtype, n_devices: int = 1) -> dict[str, np.ndarray]:
        """Global arrays passed into the step sharded over devices (``P("data")``).

        Fixed mode: the points themselves. Resample+sobol: the unit-cube base set. Data
        terms: their rows. Resample+uniform: nothing (drawn on device). Rejection-sampled
        domains (`pinnkit.geometry` shapes) draw fixed sets by host-side rejection and
        Sobol base sets of ``unit_rows`` candidates per device (``n_devices``).
        """
        out = {}
        d = problem.domain.dim
        keys = jax.random.split(key, max(1, len(problem.terms)))
        for i, (name, term) in enumerate(sorted(problem.terms.items())):
            if term.where == "data":
                out[name] = np.asarray(term.rows(), dtype)
                continue
            n = self.batch[name]
            if isinstance(problem.domain, AbstractRejectionDomain):
                arr = self._rejection_arrays(keys[i], problem.domain, term.where, n, n_devices, dtype)
                if arr is not None:
                    out[name] = arr
                continue
            if self.method == "sobol":
                seed = int(jax.random.randint(keys[i], (), 0, 2**31 - 1))
                unit = jnp.asarray(sobol_unit(n, d, seed), dtype)
            elif not self.resample:
                unit = jax.random.uniform(keys[i], (n, d), dtype)
            else:
                continue
            pts = unit if self.resample else problem.domain.from_unit(unit, term.where)
            out[name] = np.asarray(pts, dtype)
        return out

    def _rejection_arrays(self, key, domain, piece: str, n: int, n_devices: int, dtype):
        d = domain.dim
        if self.method == "sobol":
            seed = int(jax.random.randint(key, (), 0, 2**31 - 1))
            if self.resample:  # one base set of candidates per device, shifted each step
                m = domain.unit_rows(n // n_devices, piece) * n_devices
                return np.asarray(sobol_unit(m, d, seed), dtype)
            unit = lambda: jnp.asarray(sobol_unit(n, d, seed), dtype)  # noqa: E731
            draw = lambda r, m: sobol_unit(m, d, seed + r)  # noqa: E731
        elif self.resample:
            return None
        else:
            unit = lambda: jax.random.uniform(key, (n, d), dtype)  # noqa: E731
            draw = lambda r, m: jax.random.uniform(jax.random.fold_in(key, r), (m, d), dtype)  # noqa: E731
        return fixed_points(domain, piece, n, unit, draw, dtype)

    def acceptance(self, problem: Problem) -> dict[str, float]:
        """Expected fraction of candidates kept, per sampled term whose piece is sampled
        by rejection (empty for images of the unit cube): reported in ``summary.json``
        and the dry run."""
        if not isinstance(problem.domain, AbstractRejectionDomain):
            return {}
        return rejected(problem.domain, {k: t.where for k, t in problem.terms.items() if t.where != "data"})

    def local_batch(self, key, problem: Problem, arrays: dict, n_devices: int, dtype) -> dict:
        """The device-local batch, inside `shard_map`. ``key`` is the step key (replicated)."""
        batch = {}
        dev_key = jax.random.fold_in(key, jax.lax.axis_index("data"))
        for i, (name, term) in enumerate(sorted(problem.terms.items())):
            if term.where == "data" or not self.resample:
                batch[name] = arrays[name]
            elif self.method == "sobol":
                shift = jax.random.uniform(jax.random.fold_in(key, i), (problem.domain.dim,), dtype)
                unit = jnp.mod(arrays[name] + shift[None, :], 1.0)
                batch[name] = problem.domain.points(unit, term.where, self.batch[name] // n_devices)
            else:
                n_local = self.batch[name] // n_devices
                m = problem.domain.unit_rows(n_local, term.where)
                unit = jax.random.uniform(jax.random.fold_in(dev_key, i), (m, problem.domain.dim), dtype)
                batch[name] = problem.domain.points(unit, term.where, n_local)
        return batch
