"""Live logging (`pinnkit.run.live`): TensorBoard event files written beside
``metrics.jsonl`` and read back (TFRecord framing and tensorboardX's protobufs, no
TensorBoard needed), with the per-term scalars equal to the JSONL record; the follower's
resume rule (wait for the cut file, skip what the interrupted process wrote)."""

import json
import os
import struct
from pathlib import Path

import pytest

from pinnkit.run.config import load_config
from pinnkit.run.live import AbstractScalarWriter, RecordFollower, _Source, record_scalars
from pinnkit.run.rundir import train_to_dir

ROOT = Path(__file__).resolve().parents[1]


def read_events(folder: Path) -> dict[str, dict[int, float]]:
    """``{tag: {step: value}}`` of every scalar in the event files of ``folder``."""
    from tensorboardX.proto import event_pb2

    out: dict[str, dict[int, float]] = {}
    for f in sorted(folder.glob("events.out.tfevents.*")):
        data = f.read_bytes()
        pos = 0
        while pos < len(data):  # record: u64 length, u32 crc, payload, u32 crc
            (n,) = struct.unpack("<Q", data[pos:pos + 8])
            ev = event_pb2.Event.FromString(data[pos + 12:pos + 12 + n])
            pos += 12 + n + 4
            for v in ev.summary.value:
                value = v.simple_value if v.HasField("simple_value") else v.tensor.float_val[0]
                out.setdefault(v.tag, {})[ev.step] = value
    return out


def test_tensorboard_event_files_hold_the_jsonl_scalars(tmp_path):
    pytest.importorskip("tensorboardX")
    cfg = load_config(  # soft boundary: two terms
        ROOT / "configs" / "tiny" / "poisson2d_soft.yaml",
        ["train.steps=40", "train.chunk=10", "train.log_every=10", "train.eval_every=20",
         "checkpoint.every=0", "logging.tensorboard=true", "logging.every_s=0.2"])
    out = tmp_path / "run"
    train_to_dir(cfg, out, progress=False, plots=False)
    events = read_events(out / "tensorboard")
    recs = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    losses = [r for r in recs if "loss" in r]
    assert [r["step"] for r in losses] == [0, 10, 20, 30, 39]
    for r in losses:
        assert events["loss/total"][r["step"]] == pytest.approx(r["loss"], rel=1e-6)
        for term, v in r["terms"].items():  # every term, at every logged step
            assert events[f"loss/{term}"][r["step"]] == pytest.approx(v, rel=1e-6)
        assert set(r["terms"]) == {"pde", "boundary"}
        assert events["learning_rate"][r["step"]] == pytest.approx(cfg.optim.phases[0].lr)
    evals = [r for r in recs if "eval" in r]
    assert evals and all(events["eval/rel_l2/u"][r["step"]] == pytest.approx(r["eval"]["rel_l2"]["u"])
                         for r in evals)


class _Memory(AbstractScalarWriter):
    def __init__(self):
        self.got = []

    def scalars(self, step, values):
        self.got.append((step, dict(values)))

    def close(self):
        pass


def _lines(path: Path, steps, replace=False):
    text = "".join(json.dumps({"step": s, "phase": 0, "loss": float(s), "terms": {"pde": s / 2}}) + "\n"
                   for s in steps)
    if replace:  # as the loop does on resume: a new file (atomic rename)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    else:
        with open(path, "a") as fh:
            fh.write(text)


def test_follower_on_resume_skips_the_interrupted_records(tmp_path):
    path = tmp_path / "metrics.jsonl"
    _lines(path, [0, 10, 20, 30])  # the interrupted run got to step 30; its checkpoint: 20
    w = _Memory()
    src = _Source(path, offset=0, skip_below=20, wait_inode=path.stat().st_ino)
    f = RecordFollower([src], lambda r: w.scalars(r["step"], record_scalars(r)))
    f.poll()
    assert w.got == []  # the old file: the loop has not cut it yet
    _lines(path, [0, 10], replace=True)  # cut back before the checkpoint step 20
    _lines(path, [20, 30])  # the resumed run's new records
    with open(path, "a") as fh:
        fh.write('{"step": 40, "pha')  # a line being written: not read yet
    f.poll()
    assert [s for s, _ in w.got] == [20, 30] and w.got[0][1] == {"loss/total": 20.0, "loss/pde": 10.0}
    with open(path, "a") as fh:
        fh.write('se": 0, "loss": 1.0, "terms": {}}\n')
    f.poll()
    assert [s for s, _ in w.got] == [20, 30, 40]


def test_window_records_get_global_steps(tmp_path):
    path = tmp_path / "metrics.jsonl"
    _lines(path, [0, 5])
    w = _Memory()
    RecordFollower([_Source(path, offset=100)], lambda r: w.scalars(r["step"], record_scalars(r))).poll()
    assert [s for s, _ in w.got] == [100, 105]
