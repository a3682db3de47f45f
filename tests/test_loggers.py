"""W&B (offline: never the network) and MLflow (a file store) runs read back: the same
scalars as metrics.jsonl, and the final evaluation's errors logged without
``train.eval_every``; a missing package is one paragraph naming the extra."""

import json
import struct
import sys
from pathlib import Path

import pytest

from pinnkit.errors import ConfigError
from pinnkit.run import loggers
from pinnkit.run.config import load_config
from pinnkit.run.rundir import train_to_dir

ROOT = Path(__file__).resolve().parents[1]
TINY = str(ROOT / "configs" / "tiny" / "poisson2d.yaml")


def _wandb_history(run_dir: Path) -> dict[int, dict]:
    """``{step: {key: value}}`` from an offline run's ``.wandb`` file: W&B's record log
    (a 7-byte header, then 32 KiB blocks of records with a 7-byte header each: CRC,
    length, type 1 full / 2 first / 3 middle / 4 last) of protobuf ``Record``s."""
    from wandb.proto import wandb_internal_pb2 as pb

    (path,) = run_dir.glob("wandb/offline-run-*/run-*.wandb")
    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, block, parts, out = 7, 32768, b"", {}
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # the block's tail is padding
            pos += block - pos % block
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if length == 0 and kind == 0:
            break
        parts += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            rec = pb.Record()
            rec.ParseFromString(parts)
            parts = b""
            if rec.WhichOneof("record_type") == "history":
                items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in rec.history.item}
                out.setdefault(int(items.pop("_step")), {}).update(
                    {k: v for k, v in items.items() if not k.startswith("_")})
    return out


def _expected(run_dir: Path) -> tuple[dict[int, float], dict]:
    recs = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    summary = json.loads((run_dir / "summary.json").read_text())
    return {r["step"]: r["loss"] for r in recs if "loss" in r}, summary


def test_wandb_offline_and_mlflow_file_store_read_back(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("WANDB_MODE", "offline")  # belt and braces: the config says offline too
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    cfg = load_config(TINY, ["train.steps=100", "train.log_every=25", "checkpoint.every=0",
                             "logging.wandb={project: test}", "logging.mlflow={}"])
    out = tmp_path / "run"
    train_to_dir(cfg, out, progress=False, plots=False)
    losses, summary = _expected(out)
    assert sorted(losses) == [0, 25, 50, 75, 99]
    final_u = summary["rel_l2"]["u"]

    hist = _wandb_history(out)
    assert {s: h["loss/total"] for s, h in hist.items() if "loss/total" in h} == losses
    assert hist[100]["eval/rel_l2/u"] == pytest.approx(final_u, rel=1e-12)  # no eval_every set

    client = MlflowClient(tracking_uri=(out / "mlruns").resolve().as_uri())
    (run,) = client.search_runs([client.get_experiment_by_name("pinnkit").experiment_id])
    assert run.info.run_name == "run" and run.info.status == "FINISHED"
    got = {m.step: m.value for m in client.get_metric_history(run.info.run_id, "loss/total")}
    assert got == pytest.approx(losses, rel=1e-12)
    (final,) = client.get_metric_history(run.info.run_id, "eval/rel_l2/u")
    assert (final.step, final.value) == (100, pytest.approx(final_u, rel=1e-12))
    assert run.data.params["train.steps"] == "100"


@pytest.mark.parametrize("key, module, extra", [("wandb", "wandb", "wandb"), ("mlflow", "mlflow", "mlflow"),
                                                ("tensorboard", "tensorboardX", "tensorboard")])
def test_missing_logger_package_is_refused_before_anything_is_written(key, module, extra, tmp_path,
                                                                      monkeypatch):
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if not installed
    value = "true" if key == "tensorboard" else "{}"
    cfg = load_config(TINY, ["train.steps=10", f"logging.{key}={value}"])
    with pytest.raises(ConfigError) as err:
        train_to_dir(cfg, tmp_path / "run", progress=False, plots=False)
    msg = str(err.value)
    assert f"logging.{key} needs the {module} package" in msg and f"pinnkit[{extra}]" in msg
    assert not (tmp_path / "run").exists()


def test_wanted_follows_the_config():
    cfg = load_config(TINY, ["logging.tensorboard=true", "logging.mlflow={experiment: x}"])
    assert loggers.wanted(cfg.logging) == ["tensorboard", "mlflow"]
    assert loggers.wanted(load_config(TINY).logging) == []
