"""Refactors change no number: short runs' per-step losses against the golden record
(`scripts/golden.py`; recorded on main before the package-layout move, and again when the
``pinnkit`` command turned XLA:CPU's YNNPACK fusions off, which changes float32 rounding:
`pinnkit.cli.jaxsetup.xla_cpu_flags`).

On the machine that recorded the file the comparison is bitwise; on another CPU only the
first losses are compared (rtol 1e-4: float32 rounding of another instruction set), since
later steps of a float32 trajectory legitimately drift there. The whole record is checked
with ``python scripts/golden.py check`` (about 8 minutes on 2 cores); this test covers
one case per kind of run (Adam -> L-BFGS, natural gradient, adaptive weights, windows
with hard restarts, float64, the sphere, an inverse problem, the expression language).
"""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("golden", ROOT / "scripts" / "golden.py")
golden = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(golden)

RECORD = json.loads(golden.RECORD.read_text())
SUBSET = ["poisson2d", "burgers_f64", "climate_tracer_window", "windows/climate_tracer",
          "tiny/inverse_ebm", "tiny/climate_sw2", "tiny/expr_biharmonic", "tiny/ns_kovasznay"]


def test_record_covers_every_tiny_config():
    tiny = {f"tiny/{p.stem}" for p in (ROOT / "configs" / "tiny").glob("*.yaml")}
    assert tiny <= set(RECORD["cases"]), sorted(tiny - set(RECORD["cases"]))


@pytest.mark.slow
@pytest.mark.parametrize("name", SUBSET)
def test_loss_history_unchanged(name):
    case = RECORD["cases"][name]
    exact = golden.same_machine(golden.case_fingerprint(RECORD, name), golden.fingerprint())
    got = golden.run_case(case["config"], case["overrides"])
    assert golden.compare(name, case, got, exact) == []
    if exact:
        assert got["rel_l2"] == case["rel_l2"]


def test_compare_detects_a_one_ulp_change():
    case = RECORD["cases"]["tiny/poisson2d"]
    import numpy as np

    w, s, v = case["losses"][5]
    bumped = dict(case, losses=[*case["losses"][:5], [w, s, float(np.nextafter(v, np.inf))],
                                *case["losses"][6:]])
    assert golden.compare("x", case, bumped, exact=True)
    assert golden.compare("x", case, case, exact=True) == []


def test_fingerprint_keys_a_record_lacks_are_not_compared():
    here = golden.fingerprint()
    assert {"cpu_id", "caches"} <= set(here)
    older = {k: v for k, v in here.items() if k not in ("cpu_id", "caches")}
    assert golden.same_machine(older, here) and golden.same_machine(here, here)
    assert not golden.same_machine({**here, "caches": here["caches"] + " L4 1K"}, here)
