"""SIGTERM, SIGUSR1 and SIGINT for ``pinnkit train``, honoured even inside XLA.

Python runs a signal handler only when the main thread returns to the interpreter,
which it does not do while XLA compiles or while it waits on a computation that never
finishes. So the handler here only wakes a watcher thread (`signal.set_wakeup_fd`: the
interpreter's C-level handler writes the signal number to a pipe, from whichever thread
received it), and the watcher decides:

- **before the run folder is written** (`Stop.deferring` not yet called: reading the
  config, building, planning memory, compiling the plan): nothing needs saving, so the
  process exits at once with status 128 + signal number;
- **while training**: the training loop is asked to checkpoint and stop at the next chunk
  boundary (the `Stop` object is its ``should_stop``). If the process has not ended
  ``grace`` seconds later (``--grace-period``; a chunk that does not finish, a hung
  evaluation), it exits anyway with status 128 + signal number. Checkpoints are written
  atomically, so the newest one on disk stays valid: ``--resume auto`` continues from it;
- a second SIGINT (Ctrl-C twice) exits at once.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading

SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT)


def _say(text: str) -> None:
    print(f"\npinnkit: {text}", file=sys.stderr, flush=True)


class Stop:
    """The signal state of one ``pinnkit train``; callable as the loop's ``should_stop``."""

    def __init__(self, grace: float, out: str):
        self.grace = float(grace)
        self.out = out
        self.signum: int | None = None
        self.deferred = False
        self._old: dict = {}
        self._pipe: tuple[int, int] | None = None
        self._old_fd = -1

    def __call__(self) -> bool:
        return self.signum is not None

    def deferring(self) -> None:
        """From now on a signal asks for a checkpoint first (the run folder is written)."""
        self.deferred = True

    def install(self) -> Stop:
        r, w = os.pipe()
        os.set_blocking(w, False)
        self._pipe = (r, w)
        for s in SIGNALS:
            self._old[s] = signal.signal(s, lambda signum, frame: None)  # the watcher acts
        self._old_fd = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        threading.Thread(target=self._watch, args=(r,), name="pinnkit-signals", daemon=True).start()
        return self

    def uninstall(self) -> None:
        if self._pipe is None:
            return
        signal.set_wakeup_fd(self._old_fd)
        for s, h in self._old.items():
            signal.signal(s, h)
        os.close(self._pipe[1])  # the watcher reads end-of-file and returns
        self._pipe = None

    def _watch(self, fd: int) -> None:
        with os.fdopen(fd, "rb", buffering=0) as f:
            while data := f.read(1):
                if data[0] in SIGNALS:
                    self._on(signal.Signals(data[0]))

    def _on(self, sig: signal.Signals) -> None:
        code = 128 + int(sig)
        if not self.deferred:
            _say(f"received {sig.name} before training started; nothing was written. Exiting.")
            os._exit(code)
        if self.signum is not None:
            if sig == signal.SIGINT:
                _say(f"second {sig.name}: exiting now; the newest checkpoint in {self.out} is kept.")
                os._exit(code)
            return
        self.signum = int(sig)
        _say(f"received {sig.name}; finishing the current chunk, then writing a checkpoint "
             f"(exiting anyway in {self.grace:g} s, --grace-period)")
        timer = threading.Timer(self.grace, self._expire, args=(sig,))
        timer.daemon = True
        timer.start()
        # Last resort if no Python thread can run (the GIL held by stuck C code): a C
        # thread that ends the process a little later, without a message.
        self._devnull = open(os.devnull, "w")  # noqa: SIM115 (kept open until exit)
        faulthandler.dump_traceback_later(self.grace + 10, exit=True, file=self._devnull)

    def _expire(self, sig: signal.Signals) -> None:
        _say(f"the run did not stop within --grace-period {self.grace:g} s of {sig.name} (a chunk "
             f"or an evaluation that does not finish); exiting now. The newest checkpoint in "
             f"{self.out} is kept and valid: continue with `pinnkit train --resume auto --out "
             f"{self.out}`.")
        os._exit(128 + int(sig))
