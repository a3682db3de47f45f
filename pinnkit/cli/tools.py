"""``pinnkit predict``, ``pinnkit export`` and ``pinnkit slim``: subcommands on a trained run
directory.

`register(subparsers)` adds both to the ``pinnkit`` parser (`pinnkit.cli.main.parser`); each
sets ``func`` like the other subcommands, so `pinnkit.cli.main` runs them and turns a
`PinnkitError` into one paragraph and exit status 2.

    pinnkit predict RUN --grid 201 --out u.npz
    pinnkit predict RUN --grid "x=-1:1:256,t=0:1:100" --out u.nc
    pinnkit predict SPHERE_RUN --grid "lat=-90:90:91,t=0:12:13" --out h.nc   # lat/lon in degrees
    pinnkit predict RUN --grid 64 --out u.vts          # ParaView (.vtu needs the vtk extra)
    pinnkit predict RUN --points stations.csv --out pred.csv   # NaN outside the domain
    pinnkit export RUN --out model.jaxexport [--derivatives] [--platforms cpu,cuda]
    pinnkit slim RUN --out SMALL_RUN                 # the run without optimiser state
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

from ..errors import PinnkitError


def _points(n: int) -> str:
    return f"{n} point" if n == 1 else f"{n} points"


def _numerics(run_dir) -> None:
    from ..run.rundir import read_config
    from .jaxsetup import apply_numerics

    apply_numerics(read_config(run_dir), None)


def _check_out(out: Path) -> None:
    """Refuses an ``--out`` file that cannot be written, before any work: a folder, or a
    parent that is a file."""
    from ..errors import RunDirError
    from ..run.folder import check_parent

    if out.is_dir():
        raise RunDirError(f"--out {out} is a folder; give a file name, e.g. {out / 'u.npz'}")
    check_parent(out)


def _written(out: Path, write):
    """``write()``, its failure to write (a read-only folder, a full disk) one paragraph,
    the file it left half-written removed."""
    from ..errors import RunDirError

    existed = out.exists()
    try:
        return write()
    except OSError as e:
        if not existed:
            out.unlink(missing_ok=True)
        raise RunDirError(f"cannot write --out {out}: {e.strerror or e}. Choose a folder you can "
                          "write to, on a file system with free space") from None


def cmd_predict(args) -> int:
    from ..gridio.writers import write
    from ..run.predict import OutsideDomainWarning, predict, predict_grid

    _check_out(Path(args.out))
    _numerics(args.run_dir)
    if args.grid is not None:
        res = predict_grid(args.run_dir, args.grid, batch=args.batch)
        what = f"{_points(res.points.shape[0])} on a {' x '.join(map(str, res.shape))} grid " \
               f"({', '.join(res.dims)})"
    else:
        with warnings.catch_warnings(record=True) as caught:  # the count, as one line of ours
            warnings.simplefilter("always", OutsideDomainWarning)
            res = predict(args.run_dir, points=args.points, batch=args.batch,
                          allow_outside=args.allow_outside)
        for w in caught:
            if isinstance(w.message, OutsideDomainWarning):
                m = w.message
                fate = "extrapolated (--allow-outside)" if m.allowed else \
                    "their values are NaN (use --allow-outside to extrapolate)"
                print(f"pinnkit: {m.n_outside} of {m.n} points lie outside the domain; {fate}",
                      file=sys.stderr)
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        what = _points(len(next(iter(res.values()))))
    paths = _written(Path(args.out), lambda: write(Path(args.out), res))
    more = f" (+ {len(paths) - 1} files, one per time)" if len(paths) > 1 else ""
    print(f"pinnkit: {what} written to {paths[0]}{more}", file=sys.stderr)
    return 0


def cmd_export(args) -> int:
    from ..run.export import export_run

    _check_out(Path(args.out))
    _numerics(args.run_dir)
    platforms = [p.strip() for p in args.platforms.split(",")] if args.platforms else None
    known = ("cpu", "cuda", "rocm", "tpu")  # jax.export's platforms; it accepts any name silently
    if platforms is not None and (bad := [p for p in platforms if p not in known]):
        raise PinnkitError(f"--platforms {args.platforms!r}: {bad} not known; give a comma-separated "
                           f"list of {', '.join(known)}")
    meta = export_run(args.run_dir, args.out, derivatives=args.derivatives, platforms=platforms)
    print(
        f"pinnkit: exported {meta['problem']} (step {meta['step']}, inputs {meta['inputs']['coords']}, "
        f"fields {meta['fields']}) to {args.out} (+ {args.out}.json); load it with "
        "jax.export.deserialize(bytearray(open(PATH, 'rb').read())).call(x)",
        file=sys.stderr,
    )
    return 0


def cmd_slim(args) -> int:
    from ..run.slim import slim_run

    _numerics(args.run_dir)
    res = slim_run(args.run_dir, args.out)
    mb = lambda n: f"{n / 2**20:.1f} MiB"  # noqa: E731
    print(f"pinnkit: {args.run_dir} copied to {args.out} with {len(res['checkpoints'])} model-only "
          f"checkpoint(s): {mb(res['bytes_before'])} -> {mb(res['bytes_after'])}; it evaluates, "
          "plots, predicts and exports like the original, and cannot be resumed", file=sys.stderr)
    return 0


def register(sub) -> None:
    """Adds ``predict``, ``export`` and ``slim`` to the ``pinnkit`` subparsers ``sub``."""
    p = sub.add_parser("predict", help="evaluate a trained run at points or on a grid")
    p.add_argument("run_dir")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--points", metavar="FILE",
                       help="CSV/NPZ/NetCDF file with one column per coordinate")
    where.add_argument("--grid", metavar="SPEC",
                       help="'N' per coordinate over the domain's box (on the sphere: N "
                            "latitudes, 2(N-1) longitudes, N times), or 'x=lo:hi:n,t=lo:hi:n' "
                            "(on the sphere: lat, lon in degrees, t)")
    p.add_argument("--allow-outside", action="store_true",
                   help="--points: keep the network's values at points outside the domain "
                        "(extrapolation; by default they are NaN)")
    p.add_argument("--out", required=True, metavar="FILE", help="output .csv, .npz, .nc, .vtu or .vts")
    p.add_argument("--batch", type=int, metavar="N", help="points per device per batch (default eval.batch)")
    p.set_defaults(func=cmd_predict)
    e = sub.add_parser("export", help="export the trained solution as a jax.export artifact")
    e.add_argument("run_dir")
    e.add_argument("--out", required=True, metavar="FILE", help="e.g. model.jaxexport")
    e.add_argument("--derivatives", action="store_true", help="also return the Jacobian dy/dx (b, m, d)")
    e.add_argument("--platforms", metavar="LIST", help="comma-separated, e.g. cpu,cuda (default: current)")
    e.set_defaults(func=cmd_export)
    s = sub.add_parser("slim", help="copy a run without optimiser state (small checkpoints, not resumable)")
    s.add_argument("run_dir")
    s.add_argument("--out", required=True, metavar="DIR", help="a new or empty folder")
    s.set_defaults(func=cmd_slim)
