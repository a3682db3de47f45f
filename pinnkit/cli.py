"""The ``pinnkit`` command: ``train``, ``eval``, ``plot``, ``problems``.

User mistakes (config errors, missing files, bad run folders) print one paragraph on
stderr and exit with status 2, without a traceback. Training that ends on a non-finite
loss exits 1; SIGTERM (preemption) writes a checkpoint and exits 0 so that a requeued
job can ``--resume``; Ctrl-C (SIGINT) does the same and exits 130.
"""

from __future__ import annotations

import argparse
import inspect
import json
import signal
import sys
import textwrap
from pathlib import Path

from .errors import PinnkitError


def _apply_numerics(cfg, devices: int | None) -> None:
    """The only place pinnkit touches global JAX state: before any computation."""
    import jax

    if devices is not None and devices > 1:
        try:  # only affects the CPU backend (fake devices for testing / CPU clusters)
            jax.config.update("jax_num_cpu_devices", devices)
        except RuntimeError:
            pass
    jax.config.update("jax_enable_x64", bool(cfg.numerics.x64))
    jax.config.update("jax_default_matmul_precision", cfg.numerics.matmul_precision)


class _Stop:
    """Signal handlers that ask the training loop to checkpoint and stop."""

    def __init__(self):
        self.signum = None

    def __call__(self) -> bool:
        return self.signum is not None

    def install(self):
        def handler(signum, frame):
            if self.signum == signal.SIGINT and signum == signal.SIGINT:
                raise KeyboardInterrupt  # second Ctrl-C: abort now
            self.signum = signum
            print(
                f"\npinnkit: received {signal.Signals(signum).name}; finishing the current "
                "chunk, then writing a checkpoint", file=sys.stderr, flush=True,
            )

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)
        return self


def cmd_train(args) -> int:
    from .config import load_config
    from .rundir import read_config, train_to_dir

    overrides = list(args.set or [])
    if args.devices is not None:
        overrides.append(f"mesh.data={args.devices}")
    if args.config is None:
        if not (args.resume and args.out):
            raise PinnkitError("train needs a CONFIG file (or --out DIR --resume to continue a run)")
        cfg = read_config(args.out, overrides)
    else:
        cfg = load_config(args.config, overrides)
    out = Path(args.out) if args.out else Path("runs") / Path(args.config).stem
    _apply_numerics(cfg, args.devices)
    stop = _Stop().install()
    summary = train_to_dir(
        cfg, out, resume=args.resume, overwrite=args.overwrite, should_stop=stop,
        progress=not args.quiet, plots=not args.no_plots,
    )
    errs = ", ".join(f"{k} {v:.3e}" for k, v in summary["rel_l2"].items())
    print(
        f"pinnkit: {summary['outcome']} at step {summary['steps']}/{summary['total_steps']} "
        f"in {summary['wall_s']:.1f} s"
        + (f"; rel. L2 error: {errs}" if errs else "")
        + f"; results in {out}/",
        file=sys.stderr,
    )
    if summary["outcome"] == "nonfinite_loss":
        print(f"pinnkit: {summary['message']}", file=sys.stderr)
        return 1
    if summary["outcome"] == "interrupted":
        return 130 if stop.signum == signal.SIGINT else 0
    return 0


def cmd_eval(args) -> int:
    from .rundir import evaluate_dir, read_config

    _apply_numerics(read_config(args.run_dir), None)
    print(json.dumps(evaluate_dir(args.run_dir), indent=2))
    return 0


def cmd_plot(args) -> int:
    from .rundir import plot_dir, read_config

    _apply_numerics(read_config(args.run_dir), None)
    for p in plot_dir(args.run_dir):
        print(p)
    return 0


def cmd_problems(args) -> int:
    from problems import PROBLEMS

    for name, factory in sorted(PROBLEMS.items()):
        doc = inspect.getdoc(factory) or ""
        first = doc.split("\n\n")[0].replace("\n", " ")
        params = ", ".join(
            f"{p.name}={p.default!r}" if p.default is not p.empty else p.name
            for p in inspect.signature(factory).parameters.values()
        )
        print(f"{name}({params})")
        print(textwrap.indent(textwrap.fill(first, 88), "    "))
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="pinnkit", description="PINN training from YAML configs.")
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train a config into a run directory")
    t.add_argument("config", nargs="?", help="YAML config file")
    t.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key (repeatable)")
    t.add_argument("--out", help="run directory (default: runs/<config name>)")
    t.add_argument("--resume", action="store_true", help="continue from the newest checkpoint in --out")
    t.add_argument("--overwrite", action="store_true", help="replace an existing run directory")
    t.add_argument("--devices", type=int, help="devices on the data axis (CPU: creates virtual devices)")
    t.add_argument("--quiet", action="store_true", help="no progress output")
    t.add_argument("--no-plots", action="store_true", help="skip writing plots")
    t.set_defaults(func=cmd_train)
    e = sub.add_parser("eval", help="errors of a trained run against its reference")
    e.add_argument("run_dir")
    e.set_defaults(func=cmd_eval)
    pl = sub.add_parser("plot", help="(re)draw a run's plots")
    pl.add_argument("run_dir")
    pl.set_defaults(func=cmd_plot)
    pr = sub.add_parser("problems", help="list built-in problems and their parameters")
    pr.set_defaults(func=cmd_problems)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except PinnkitError as e:
        msg = " ".join(str(e).split())
        print(textwrap.fill(f"pinnkit: error: {msg}", 100), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
