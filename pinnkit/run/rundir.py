"""The run directory, the interface between training and analysis (docs/architecture.md)::

    DIR/config.yaml        resolved config (every key) + package versions
    DIR/metrics.jsonl      one JSON record per logged step (loss, per-term losses) or eval
    DIR/summary.json       errors per field vs the reference, steps, wall time, outcome
    DIR/checkpoints/       step_XXXXXXXX.eqx, atomic, newest `keep` kept
    DIR/best/              the model of the lowest eval.keep_best metric (`pinnkit.run.best`)
    DIR/plots/*.png        solution / reference / error per field, loss curves
    DIR/tensorboard/       live curves (logging.tensorboard: true; `pinnkit.run.live`)

`train_to_dir` writes it; `load_run` (notebooks), `evaluate_dir` and `plot_dir` read it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import _jsonsafe as jsonsafe
from ..errors import RunDirError
from ..nn.evaluate import predict
from ..parallel.distributed import barrier, broadcast_from_main
from ..parallel.mesh import evaluate_sharded, is_main_process, make_mesh
from ..physics.coeffs import values as coeff_values
from ..physics.problem import Problem
from ..plot.fields import write_plots
from ..train import checkpoint as ckpt
from ..train.best import KeepBest
from ..train.callbacks import Callback, extra_metrics
from ..train.loop import RESULTS, FitResult, find_checkpoint, fit, init_extra, split_model
from ..train.windows import fit_windows, load_windows
from . import folder, loggers, memplan, yamlsafe
from .best import choose, keep_best, model_folder
from .build import build_problem, build_run, reusing_problems
from .callbacks import config_callbacks
from .config import RunConfig, dump_config
from .folder import OWN_NAMES, Replaced, RunFolderWarning, RunLock, earned_checkpoint, recover, stranded
from .live import start_live_logging
from .records_io import read_history as _read_history
from .records_io import read_summary as _read_summary
from .summary import problem_metrics, summarize

versions = ckpt.package_versions


def _write_text(path: Path, text: str) -> None:
    ckpt.atomic_write_bytes(path, text.encode())


def read_config(run_dir: Path, overrides: list[str] | None = None) -> RunConfig:
    """The resolved config stored in ``run_dir/config.yaml`` (with optional overrides)."""
    from .config import from_dict_with_overrides

    path = Path(run_dir) / "config.yaml"
    if (note := stranded(Path(run_dir))) is not None:  # not the half-started run's config
        raise RunDirError(note)
    if path.is_symlink() and path.resolve().parent != Path(run_dir).resolve():
        raise RunDirError(f"{path} is a link to {path.resolve()}, outside the run folder: pinnkit reads "
                          "a run's config.yaml only from the run itself. Replace the link by a copy "
                          "of the file it points to, then run the command again.")
    if not path.is_file():
        raise RunDirError(
            f"{run_dir} is not a pinnkit run directory: {path.name} is missing. "
            "Train first with `pinnkit train CONFIG --out DIR`."
        )
    data = yamlsafe.loads(yamlsafe.read_text(path, "run config"), str(path)) or {}
    if not isinstance(data, dict):
        raise RunDirError(f"{path} is damaged: it holds a YAML {type(data).__name__}, not the mapping "
                          "of sections pinnkit writes. Restore it from a copy of the run")
    data.pop("versions", None)
    source_dir = data.pop("source_dir", None)
    return from_dict_with_overrides(data, overrides, str(path), source_dir)


def _entries(out: Path) -> list[Path]:
    """The folder's own entries (not pinnkit's lock or a replacement in progress)."""
    try:
        return [p for p in out.iterdir() if p.name not in OWN_NAMES]
    except FileNotFoundError:
        return []
    except NotADirectoryError:
        raise RunDirError(f"--out {out} is a file, not a folder; choose another --out") from None
    except OSError as e:
        raise RunDirError(f"cannot read {out}: {e.strerror or e}") from None


def check_dir(out: Path, cfg: RunConfig, *, resume: bool, overwrite: bool) -> bool:
    """Checks that ``cfg`` may be written to ``out``, without writing anything; every
    process runs it (so that all raise the same error). Returns whether ``out`` holds an
    old run that ``--overwrite`` replaces."""
    out = Path(out)
    existing = bool(_entries(out))
    if resume:
        if not (out / "config.yaml").is_file():
            raise RunDirError(f"--resume: {out} holds no run (no config.yaml); drop --resume")
        old = read_config(out).to_dict()
        new = cfg.to_dict()
        changed = [
            f"{s}.{k}" for s in new for k in new[s]
            # mesh: a run may resume on another number of devices; eval: only reporting.
            if s not in ("train", "checkpoint", "optim", "mesh", "eval", "logging")
            and old.get(s, {}).get(k) != new[s][k]
        ]
        if changed:
            raise RunDirError(
                f"--resume: the config differs from {out / 'config.yaml'} at {changed}; a "
                "resumed run must keep its problem, network, sampler and numerics. Start a "
                "new --out folder instead."
            )
        return False
    if existing:
        if not overwrite:
            raise RunDirError(
                f"{out} already holds files; pass --resume to continue that run, --overwrite "
                "to replace it, or choose another --out folder"
            )
        if not ((out / "config.yaml").is_file() or (out / "checkpoints").is_dir()):
            raise RunDirError(f"--overwrite: {out} is not a pinnkit run folder; refusing to delete it")
    return existing


def recover_dir(out: str | Path) -> None:
    """Moves back an old run that a killed ``--overwrite`` left aside in ``out``
    (`folder.recover`), with a warning naming it; the first thing any ``pinnkit train``
    on a folder does, before reading it. Every process calls it; process 0 moves."""
    out = Path(out)
    found = bool(broadcast_from_main(np.int32(
        is_main_process() and any((out / n).is_symlink() or (out / n).exists() for n in OWN_NAMES[1:]))))
    if not found:
        return
    with _writing(out):  # refused while the replacement's own process still runs
        names, err = [], None
        if is_main_process():
            try:
                names = recover(out)
            except RunDirError as e:
                err = e
            except OSError as e:
                err = RunDirError(
                    f"cannot move back the old run that an earlier --overwrite left in {out}: "
                    f"{e.strerror or e} ({e.filename}). Fix the folder's permissions or space "
                    "and run the command again; what was not moved yet is still there.")
        if bool(broadcast_from_main(np.int32(err is not None))):  # also the processes' barrier
            raise err or RunDirError(f"process 0 could not move back the old run in {out} (see "
                                     "its message); this process stops too")
        if names:
            warnings.warn(
                f"{out}: an earlier --overwrite was killed before its new run earned a "
                f"checkpoint; moved the old run ({len(names)} entries: {', '.join(names[:6])}"
                f"{', ...' if len(names) > 6 else ''}) back; the new run's files, if any, are deleted",
                RunFolderWarning, stacklevel=2)


@contextlib.contextmanager
def _writing(out: Path):
    """Holds ``out``'s lock (process 0) for the block; every process raises if it cannot."""
    lock, err, note = None, None, None
    if is_main_process():
        try:
            out.mkdir(parents=True, exist_ok=True)
            lock = RunLock(out)
            note = lock.acquire()
        except RunDirError as e:
            err = e
        except OSError as e:
            err = RunDirError(f"cannot create or lock {out}: {e.strerror or e}")
    failed = bool(broadcast_from_main(np.int32(err is not None)))
    if err is not None:
        raise err
    if failed:
        raise RunDirError(f"process 0 could not lock {out} (see its message); this process stops too")
    if note:
        warnings.warn(note, RunFolderWarning, stacklevel=3)
    try:
        yield
    finally:
        if lock is not None:
            lock.release()


def resolve_resume(out: Path, resume: bool | str, overwrite: bool) -> tuple[bool, bool]:
    """``(resume, overwrite)`` for `prepare_dir`. ``resume="auto"`` resumes when ``out``
    holds a valid checkpoint and otherwise starts afresh, replacing a run folder that has
    none (a job preempted before its first checkpoint). Same answer on every process."""
    if resume != "auto":
        return bool(resume), overwrite
    first_window = Path(out) / "windows" / "w0" / "checkpoints"
    if find_checkpoint(Path(out) / "checkpoints") is not None or find_checkpoint(first_window):
        return True, overwrite
    return False, overwrite or (Path(out) / "config.yaml").is_file()


def train_to_dir(
    cfg: RunConfig,
    out: str | Path,
    *,
    resume: bool | str = False,
    overwrite: bool = False,
    mesh=None,
    should_stop: Callable[[], bool] = lambda: False,
    progress: bool = True,
    plots: bool = True,
    started: Callable[[], None] = lambda: None,
    callbacks: Sequence[Callback] = (),
    **fit_options,
) -> dict:
    """Trains ``cfg`` into run directory ``out`` and returns the summary dict.

    ``resume``: ``False``, ``True`` (must resume) or ``"auto"`` (resume if possible).
    ``callbacks`` (`pinnkit.train.callbacks`) go to `fit` after those of the config
    (``train.early_stopping``); their ``metrics`` join the final ``summary.json``'s.
    ``fit_options`` (``accumulate``, ``remat``, ``donate``, ``stall_timeout``,
    ``max_chunk_s``) go to
    `fit`. Every process of a multi-process job calls this; process 0 writes the files.
    Errors are computed with the grid sharded over all devices (`evaluate_sharded`).

    Nothing in ``out`` changes until the run is built and its memory plan passes
    (`memplan.check`); then ``out`` is locked against other writers, ``started()`` is
    called (the CLI's signal handling switches from "exit now" to "checkpoint first"),
    and with ``overwrite`` the old run moves aside until the new one earns a checkpoint
    (`folder.Replaced`): a scheduled one, or the last one of a run that ended
    ``successful``, ``converged`` or ``max_time`` past step 0. A new run that stops
    before that (diverged, non-finite, a signal, an error) is deleted and the old one put
    back; the summary returned then has ``"old_run_restored": True``, and nothing of the
    new run is written. Leftover temporary files of writes killed midway
    (`folder.remove_temp_files`) are deleted first. Resuming a finished run returns its
    summary unchanged.
    """
    out = Path(out)
    recover_dir(out)
    resume, overwrite = resolve_resume(out, resume, overwrite)
    replaces = check_dir(out, cfg, resume=resume, overwrite=overwrite)
    loggers.check(cfg.logging)  # a missing logger package: refused before anything is written
    with reusing_problems():
        mesh = mesh if mesh is not None else make_mesh(cfg.mesh.data)
        run = memplan.check(cfg, build_problem(cfg), mesh, lambda: build_run(cfg, mesh=mesh),
                            fit_options)
    callbacks = (*config_callbacks(cfg, run.problem), *keep_best(cfg, run, out, resume), *callbacks)
    old = Replaced(out)
    with _writing(out):
        started()
        if is_main_process():
            folder.warn_temp_files_removed(out)
        if replaces and is_main_process():
            old.move_aside()
        try:
            if not resume and is_main_process():
                meta = {"versions": versions(), "source_dir": cfg.source_dir}
                _write_text(out / "config.yaml", dump_config(cfg, meta))
            barrier("pinnkit-prepare-dir")
            summary = _train(run, out, resume, old, should_stop, progress, plots,
                             dict(fit_options, callbacks=callbacks))
        except BaseException:
            if is_main_process() and old.names:  # not dropped: no checkpoint was earned
                old.restore()
            raise
    return summary


def _train(run, out: Path, resume: bool, old: Replaced, should_stop, progress, plots, fit_options):
    cfg, ev = run.config, run.config.eval
    before = _read_summary(out) if resume else None

    def polled() -> bool:  # between chunks: the old run goes once the new one earned a checkpoint
        if old.names and is_main_process() and earned_checkpoint(out):
            old.drop()
        return should_stop()

    def eval_fn(network, coeffs):
        errors = evaluate_sharded(network, run.problem, run.mesh, ev.resolution, ev.batch, run.dtype,
                                  grid=False)[0]
        # Learnt scalar coefficients' trajectory: physical values at each eval step.
        learnt = {k: v for k, v in coeff_values(coeffs).items() if k in run.problem.trainable}
        scalars = {k: float(v) for k, v in learnt.items() if getattr(v, "ndim", 1) == 0}
        errors = {**errors, **problem_metrics(run.problem, network, ev.batch, run.dtype, coeffs)}
        return {**errors, "coeffs": scalars} if scalars else errors

    # live curves (logging.tensorboard, wandb, mlflow): a reader of metrics.jsonl beside the loop
    live = start_live_logging(run, out, resume) if is_main_process() else None
    final = None
    try:
        if cfg.train.time_windows > 1:  # time marching: one fit per window (pinnkit.train.windows)
            def window_eval(rw):
                return lambda network, coeffs: evaluate_sharded(
                    network, rw.problem, rw.mesh, ev.resolution, ev.batch, rw.dtype, grid=False)[0]

            res = fit_windows(run, out_dir=out, resume=resume, evaluate_window=window_eval,
                              should_stop=polled, progress=progress, throw=False, **fit_options)
        else:
            res = fit(run, out_dir=out, resume=resume, should_stop=polled, evaluate=eval_fn,
                      progress=progress, throw=False, **fit_options)
        summary = _finish(run, res, out, before, old, plots, fit_options["callbacks"])
        final = (summary["steps"], {k: summary[k] for k in ("rel_l2", "linf", "metrics") if k in summary})
    finally:
        if live is not None:
            live.close(final)
    return summary


def _finish(run, res: FitResult, out: Path, before, old: Replaced, plots, callbacks) -> dict:
    """The run's summary after `fit`: the final evaluation, summary.json, the plots."""
    cfg, ev = run.config, run.config.eval
    # Still replacing: decided before the final evaluation, so that a kill during it
    # cannot take a finished new run for a failed one (or the reverse).
    if bool(broadcast_from_main(np.int32(is_main_process() and bool(old.names)))):
        if folder.earned(res):
            if is_main_process():
                old.drop()
        else:
            if is_main_process():
                old.restore()
            summary = summarize(run, res, {}, [])
            summary.update(old_run_restored=True, message=folder.restored_message(res, out))
            return summary  # nothing of the new run is written: the folder is the old run
    total = run.total_steps * cfg.train.time_windows
    if (before is not None and res.result is RESULTS.successful and res.step == total
            and before.get("steps") == total and before.get("outcome") == "successful"):
        return before  # a finished run resumed: nothing new to report, summary.json kept
    want_plots = plots and res.result is not RESULTS.interrupted
    history = _read_history(out) if is_main_process() else []
    if res.result is RESULTS.interrupted and is_main_process():
        # within the signal's grace period: the summary first (no errors yet), then the
        # evaluation, which rewrites it, however long it takes
        _write_text(out / "summary.json", jsonsafe.dumps(summarize(run, res, {}, history), indent=2) + "\n")

    def record(network, coeffs, grid: bool):  # errors and metrics (the problem's, the callbacks')
        errors, grid_ = evaluate_sharded(network, run.problem, run.mesh, ev.resolution, ev.batch,
                                         run.dtype, grid=grid)
        metrics = {**problem_metrics(run.problem, network, ev.batch, run.dtype, coeffs).get("metrics", {}),
                   **extra_metrics(callbacks, network, coeffs)}
        return {**errors, **({"metrics": metrics} if metrics else {})}, grid_

    network, coeffs, best = res.network, res.coeffs, None
    errors, grid = record(network, coeffs, want_plots)
    if keeper := next((cb for cb in callbacks if isinstance(cb, KeepBest)), None):
        network, coeffs, best = choose(run, keeper, res.step, network, coeffs, errors, out)
        if network is not res.network:  # the best kept: its own errors, metrics and plots
            errors, grid = record(network, coeffs, want_plots)
    summary = summarize(run, dataclasses.replace(res, coeffs=coeffs), errors, history)
    summary.update({k: errors[k] for k in ("metrics",) if k in errors}, **({"best": best} if best else {}))
    if res.stop_reason:
        summary["stopped_by"] = res.stop_reason
    summary["n_processes"] = jax.process_count()
    if is_main_process():  # strict JSON: non-finite errors as null, named under "nonfinite"
        _write_text(out / "summary.json", jsonsafe.dumps(summary, indent=2) + "\n")
        if want_plots:
            write_plots(out, run.problem, grid, history, network, run.dtype, min(ev.batch, 4096))
    return summary


@dataclass
class RunData:
    """A trained run loaded back for analysis (`load_run`)."""

    path: Path
    config: RunConfig
    problem: Problem
    network: eqx.Module
    coeffs: dict
    step: int
    history: list[dict] = field(default_factory=list)
    summary: dict | None = None

    def predict(self, points) -> np.ndarray:
        """Network outputs at ``points`` ``(n, d)`` → ``(n, m)`` (numpy)."""
        dtype = jnp.float64 if self.config.numerics.x64 else jnp.float32
        return predict(self.network, np.asarray(points), self.config.eval.batch, dtype)

    def grid(self, resolution: int | None = None) -> dict[str, np.ndarray]:
        """Fields on a tensor grid: coordinate axes by name, each field and (if known)
        ``<field>_ref`` as arrays of the grid's shape (``indexing="ij"``)."""
        res = resolution or self.config.eval.resolution
        pts, shape = self.problem.domain.grid(res)
        out = {c: pts[:, i].reshape(shape) for i, c in enumerate(self.problem.domain.coords)}
        pred = self.predict(pts)
        for i, n in enumerate(self.problem.out_names):
            out[n] = pred[:, i].reshape(shape)
        if self.problem.reference is not None:
            dtype = jnp.float64 if self.config.numerics.x64 else jnp.float32
            ref = predict(self.problem.reference, pts, self.config.eval.batch, dtype)
            for i, n in enumerate(self.problem.out_names):
                out[f"{n}_ref"] = ref[:, i].reshape(shape)
        return out

    def loss_history(self) -> dict[str, np.ndarray]:
        """``{"step": ..., "loss": ..., <term>: ...}`` arrays from ``metrics.jsonl``."""
        recs = [h for h in self.history if "loss" in h]
        out = {"step": np.array([h["step"] for h in recs]),
               "loss": np.array([h["loss"] for h in recs], dtype=float)}
        for k in recs[0]["terms"] if recs else []:
            out[k] = np.array([h["terms"][k] for h in recs], dtype=float)
        return out


def load_run(run_dir: str | Path, last: bool = False) -> RunData:
    """Loads a run directory: config, problem, trained network and coefficients (from the
    newest valid checkpoint; a run with ``eval.keep_best`` from ``best/``, unless ``last``),
    history and summary. Needs no mesh.

    A float64 run (``numerics.x64: true``) needs ``jax.config.update("jax_enable_x64",
    True)`` first, else a `RunDirError` says so. It does not switch float64 on itself:
    the setting is global to the process and changes every array created afterwards, not
    only this run's (a notebook's float32 work would silently turn float64 halfway), so
    the library leaves ``jax.config`` to its caller (the ``pinnkit`` command: `pinnkit.cli.jaxsetup`).
    """
    run_dir = Path(run_dir)
    cfg = read_config(run_dir)
    if cfg.numerics.x64 and not jax.config.read("jax_enable_x64"):
        raise RunDirError(
            f"{run_dir} is a float64 run (numerics.x64: true) but JAX runs in float32: call "
            'jax.config.update("jax_enable_x64", True) before pinnkit.load_run (once per process)'
        )
    if cfg.train.time_windows <= 1:  # checked before the build: a damaged run costs no compilation
        where = model_folder(run_dir, last)
        path, head = ckpt.newest_valid(
            where, f"{run_dir}: no valid checkpoint in {where.name}/; was training started?")
    run = build_run(cfg, with_mesh=False)
    summary = _read_summary(run_dir)
    if cfg.train.time_windows > 1:  # the piecewise model of the windows (pinnkit.train.windows)
        network, coeffs, step = load_windows(run, run_dir)
        return RunData(run_dir, cfg, run.problem, network, coeffs, step, _read_history(run_dir),
                       summary)
    if head["step"] > run.total_steps:  # a run resumed with a larger train.steps keeps config.yaml's
        warnings.warn(f"{path} is at step {head['step']}, past the {run.total_steps} steps of "
                      f"{run_dir / 'config.yaml'} (a run resumed with more steps?)", stacklevel=2)
    params, static = split_model(run)
    params, _ = ckpt.load_model(path, head, params, run.phases, init_extra(run))
    network, coeffs = eqx.combine(params, static)
    return RunData(run_dir, cfg, run.problem, network, coeffs, int(head["step"]),
                   _read_history(run_dir), summary)


def evaluate_dir(run_dir: str | Path, last: bool = False) -> dict:
    """Recomputes the errors of a run directory's model (`load_run`; grid sharded over
    all visible devices)."""
    data = load_run(run_dir, last)
    dtype = jnp.float64 if data.config.numerics.x64 else jnp.float32
    errors, _ = evaluate_sharded(data.network, data.problem, make_mesh(), data.config.eval.resolution,
                                 data.config.eval.batch, dtype, grid=False)
    extra = problem_metrics(data.problem, data.network, data.config.eval.batch, dtype, data.coeffs)
    gauge = {"gauge": data.problem.gauge_map} if data.problem.gauge and errors.get("rel_l2") else {}
    return {"step": data.step, **errors, **gauge, **extra}


def plot_dir(run_dir: str | Path, last: bool = False) -> list[Path]:
    """(Re)draws ``run_dir/plots/*.png`` from the run's model (`load_run`)."""
    data = load_run(run_dir, last)
    dtype = jnp.float64 if data.config.numerics.x64 else jnp.float32
    _, grid = evaluate_sharded(data.network, data.problem, make_mesh(), data.config.eval.resolution,
                               data.config.eval.batch, dtype)
    if not is_main_process():
        return []
    try:
        return write_plots(run_dir, data.problem, grid, data.history, data.network, dtype,
                           min(data.config.eval.batch, 4096))
    except OSError as e:  # a read-only folder, a full disk, plots/ that is a file
        raise RunDirError(f"cannot write the plots in {Path(run_dir) / 'plots'}: {e.strerror or e}. "
                          "Make the folder writable (or copy the run with `pinnkit slim`), "
                          "then plot again") from None


__all__ = ["RunData", "load_run", "train_to_dir", "evaluate_dir", "plot_dir", "versions"]
