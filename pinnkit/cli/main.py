"""The ``pinnkit`` command: ``train``, ``eval``, ``plot``, ``problems`` (and ``predict``,
``export``, ``slim``: `pinnkit.cli.tools`; ``runs``, ``compare``: `pinnkit.cli.runs`).

User mistakes (config errors, missing files, bad run folders) print one paragraph on
stderr and exit with status 2, without a traceback; warnings are one line each
(``pinnkit: warning: ...``). Training that ends on a non-finite or diverging loss exits 1
(``train.max_time`` and a met tolerance exit 0); SIGTERM or SIGUSR1 (preemption, SLURM's
``--signal``) finishes the current chunk, writes a checkpoint and exits 0 so that a
requeued job can ``--resume auto``; Ctrl-C (SIGINT) does the same and exits 130. A
signal before training starts exits at once, and one that is not honoured within
``--grace-period`` seconds ends the process anyway (status 128 + signal number, the
newest checkpoint kept; `pinnkit.cli.signals`). A process that stalls past
``--stall-timeout``, or whose peer process died, exits 70.

Multi-process runs (several hosts, or one process per GPU): under ``srun`` with more
than one task nothing is needed; other launchers pass ``--coordinator HOST:PORT
--num-processes N --process-id I`` to every process (see docs/cluster.md).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import textwrap
import warnings
from pathlib import Path

from ..errors import PinnkitError
from .jaxsetup import apply_numerics, multiprocess_options, xla_cpu_flags
from .listing import cmd_problems


def _processes(args):
    """Joins the multi-process job if there is one (flags or SLURM); before any JAX
    computation. Returns the `ProcessSpec`."""
    from ..parallel.distributed import detect, initialize

    spec = detect(args.coordinator, args.num_processes, args.process_id)
    if spec.multi:
        multiprocess_options()
    initialize(spec, heartbeat_timeout=args.heartbeat_timeout)
    return spec


def _resume_mode(args) -> bool | str:
    """``--resume`` alone: must resume; ``--resume auto``: resume if a checkpoint exists."""
    if args.resume in (None, False):
        return False
    if args.resume == "auto":
        return "auto"
    if args.resume == "must":
        return True
    if args.config is None:  # `train --resume CONFIG`: argparse took the config as the value
        args.config = args.resume
        return True
    raise PinnkitError(f"--resume {args.resume!r}: use --resume (must resume) or --resume auto")


def cmd_train(args) -> int:
    from .signals import Stop

    out = Path(args.out) if args.out else Path("runs") / Path(args.config or "run").stem
    stop = Stop(args.grace_period, str(out)).install()  # exits at once until training starts
    try:
        return _train(args, out, stop)
    finally:
        stop.uninstall()
        if "jax" in sys.modules:
            from ..parallel.distributed import PeerWatch

            PeerWatch.finish()


def _train(args, out: Path, stop) -> int:
    from ..parallel.mesh import is_main_process
    from ..run.config import load_config
    from ..run.folder import stranded
    from ..run.rundir import read_config, recover_dir, train_to_dir

    resume = _resume_mode(args)
    spec = _processes(args)
    overrides = list(args.set or [])
    if args.devices is not None:  # per process; the mesh spans all processes
        overrides.append(f"mesh.data={args.devices * spec.num_processes}")
    # Command-line memory options override the config's train.* keys.
    for key in ("accumulate", "remat", "donate"):
        if getattr(args, key) is not None:
            overrides.append(f"train.{key}={str(getattr(args, key)).lower()}")
    if args.config is None and not args.dry_run and stranded(out) is not None:
        # the folder's config.yaml is the half-started run's: recover first (this rare path
        # starts JAX's backend before the numerics, so --devices cannot add CPU devices here)
        recover_dir(out)
    if args.config is None:
        if not (resume and args.out):
            raise PinnkitError("train needs a CONFIG file (or --out DIR --resume to continue a run)")
        cfg = read_config(args.out, overrides)
    else:
        _check_config_exists(args.config)
        cfg = load_config(args.config, overrides)
    # Numerics (x64, virtual CPU devices) before anything starts JAX's backend; recovery
    # asks it for the process index.
    apply_numerics(cfg, args.devices)
    if not args.dry_run:  # an old run a killed --overwrite left aside: back before training
        recover_dir(out)
    stall = args.stall_timeout if args.stall_timeout is not None else (900.0 if spec.multi else 0.0)
    # chunks of a quarter of the grace period: a signal's chunk, the checkpoint and the
    # summary fit in it (`pinnkit.train.loop.fit`'s max_chunk_s)
    fit_options = dict(accumulate=cfg.train.accumulate, remat=cfg.train.remat,
                       donate=cfg.train.donate, stall_timeout=stall, max_chunk_s=args.grace_period / 4)
    if args.dry_run:
        return _dry_run(cfg, fit_options)
    summary = train_to_dir(
        cfg, out, resume=resume, overwrite=args.overwrite, should_stop=stop,
        progress=not args.quiet, plots=not args.no_plots, started=stop.deferring, **fit_options,
    )
    errs = ", ".join(f"{k} {v:.3e}" for k, v in summary["rel_l2"].items())
    # no exact solution: the problem's own figures (c_D, delta_p, ...) instead
    own = ", ".join(f"{k} {v:.5g}" for k, v in _numbers(summary.get("metrics", {})).items())
    print_ = print if is_main_process() else (lambda *a, **k: None)
    restored = summary.get("old_run_restored", False)
    print_(
        f"pinnkit: {summary['outcome']} at step {summary['steps']}/{summary['total_steps']} "
        f"in {summary['wall_s']:.1f} s"
        + (f"; rel. L2 error: {errs}" if errs else f"; {own}" if own else "")
        + (f"; the old run is back in {out}/" if restored else f"; results in {out}/"),
        file=sys.stderr,
    )
    failed = summary["outcome"] in ("nonfinite_loss", "diverged")  # RESULTS.failed
    if failed or restored:
        print_(paragraph(f"pinnkit: {summary['message']}"), file=sys.stderr)
    if summary.get("stopped_by"):
        print_(f"pinnkit: {summary['stopped_by']}", file=sys.stderr)
    if summary["outcome"] in ("max_time", "interrupted") and not restored:
        print_(f"pinnkit: to continue, run: {resume_command(out, args.devices)}", file=sys.stderr)
    if failed:
        return 1
    if summary["outcome"] == "interrupted":
        return 130 if stop.signum == signal.SIGINT else 0
    return 0


def _numbers(tree: dict, prefix: str = "") -> dict[str, float]:
    """The numbers of a nested mapping by dotted name (at most 8)."""
    out: dict[str, float] = {}
    for k, v in tree.items():
        if isinstance(v, dict):
            out.update(_numbers(v, f"{prefix}{k}."))
        elif isinstance(v, int | float) and not isinstance(v, bool):
            out[f"{prefix}{k}"] = float(v)
    return dict(list(out.items())[:8])


def resume_command(out: Path, devices: int | None = None) -> str:
    """The command that continues the run in ``out`` (its config.yaml holds every key,
    ``--set`` overrides included): ``pinnkit train --out OUT --resume``."""
    import shlex

    extra = f" --devices {devices}" if devices is not None else ""
    return f"pinnkit train --out {shlex.quote(str(out))}{extra} --resume"


def _check_config_exists(config: str) -> None:
    """A missing config that names a shipped example says how to get the examples."""
    from .examples import missing_config_hint

    if not Path(config).exists() and (hint := missing_config_hint(config)):
        raise PinnkitError(f"config file {config!r} not found (current folder: {Path.cwd()}). {hint}")


def _dry_run(cfg, fit_options) -> int:
    """Prints the plan of a run (mesh, batches, parameters, compiled memory) as JSON."""
    from ..parallel.mesh import is_main_process
    from ..run.build import build_run
    from ..train.plan import plan

    fit_options.pop("stall_timeout")
    fit_options.pop("max_chunk_s")
    info = plan(build_run(cfg), **fit_options)
    if is_main_process():
        mem = info["memory_per_device"]
        mib = {k: round(v / 2**20, 2) for k, v in mem.items()}
        m = info["mesh"]
        print(
            f"pinnkit: dry run: mesh data={m['size']} ({m['processes']} process(es) x "
            f"{m['devices_per_process']} {m['platform']} device(s)); per-device batch "
            f"{info['per_device_batch']} (micro-batch {info['micro_batch']}); "
            f"{info['parameters']} parameters; compiled {info['chunk_steps']}-step chunk: "
            f"~{mib.get('peak_estimate_bytes', float('nan'))} MiB per device "
            f"(temporaries {mib.get('temp_size_in_bytes', float('nan'))} MiB)",
            file=sys.stderr,
        )
        print(json.dumps(info, indent=2))
    return 0


def cmd_eval(args) -> int:
    from .. import _jsonsafe as jsonsafe
    from ..run.rundir import evaluate_dir, read_config

    apply_numerics(read_config(args.run_dir), None)
    print(jsonsafe.dumps(evaluate_dir(args.run_dir, args.last), indent=2))  # strict JSON, NaN flagged
    return 0


def cmd_plot(args) -> int:
    from ..run.rundir import plot_dir, read_config

    apply_numerics(read_config(args.run_dir), None)
    for p in plot_dir(args.run_dir, args.last):
        print(p)
    return 0


def _accumulate_arg(text: str) -> int | str:
    """``--accumulate``'s value: an integer, or ``auto``."""
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1 or 'auto', got {text!r}") from None


def parser() -> argparse.ArgumentParser:
    from .._version import __version__

    p = argparse.ArgumentParser(prog="pinnkit", description="PINN training from YAML configs.")
    p.add_argument("--version", action="version", version=f"pinnkit {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train a config into a run directory")
    t.add_argument("config", nargs="?", help="YAML config file")
    t.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key (repeatable)")
    t.add_argument("--out", help="run directory (default: runs/<config name>)")
    t.add_argument("--resume", nargs="?", const="must", metavar="auto",
                   help="continue from the newest valid checkpoint in --out; '--resume auto' "
                        "starts afresh when there is none (for requeued jobs)")
    t.add_argument("--overwrite", action="store_true", help="replace an existing run directory")
    t.add_argument("--devices", type=int, help="devices on the data axis (CPU: creates virtual devices)")
    t.add_argument("--quiet", action="store_true", help="no progress output")
    t.add_argument("--no-plots", action="store_true", help="skip writing plots")
    t.add_argument("--dry-run", action="store_true",
                   help="print mesh, per-device batch, parameter count and compiled memory; no training")
    big = t.add_argument_group("large problems")
    big.add_argument("--accumulate", type=_accumulate_arg, default=None, metavar="K",
                     help="split each step's batch into K micro-batches (gradient accumulation); "
                          "'auto': as many as fit the step's working set into one core's cache "
                          "where that is faster (CPU only)")
    big.add_argument("--remat", choices=("none", "dots", "full"), default=None,
                     help="rematerialise the per-device loss in the backward pass")
    big.add_argument("--donate", action="store_const", const=True, default=None,
                     help="donate the train state to each chunk")
    mp = t.add_argument_group("multi-process (not needed under srun; see docs/cluster.md)")
    mp.add_argument("--coordinator", metavar="HOST:PORT", help="address of process 0")
    mp.add_argument("--num-processes", type=int, metavar="N", help="number of processes")
    mp.add_argument("--process-id", type=int, metavar="I", help="this process, 0..N-1")
    mp.add_argument("--heartbeat-timeout", type=int, default=60, metavar="S",
                    help="seconds after which a silent process counts as dead (default 60)")
    t.add_argument("--grace-period", type=float, default=60.0, metavar="S",
                   help="after SIGTERM/SIGUSR1/SIGINT, exit anyway if the run has not stopped at a "
                        "chunk boundary within S seconds (default 60; the newest checkpoint is kept); "
                        "second-order phases run chunks of at most S/4 seconds")
    mp.add_argument("--stall-timeout", type=float, metavar="S",
                    help="exit 70 if a compiled chunk takes longer (default: 900 with several "
                         "processes, off otherwise)")
    t.set_defaults(func=cmd_train)
    e = sub.add_parser("eval", help="errors of a trained run against its reference")
    pl = sub.add_parser("plot", help="(re)draw a run's plots")
    for sp in (e, pl):
        sp.add_argument("run_dir")
        sp.add_argument("--last", action="store_true",
                        help="the final parameters, not the best kept (eval.keep_best)")
    e.set_defaults(func=cmd_eval)
    pl.set_defaults(func=cmd_plot)
    pr = sub.add_parser("problems", help="list built-in problems and their parameters")
    pr.set_defaults(func=cmd_problems)
    from . import examples, runs, tools

    tools.register(sub)  # predict, export, slim
    runs.register(sub)  # runs DIR..., compare RUN...
    examples.register(sub)  # examples [copy DIR]
    return p


def paragraph(text: str) -> str:
    """``text`` wrapped at 100 columns only between words: a path or command in it stays
    whole, so it can be copied from the terminal (no break at a path's hyphen)."""
    return textwrap.fill(text, 100, break_long_words=False, break_on_hyphens=False)


def _in_process_group() -> bool:
    if "jax" not in sys.modules:
        return False
    import jax

    return jax.distributed.is_initialized()


def _one_line_warnings(message, category, filename, lineno, file=None, line=None):
    """`warnings.showwarning` for the command line: one ``pinnkit: warning:`` line, with
    the warning's origin only when it does not come from pinnkit."""
    text = " ".join(str(message).split())
    module = Path(filename).parts
    origin = "" if "pinnkit" in module else f" ({category.__name__} from {Path(filename).name}:{lineno})"
    print(f"pinnkit: warning: {text}{origin}", file=file or sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    xla_cpu_flags()  # first: XLA reads its options once, when the backend starts
    args = parser().parse_args(argv)
    shown = warnings.showwarning
    warnings.showwarning = _one_line_warnings
    try:
        return args.func(args)
    except PinnkitError as e:
        msg = " ".join(str(e).split())
        print(paragraph(f"pinnkit: error: {msg}"), file=sys.stderr, flush=True)
        if _in_process_group():
            # Leave at once: a clean exit would wait at JAX's shutdown barrier for peers
            # that may be blocked in a collective; they see this process go and exit too.
            sys.stdout.flush()
            os._exit(2)
        return 2
    except Exception as e:
        if not _in_process_group():
            raise
        # A collective that failed because a peer is gone (gloo/NCCL: connection closed):
        # one paragraph, then leave at once (see above).
        from ..parallel.distributed import PEER_LOST_EXIT, lost_process_message

        print(paragraph(lost_process_message(f"{type(e).__name__}: {e}")),
              file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(PEER_LOST_EXIT)
    finally:
        warnings.showwarning = shown


if __name__ == "__main__":
    sys.exit(main())
