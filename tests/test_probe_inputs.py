"""Hostile inputs through the real CLI (scripts/probe_inputs.py): every case exits 2 with
one paragraph that names what is wrong, no traceback, and writes nothing.

The cases run once per module, two processes at a time; the CPU-time bound of the script
(5 s a case) is not asserted here (timings belong to scripts), only the script's hang
guard (a case killed after 120 s fails as "exit -9")."""

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("probe_inputs", ROOT / "scripts" / "probe_inputs.py")
probe = importlib.util.module_from_spec(_spec)
sys.modules["probe_inputs"] = probe  # its dataclasses look their module up there
_spec.loader.exec_module(probe)

NAMES = [c.name for c in probe.cases()]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    found = probe.run_all(workers=2, max_cpu=None, work=tmp_path_factory.mktemp("probe"))
    return {r.case: r for r in found}


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_hostile_input_is_refused(results, name):
    r = results[name]
    assert r.ok, f"{name}: {'; '.join(r.problems)} (first line: {r.first_line!r})"


def test_the_paragraph_check_itself():
    """The checker that every case relies on rejects what it must."""
    assert probe.one_paragraph("pinnkit: error: foo: expected a number.\n(more words)\n") == []
    assert "a traceback" in probe.one_paragraph("Traceback (most recent call last):\n  error: x")
    assert "more than one paragraph" in probe.one_paragraph("pinnkit: error: a\n\nb\n")
    assert "no 'error:'" in probe.one_paragraph("it went wrong\n")
    assert probe.one_paragraph("") == ["no message"]
    assert "13 lines" in probe.one_paragraph("error:\n" + "x\n" * 12)
