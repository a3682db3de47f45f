"""scripts/ablate.py: the table aggregates seeds per config (mean, min–max)."""

import csv
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _module():
    spec = importlib.util.spec_from_file_location("ablate", ROOT / "scripts" / "ablate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_table_means_and_ranges(tmp_path):
    def row(config, seed, err, wall, rate):
        return {"config": config, "seed": seed, "rel_l2_u": err, "wall_s": wall, "steps": 5,
                "steps_per_s": rate, "outcome": "successful"}

    rows = [row("base", 0, 1e-2, 10.0, 2.0), row("base", 1, 3e-2, 30.0, 4.0),
            row("no_x", 0, 1e-1, 5.0, None)]
    text = _module().write_table(rows, tmp_path, "load a", "load b", "cmd")
    assert "| base | 2 | 2.00e-02 (1.00e-02–3.00e-02) | 20 | 3.0 |" in text
    assert "| no_x | 1 | 1.00e-01 (1.00e-01–1.00e-01) | 5 | – |" in text
    with open(tmp_path / "ablation.csv") as f:
        assert [r["config"] for r in csv.DictReader(f)] == ["base", "base", "no_x"]
    assert (tmp_path / "ablation.png").stat().st_size > 0


def test_cpu_seconds_get_a_column_when_measured(tmp_path):
    rows = [{"config": "a", "seed": s, "rel_l2_u": 1e-3, "wall_s": 10.0, "cpu_s": c, "steps": 5,
             "steps_per_s": 1.0, "outcome": "successful"} for s, c in [(0, 12.0), (1, 16.0)]]
    text = _module().write_table(rows, tmp_path, "load a", "load b", "cmd")
    assert "| a | 2 | 1.00e-03 (1.00e-03–1.00e-03) | 10 | 1.0 | 14 |" in text
    assert "CPU s (mean)" in text
