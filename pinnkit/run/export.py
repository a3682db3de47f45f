"""Ship a trained solution: a serialized `jax.export` artifact, loadable with JAX alone.

``export_run(run_dir, out)`` writes ``out`` (the bytes of
``jax.export.export(jit(f))(ShapeDtypeStruct(symbolic_shape("b, d"), dtype)).serialize()``)
and ``out + ".json"`` (coordinate and field names, dtype, what the outputs are), where

- ``f(x) = vmap(network)(x)``: ``(b, d) -> (b, m)``, or with ``derivatives=True``
- ``f(x) = (y, J)``: ``y`` ``(b, m)`` and the Jacobian ``J[k, i, j] = ∂y_i/∂x_j`` ``(b, m, d)``.

The batch size ``b`` is symbolic: one artifact serves any number of points. Loading
needs only ``jax`` (and ``flatbuffers``, which JAX's serialization uses)::

    import jax, numpy as np
    with open("model.jaxexport", "rb") as fh:
        model = jax.export.deserialize(bytearray(fh.read()))
    x = np.array([[0.5, 0.25]], np.float32)       # (b, d), coordinates in order
    y = model.call(x)                               # (b, m)

The artifact is compiled for the platforms it was exported for (``platforms``, default
the current backend, e.g. ``("cpu",)``; ``("cpu", "cuda")`` serves both).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import jax
import jax.numpy as jnp

from ..errors import PinnkitError


def export_network(network, dim: int, dtype=jnp.float32, *, derivatives: bool = False,
                   platforms: Sequence[str] | None = None) -> bytearray:
    """Serialized `jax.export` of ``network`` over a batch ``(b, dim)`` (module docstring)."""
    try:
        import flatbuffers  # noqa: F401  (jax.export's serialization needs it)
    except ImportError:
        raise PinnkitError(
            "exporting needs the 'flatbuffers' package (used by jax.export serialization): "
            "pip install flatbuffers"
        ) from None

    def f(x):
        y = jax.vmap(network)(x)
        if not derivatives:
            return y
        return y, jax.vmap(jax.jacfwd(network))(x)

    spec = jax.ShapeDtypeStruct(jax.export.symbolic_shape(f"b, {dim}"), dtype)
    exp = jax.export.export(jax.jit(f), platforms=platforms)(spec)
    return exp.serialize()


def export_run(run_dir: str | Path, out: str | Path, *, derivatives: bool = False,
               platforms: Sequence[str] | None = None) -> dict:
    """Exports the newest checkpoint of ``run_dir`` to ``out`` and ``out.json``.

    **Returns:** the metadata written to ``out.json``.
    """
    from .rundir import load_run

    data = load_run(run_dir)
    dtype = jnp.float64 if data.config.numerics.x64 else jnp.float32
    coords, fields = data.problem.domain.coords, data.problem.out_names
    blob = export_network(data.network, len(coords), dtype, derivatives=derivatives, platforms=platforms)
    out = Path(out)
    meta = {
        "format": "jax.export serialized Exported; load with jax.export.deserialize(bytearray(bytes))",
        "inputs": {"shape": ["b", len(coords)], "dtype": jnp.dtype(dtype).name, "coords": list(coords)},
        "outputs": ["y (b, m)"] + (["dy_dx (b, m, d)"] if derivatives else []),
        "fields": list(fields),
        "derivatives": derivatives,
        "platforms": list(platforms) if platforms else [jax.default_backend()],
        "problem": data.config.problem.name,
        "step": data.step,
        "coeffs": {k: float(v) for k, v in data.coeffs.items()},
    }
    side = Path(str(out) + ".json")
    made = [p for p in (out, side) if not p.exists()]
    try:  # both or neither: a failure removes what this call created
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(bytes(blob))
        side.write_text(json.dumps(meta, indent=2) + "\n")
    except OSError as e:
        for p in made:
            p.unlink(missing_ok=True)
        raise PinnkitError(f"cannot write {out}: {e.strerror or e}. Choose a folder you can write "
                           "to, on a file system with free space") from None
    return meta
