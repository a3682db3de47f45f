"""Multi-process (multi-host) runs on JAX's own multi-controller runtime.

Every process runs the same program on its own devices; `jax.distributed` connects
them (a coordinator on process 0, heartbeats, the key-value store) and collectives run
over NCCL (GPU) or gloo (CPU). pinnkit adds only what a training loop needs on top:

- `detect` / `initialize`: who am I, from explicit flags (any launcher) or SLURM;
- `agree_any`: one tiny all-gather so that every process takes the same host-side
  decision (stop on a signal) at the same step;
- `broadcast_from_main`, `barrier`: process 0 decides, the others follow;
- `to_host`: fetch replicated arrays without any communication (for checkpoints);
- `Watchdog`: exit with an error when a chunk makes no progress (a peer that hangs
  while its heartbeats still arrive).

A process that *dies* is detected by the runtime itself: the coordination service
misses its heartbeats for ``heartbeat_timeout`` seconds and tells every other process.
pinnkit gives the runtime's client a callback for that (`peer_lost`) instead of its
default (a C++ fatal log and an abort): each survivor prints one paragraph naming the
lost process and how to resume, and exits with status 70, so a job never waits forever
on a dead peer.

Nothing here writes `jax.config` (the CLI does, `pinnkit.cli.jaxsetup`); `initialize`
starts the runtime, called by the CLI and scripts before any computation.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass

import jax
import numpy as np

from ..errors import PinnkitError


class DistributedError(PinnkitError, RuntimeError):
    """The process group is misconfigured (flags, SLURM variables, coordinator)."""


@dataclass(frozen=True)
class ProcessSpec:
    """Where this process sits in the job.

    - `num_processes`, `process_id`: ``0 <= process_id < num_processes``.
    - `coordinator`: ``HOST:PORT`` of process 0's coordination service; ``None`` lets
      JAX derive it (SLURM: first node of the step, port from the job id).
    - `source`: ``"single"``, ``"flags"`` or ``"slurm"``.
    """

    num_processes: int = 1
    process_id: int = 0
    coordinator: str | None = None
    source: str = "single"

    @property
    def multi(self) -> bool:
        return self.num_processes > 1


def _int_env(env: Mapping[str, str], *names: str) -> int | None:
    for n in names:
        v = env.get(n, "").strip()
        if v:
            try:
                return int(v)
            except ValueError:
                raise DistributedError(f"environment variable {n}={v!r} is not an integer") from None
    return None


def detect(
    coordinator: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    env: Mapping[str, str] | None = None,
) -> ProcessSpec:
    """The process group, from explicit values (all three, e.g. CLI flags) or else SLURM.

    SLURM: inside an ``srun`` step (``SLURM_STEP_ID`` set) with more than one task
    (``SLURM_STEP_NUM_TASKS`` > 1), each task is one process, ``SLURM_PROCID`` its id;
    JAX derives the coordinator (first node of the step) and, on GPUs, gives each task
    the GPU numbered ``SLURM_LOCALID``. A batch script that runs ``pinnkit`` without
    ``srun`` is a single process. Anything else
    (no flags, no SLURM) is a single process and needs no setup.
    """
    env = os.environ if env is None else env
    given = [coordinator is not None, num_processes is not None, process_id is not None]
    if any(given):
        if not all(given):
            raise DistributedError(
                "--coordinator, --num-processes and --process-id go together: pass all three "
                "(e.g. --coordinator node0:12345 --num-processes 2 --process-id 0 on the first "
                "process, --process-id 1 on the second), or none of them under SLURM"
            )
        if num_processes < 1 or not 0 <= process_id < num_processes:
            raise DistributedError(
                f"--process-id {process_id} with --num-processes {num_processes}: ids run from "
                f"0 to {max(num_processes - 1, 0)}, one per process"
            )
        if ":" not in coordinator or not coordinator.rsplit(":", 1)[1].isdigit():
            raise DistributedError(
                f"--coordinator {coordinator!r}: expected HOST:PORT of process 0, e.g. node0:12345"
            )
        src = "flags" if num_processes > 1 else "single"
        return ProcessSpec(num_processes, process_id, coordinator, src)
    ntasks = _int_env(env, "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS")
    if ntasks is not None and ntasks > 1 and "SLURM_PROCID" in env and "SLURM_STEP_ID" in env:
        procid = _int_env(env, "SLURM_PROCID")
        return ProcessSpec(ntasks, procid, env.get("JAX_COORDINATOR_ADDRESS"), "slurm")
    return ProcessSpec()


def initialize(
    spec: ProcessSpec,
    *,
    heartbeat_timeout: int = 60,
    init_timeout: int = 300,
    shutdown_timeout: int = 60,
) -> None:
    """Starts `jax.distributed` for a multi-process ``spec`` (a single process: nothing).

    Must run before any JAX computation, after the caller has set CPU collectives to
    gloo and turned JAX's preemption service off (`pinnkit.cli.jaxsetup.multiprocess_options`:
    pinnkit writes `jax.config` only in the CLI); pinnkit handles SIGTERM/SIGUSR1 itself
    and agrees on the stop step with `agree_any`, which also covers signals that reach
    only some processes.

    **Arguments:**
    - `heartbeat_timeout`: seconds without heartbeats after which a process counts as
      dead and the runtime terminates the others (bounded failure time).
    - `init_timeout`: seconds to wait for all processes to connect.
    - `shutdown_timeout`: seconds a finishing process waits for the others at exit.
    """
    if not spec.multi:
        return
    kwargs = dict(
        initialization_timeout=init_timeout,
        heartbeat_timeout_seconds=heartbeat_timeout,
        shutdown_timeout_seconds=shutdown_timeout,
    )
    try:
        if spec.source == "slurm":
            # JAX reads the node list, task ids and (GPU) the local device of each task.
            jax.distributed.initialize(
                spec.coordinator, spec.num_processes, spec.process_id,
                cluster_detection_method="slurm", **kwargs,
            )
        else:
            jax.distributed.initialize(
                spec.coordinator, spec.num_processes, spec.process_id, **kwargs
            )
    except (RuntimeError, ValueError) as e:
        raise DistributedError(
            f"process {spec.process_id}/{spec.num_processes} could not join the job "
            f"(coordinator {spec.coordinator or 'from SLURM'}, {spec.source}): {e}. Check that "
            "every process got the same coordinator and process count, that process 0 is "
            "running, and that the port is reachable (no firewall, no HTTP(S)_PROXY)."
        ) from None
    PeerWatch.start(spec.process_id, heartbeat_timeout)


PEER_LOST_EXIT = 70


def lost_process_message(detail: str, me: int | None = None, count: int | None = None) -> str:
    """The paragraph a survivor prints when a peer is gone (``detail``: what noticed it,
    e.g. a collective's error text, naming ``task N``)."""
    me = jax.process_index() if me is None else me
    count = jax.process_count() if count is None else count
    found = re.findall(r"task[:_ ]?(\d+)", detail)
    lost = sorted({int(t) for t in found} - {me})
    if not lost and count == 2:  # a collective's error (gloo names an address): the one peer
        lost = [1 - me]
    who = (f"process {', '.join(map(str, lost))}" if lost
           else "another process of the job (or the coordinator, process 0)")
    first = " ".join(detail.split())[:300]
    return (
        f"pinnkit: error: process {me} of {count}: lost {who}, "
        f"which stopped responding (killed, out of memory, or its node failed). This process "
        f"stops too (exit {PEER_LOST_EXIT}); every checkpoint already written is valid. Restart "
        f"the whole job with the same --out and `--resume auto` to continue from the newest "
        f"one. [{first}]"
    )


class PeerWatch:
    """pinnkit's own heartbeats through the runtime's key-value store, faster than the
    runtime's: each process writes a counter every second and reads the others'; a peer
    whose counter stops for half the heartbeat timeout (or a store that stops answering:
    process 0 is gone) ends this process with `lost_process_message` and status 70,
    before the runtime's own detection would abort it with a C++ fatal log. A process
    that ends normally first marks itself done (`finish`)."""

    _active: PeerWatch | None = None
    PREFIX = "pinnkit/alive/"

    def __init__(self, client, me: int, limit: float):
        self.client, self.me, self.limit = client, me, limit
        self._stop = threading.Event()

    @classmethod
    def start(cls, me: int, heartbeat_timeout: float) -> None:
        """Starts watching (after `jax.distributed.initialize`; no backend is touched, so
        device options set afterwards still apply)."""
        from jax._src import distributed as jd  # the runtime's client (no public handle)

        client = getattr(jd.global_state, "client", None)
        if client is None or cls._active is not None:
            return
        cls._active = watch = cls(client, me, max(3.0, heartbeat_timeout / 2))
        threading.Thread(target=watch._run, name="pinnkit-peers", daemon=True).start()

    @classmethod
    def finish(cls) -> None:
        """Marks this process as done: its peers stop watching it."""
        watch, cls._active = cls._active, None
        if watch is None:
            return
        watch._stop.set()
        try:
            watch.client.key_value_set(f"{cls.PREFIX}{watch.me}", "done", allow_overwrite=True)
        except Exception:  # the store is gone: nobody is watching any more
            pass

    def _run(self) -> None:
        seen: dict[str, tuple[str, float]] = {}
        beat = 0
        while not self._stop.wait(1.0):
            try:
                beat += 1
                self.client.key_value_set(f"{self.PREFIX}{self.me}", str(beat), allow_overwrite=True)
                values = dict(self.client.key_value_dir_get(self.PREFIX))
            except Exception as e:
                if self._stop.is_set():
                    return
                self._lost(f"the coordination service (process 0) stopped answering: task 0 ({e})")
            now = time.monotonic()
            for key, value in values.items():
                peer = key.rsplit("/", 1)[-1]
                if peer == str(self.me) or value == "done":
                    seen.pop(peer, None)
                    continue
                if peer not in seen or seen[peer][0] != value:
                    seen[peer] = (value, now)
                elif now - seen[peer][1] > self.limit:
                    self._lost(f"no pinnkit heartbeat from task {peer} for {self.limit:.0f} s")

    def _lost(self, detail: str) -> None:
        if self._stop.is_set():
            return
        from jax._src import distributed as jd

        text = lost_process_message(detail, self.me, jd.global_state.num_processes)
        print("\n" + text, file=sys.stderr, flush=True)
        os._exit(PEER_LOST_EXIT)


def process_count() -> int:
    return jax.process_count()


def agree_any(flag: bool) -> bool:
    """True on every process if ``flag`` is true on any process.

    A collective: every process must call it at the same point of the program.
    """
    if jax.process_count() == 1:
        return bool(flag)
    from jax.experimental import multihost_utils

    return bool(np.any(multihost_utils.process_allgather(np.int32(bool(flag)))))


def broadcast_from_main(value):
    """Process 0's ``value`` (a pytree of numbers / arrays of the same shape on every
    process), on every process. A collective."""
    if jax.process_count() == 1:
        return value
    from jax.experimental import multihost_utils

    return multihost_utils.broadcast_one_to_all(value)


def allgather_host(x: np.ndarray) -> np.ndarray:
    """Stacks a host array from every process: shape ``(n_processes, *x.shape)``."""
    x = np.asarray(x)
    if jax.process_count() == 1:
        return x[None]
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(x))


def barrier(name: str) -> None:
    """Waits until every process reaches the barrier called ``name``."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)


def to_host(tree):
    """Numpy copies of the arrays of ``tree``. Replicated global arrays are read from a
    local device (no communication), so process 0 alone may call this."""

    def one(x):
        if isinstance(x, jax.Array):
            if not x.is_fully_addressable:
                if not x.is_fully_replicated:
                    raise ValueError("to_host: a sharded array spans other processes")
                x = x.addressable_data(0)
            return np.asarray(x)
        return x

    return jax.tree_util.tree_map(one, tree)


class Watchdog:
    """Ends the process with status 70 (and a message) if `arm`ed for longer than
    ``timeout`` seconds without `disarm`.

    Guards each training chunk of a multi-process run: a dead peer is caught by the
    runtime's heartbeats, but a peer that hangs (a stuck driver, a deadlock) keeps its
    heartbeats going while the collectives wait for it forever.
    """

    EXIT_CODE = 70

    def __init__(self, timeout: float, what: str = "training chunk"):
        self.timeout = float(timeout)
        self.what = what
        self._deadline: float | None = None
        self._cv = threading.Condition()
        self._thread: threading.Thread | None = None

    def arm(self, detail: str = "") -> None:
        if self.timeout <= 0:
            return
        with self._cv:
            self._deadline = time.monotonic() + self.timeout
            self._detail = detail
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="pinnkit-watchdog", daemon=True)
                self._thread.start()
            self._cv.notify()

    def disarm(self) -> None:
        with self._cv:
            self._deadline = None
            self._cv.notify()

    def _run(self) -> None:
        with self._cv:
            while True:
                if self._deadline is None:
                    self._cv.wait()
                    continue
                left = self._deadline - time.monotonic()
                if left > 0:
                    self._cv.wait(left)
                    continue
                self._deadline = None
                print(
                    f"pinnkit: error: process {jax.process_index()}: no progress for "
                    f"{self.timeout:.0f} s in a {self.what} ({self._detail}); another process "
                    "is probably hung or dead. Exiting so that the job does not wait forever; "
                    "resume from the last checkpoint with --resume auto.",
                    file=sys.stderr, flush=True,
                )
                os._exit(self.EXIT_CODE)
