"""``pinnkit runs`` and ``pinnkit compare``: trained runs side by side, read from their
folders alone (no JAX, no checkpoint; `pinnkit.run.runs_table`).

    pinnkit runs runs/                      # every run folder under runs/, one row each
    pinnkit compare runs/a runs/b --out ab.png   # the same table + overlaid curves

The table: run, problem, the config keys that differ between the runs (dotted, with
each run's value), steps, wall time, final errors (rel. L2 per field, or the problem's
own metrics when it has no exact solution) and outcome. ``runs`` skips a damaged or
non-run folder with a one-line note on stderr; ``compare`` refuses it (exit 2).
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..errors import PinnkitError, RunDirError


def _print_table(runs) -> None:
    from ..run.runs_table import format_table, table

    header, rows = table(runs, root=Path.cwd())
    print(format_table(header, rows))


def cmd_runs(args) -> int:
    from ..run.runs_table import find_runs

    runs, notes = find_runs(args.folders)
    for n in notes:
        print(f"pinnkit: {n}", file=sys.stderr)
    if not runs:
        raise PinnkitError(f"no run folders found under {', '.join(args.folders)}: a run folder holds "
                           "the config.yaml that `pinnkit train CONFIG --out DIR` writes; give the "
                           "folder that holds your runs (e.g. runs/)")
    _print_table(runs)
    return 0


def cmd_compare(args) -> int:
    from ..run.folder import check_parent
    from ..run.runs_table import read_run

    out = Path(args.out)
    if out.suffix.lower() != ".png":
        raise PinnkitError(f"--out {out}: compare writes a PNG image; give a file name ending in .png")
    if out.is_dir():
        raise RunDirError(f"--out {out} is a folder; give a file name, e.g. {out / 'compare.png'}")
    check_parent(out)
    runs = []
    for p in args.runs:
        try:
            runs.append(read_run(p))
        except RunDirError as e:
            raise RunDirError(f"cannot compare {p}: {e}. Give run folders written by `pinnkit train` "
                              "(`pinnkit runs DIR` lists the readable ones)") from None
    _print_table(runs)
    from ..plot.compare import compare_figure
    from ..run.runs_table import table

    labels = [row[0] for row in table(runs, root=Path.cwd())[1]]
    fig = compare_figure(runs, labels)
    try:
        fig.savefig(out, dpi=120)
    except OSError as e:
        out.unlink(missing_ok=True)
        raise RunDirError(f"cannot write --out {out}: {e.strerror or e}. Choose a folder you can "
                          "write to") from None
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
    print(f"pinnkit: loss and error curves of {len(runs)} runs written to {out}", file=sys.stderr)
    return 0


def register(sub) -> None:
    """Adds ``runs`` and ``compare`` to the ``pinnkit`` subparsers ``sub``."""
    r = sub.add_parser("runs", help="table of the run folders under some folders")
    r.add_argument("folders", nargs="+", metavar="DIR", help="run folders or folders holding them")
    r.set_defaults(func=cmd_runs)
    c = sub.add_parser("compare", help="table of some runs and one PNG of their loss and error curves")
    c.add_argument("runs", nargs="+", metavar="RUN", help="run folders")
    c.add_argument("--out", default="compare.png", metavar="FILE.png",
                   help="the figure (default: compare.png in the current folder)")
    c.set_defaults(func=cmd_compare)
