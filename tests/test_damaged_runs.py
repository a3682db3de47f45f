"""Issue 38 through the real command line: damaged run folders, unwritable outputs, slim
through links, odd CLI values, configs that are not files, duplicate keys.

Every case exits 2 with one paragraph (no traceback) and writes nothing: the run folder
is byte-identical afterwards and no output appears. One tiny run is trained per module
(`done_run`) and copied per damage. Cases that could block on a FIFO run as a child
process with a timeout, so that a regression fails instead of hanging the suite.
"""

import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from pinnkit.cli.main import main as cli_main
from pinnkit.train import checkpoint as ckpt

ROOT = Path(__file__).resolve().parents[1]
TINY = str(ROOT / "configs" / "tiny" / "poisson2d.yaml")
FAST = ["--set", "train.steps=40", "--set", "train.chunk=20", "--set", "checkpoint.every=20",
        "--quiet", "--no-plots"]
ENV = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONUNBUFFERED": "1"}
SECRET = b"TOPSECRET-38-do-not-copy\n"


def child(*args, timeout=120) -> tuple[int, str]:
    """``(returncode, stderr)`` of one ``pinnkit`` process."""
    r = subprocess.run([sys.executable, "-m", "pinnkit.cli", *map(str, args)], env=ENV,
                       capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stderr


def here(capsys, *args) -> tuple[int, str]:
    """``(returncode, stderr)`` of the CLI run in this process."""
    rc = cli_main([str(a) for a in args])
    return rc, capsys.readouterr().err


def one_paragraph(err: str) -> bool:
    # one block of lines (no blank line), of a paragraph's length: long paths wrap to more lines
    lines = err.strip().splitlines()
    return bool(lines) and lines[0].startswith("pinnkit: error:") and len(lines) <= 12 and \
        all(ln.strip() for ln in lines) and "Traceback" not in err


def flat(err: str) -> str:
    return " ".join(err.split())  # the CLI wraps its paragraph


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.is_symlink() and p.name != ".pinnkit.lock"}


@pytest.fixture(scope="module")
def done_run(tmp_path_factory):
    """A finished tiny run: 40 steps, checkpoints at 20 and 40."""
    out = tmp_path_factory.mktemp("runs") / "run"
    rc, err = child("train", TINY, "--out", out, *FAST, timeout=300)
    assert rc == 0, err
    return out


def copy_run(done_run, tmp_path) -> Path:
    dst = tmp_path / "run"
    shutil.copytree(done_run, dst)
    return dst


# ------------------------------------------------------------------ damaged headers


def _rewrite_headers(run: Path, change) -> None:
    """Applies ``change(header dict) -> JSON value`` to every checkpoint's header line."""
    for path in ckpt.list_checkpoints(run / "checkpoints"):
        line, _, payload = path.read_bytes().partition(b"\n")
        path.write_bytes(json.dumps(change(json.loads(line))).encode() + b"\n" + payload)


HEADERS = {
    "list": (lambda h: [h], "the header is a list, not a JSON object"),
    "number": (lambda h: 42, "the header is an integer, not a JSON object"),
    "string_step": (lambda h: {**h, "step": str(h["step"])}, "header field 'step' is a string"),
    "string_phase": (lambda h: {**h, "phase": "adam"}, "header field 'phase' is a string"),
    "no_phase": (lambda h: {k: v for k, v in h.items() if k != "phase"}, "has no 'phase' field"),
    "negative_step": (lambda h: {**h, "step": -5}, "header field 'step' is -5"),
    "absurd_step": (lambda h: {**h, "step": 10**12}, "step 1000000000000 is not the file name's"),
    "float_step": (lambda h: {**h, "step": 40.5}, "header field 'step' is a number"),
}
COMMANDS = {
    "eval": lambda run, out: ["eval", run],
    "predict": lambda run, out: ["predict", run, "--grid", "5", "--out", out / "u.npz"],
    "slim": lambda run, out: ["slim", run, "--out", out / "small"],
}


@pytest.mark.parametrize("damage", list(HEADERS))
def test_damaged_header_exits_2_in_every_command(done_run, tmp_path, capsys, damage):
    """Each damaged header x eval / predict / slim (and plot / export for two of them):
    exit 2, the paragraph names the file and the damage, nothing written."""
    run = copy_run(done_run, tmp_path)
    change, match = HEADERS[damage]
    _rewrite_headers(run, change)
    before = snapshot(run)
    out = tmp_path / "out"
    out.mkdir()
    commands = dict(COMMANDS)
    if damage in ("list", "no_phase"):
        commands["plot"] = lambda run, out: ["plot", run]
        commands["export"] = lambda run, out: ["export", run, "--out", out / "m.jaxexport"]
    for name, make in commands.items():
        rc, err = here(capsys, *make(run, out))
        where = f"{damage} / {name}: rc {rc}: {err[-1500:]}"
        assert rc == 2 and one_paragraph(err), where
        assert "every checkpoint is damaged" in flat(err) and match in flat(err), where
        assert "step_00000040.eqx" in err, where
        assert snapshot(run) == before and not any(out.iterdir()), where


def test_damaged_header_refused_on_resume(done_run, tmp_path):
    """``train --resume`` (and ``--resume auto``, which would otherwise start afresh over
    the run) refuses a folder whose checkpoints are all damaged."""
    run = copy_run(done_run, tmp_path)
    _rewrite_headers(run, HEADERS["string_step"][0])
    before = snapshot(run)
    for mode in ([], ["auto"]):
        rc, err = child("train", TINY, "--out", run, *FAST, "--resume", *mode)
        assert rc == 2 and one_paragraph(err) and "every checkpoint is damaged" in flat(err), err
        assert snapshot(run) == before


def test_newest_damaged_checkpoint_skipped_with_a_word(done_run, tmp_path, capsys):
    """A damaged newest checkpoint with a valid older one: the older one is used, and the
    damage is named in a warning (not silently)."""
    run = copy_run(done_run, tmp_path)
    newest = ckpt.list_checkpoints(run / "checkpoints")[-1]
    line, _, payload = newest.read_bytes().partition(b"\n")
    newest.write_bytes(json.dumps({**json.loads(line), "step": "40"}).encode() + b"\n" + payload)
    with warnings.catch_warnings():  # the CLI prints it as one `pinnkit: warning:` line
        warnings.simplefilter("always")
        rc = cli_main(["eval", str(run)])
    got = capsys.readouterr()
    assert rc == 0 and '"step": 20' in got.out, got.err
    assert "pinnkit: warning: skipping damaged checkpoint" in got.err, got.err
    assert "step_00000040.eqx: header field 'step' is a string" in flat(got.err), got.err


def test_checkpoint_that_is_a_fifo_or_a_link_out(done_run, tmp_path):
    """A FIFO named like a checkpoint is not opened for reading (no hang), and a link to
    a file outside the folder is not followed, even when that file is a valid
    checkpoint: exit 2 naming it."""
    for kind in ("fifo", "link"):
        run = copy_run(done_run, tmp_path / kind)
        outside = tmp_path / kind / "elsewhere.eqx"
        for i, path in enumerate(ckpt.list_checkpoints(run / "checkpoints")):
            if kind == "link":
                shutil.move(path, outside.with_suffix(f".{i}"))
                path.symlink_to(outside.with_suffix(f".{i}"))
            else:
                path.unlink()
                os.mkfifo(path)
        rc, err = child("eval", run, timeout=60)
        want = "outside its folder" if kind == "link" else "not a regular file"
        assert rc == 2 and one_paragraph(err) and want in flat(err), f"{kind}: {err}"


LINKED = {  # what is moved out of the run folder and linked back in its place
    "checkpoints": ("checkpoints", "outside the run folder"),
    "config": ("config.yaml", "outside the run folder"),
}


@pytest.mark.parametrize("what", list(LINKED))
def test_checkpoints_or_config_linked_out_of_the_run_are_refused(done_run, tmp_path, capsys, what):
    """``checkpoints/`` or ``config.yaml`` replaced by a link out of the run folder (to a
    valid copy): eval, plot, predict, export, slim and train --resume exit 2 with one
    paragraph naming the link, read nothing through it and write nothing."""
    name, match = LINKED[what]
    run = copy_run(done_run, tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.move(run / name, elsewhere / name)
    (run / name).symlink_to(elsewhere / name)
    before, outside = snapshot(run), snapshot(elsewhere)
    out = tmp_path / "out"
    out.mkdir()
    commands = {**COMMANDS, "plot": lambda run, out: ["plot", run],
                "export": lambda run, out: ["export", run, "--out", out / "m.jaxexport"]}
    for cmd, make in commands.items():
        rc, err = here(capsys, *make(run, out))
        where = f"{what} / {cmd}: rc {rc}: {err[-1500:]}"
        assert rc == 2 and one_paragraph(err) and match in flat(err) and name in err, where
        assert snapshot(run) == before and snapshot(elsewhere) == outside and not any(out.iterdir()), where
    rc, err = child("train", TINY, "--out", run, *FAST, "--resume", timeout=180)
    assert rc == 2 and one_paragraph(err) and match in flat(err), f"{what} / resume: {err}"
    assert snapshot(elsewhere) == outside


# ------------------------------------------------------------------ slim


def test_slim_copies_no_byte_through_a_link_and_skips_a_fifo(done_run, tmp_path):
    """A link out of the run folder (at the top and inside plots/) is never read; a FIFO
    is skipped; a user's own file is left behind; each is named in one warning."""
    run = copy_run(done_run, tmp_path)
    secret = tmp_path / "shadow"
    secret.write_bytes(SECRET)
    (run / "notes.txt").symlink_to(secret)
    (run / "plots").mkdir(exist_ok=True)
    (run / "plots" / "u.png").symlink_to(secret)
    os.mkfifo(run / "plots" / "pipe.png")
    os.mkfifo(run / "fifo")
    (run / "mine.md").write_text("my notes\n")
    out = tmp_path / "small"
    rc, err = child("slim", run, "--out", out, timeout=120)
    assert rc == 0, err
    assert "plots/u.png (a link)" in err and "notes.txt (not pinnkit's)" in err, err
    assert "plots/pipe.png (not a regular file)" in err, err
    files = [p for p in out.rglob("*") if p.is_file() or p.is_symlink()]
    assert not any(p.is_symlink() for p in files)
    assert not any(SECRET.strip() in p.read_bytes() for p in files)
    assert {p.name for p in out.iterdir()} == {"config.yaml", "metrics.jsonl", "summary.json",
                                               "checkpoints", "plots"}
    assert not list(tmp_path.glob(".small.slim-*"))  # the hidden build folder is gone


def test_slim_to_an_unwritable_out_writes_nothing(done_run, tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    for out, match in ((tmp_path / "afile" / "small", "is a file, not a folder"),
                       (Path("/proc/pinnkit-38-small"), "cannot write --out")):
        rc, err = here(capsys, "slim", done_run, "--out", out)
        assert rc == 2 and one_paragraph(err) and match in flat(err), err
        assert not out.exists()
    assert not list(tmp_path.glob(".small.slim-*")) and not list(Path("/proc").glob(".pinnkit-38*"))


# ------------------------------------------------------------------ CLI values, outputs


def test_predict_values_refused(done_run, tmp_path, capsys):
    """``--batch`` 0 / -5, reversed, non-finite or repeated ``--grid`` ranges, and a grid
    past the memory plan: exit 2 before any point is computed, nothing written."""
    out = tmp_path / "u.npz"
    cases = {
        ("--grid", "5", "--batch", "0"): "--batch 0: give a positive number",
        ("--grid", "5", "--batch", "-5"): "--batch -5: give a positive number",
        ("--grid", "x=1:0:5"): "needs lo < hi",
        ("--grid", "x=0:nan:5"): "needs finite lo and hi",
        ("--grid", "x=0:1:5,x=0:1:6"): "'x' is given twice",
        ("--grid", "100000"): "10,000,000,000 points need at least",
    }
    for args, match in cases.items():
        rc, err = here(capsys, "predict", done_run, *args, "--out", out)
        assert rc == 2 and one_paragraph(err) and match in flat(err), f"{args}: {err}"
        assert not out.exists()
    rc, err = here(capsys, "predict", done_run, "--grid", "x=0:1:3,y=0.5:0.5:1", "--out", out)
    assert rc == 0 and "3 points on a 3 x 1 grid" in err, err


def test_unwritable_outputs(done_run, tmp_path, capsys):
    """predict / export to a folder or under a file, plot into a run whose plots/ is a file:
    exit 2, one paragraph, nothing written."""
    (tmp_path / "afile").write_text("x")
    cases = [
        (["predict", done_run, "--grid", "5", "--out", tmp_path], "is a folder"),
        (["predict", done_run, "--grid", "5", "--out", tmp_path / "afile" / "u.npz"], "is a file"),
        (["export", done_run, "--out", tmp_path / "afile" / "m.jaxexport"], "is a file"),
        (["predict", done_run, "--grid", "5", "--out", "/proc/pinnkit-38.npz"], "cannot"),
    ]
    for args, match in cases:
        rc, err = here(capsys, *args)
        assert rc == 2 and one_paragraph(err) and match in flat(err), f"{args}: {err}"
    run = copy_run(done_run, tmp_path)
    (run / "plots").write_text("not a folder")
    before = snapshot(run)
    rc, err = here(capsys, "plot", run)
    assert rc == 2 and one_paragraph(err) and "cannot write the plots" in flat(err), err
    assert snapshot(run) == before


def test_csv_error_quotes_no_line_of_the_file(done_run, tmp_path, capsys):
    """A points file that is not pinnkit's (here a passwd-like file) is refused without
    echoing any of its lines: only the column names pinnkit expected."""
    for name, text in {"pw.csv": "root-TOPSECRET:x:0:0:root:/root:/bin/bash\nd:1,2,3\n",
                       "num.csv": "x,y\n0.1,TOPSECRET\n",
                       "cols.csv": "TOPSECRET,y\n0.1,0.2\n"}.items():
        (tmp_path / name).write_text(text)
        rc, err = here(capsys, "predict", done_run, "--points", tmp_path / name, "--out", tmp_path / "p.csv")
        assert rc == 2 and one_paragraph(err) and "TOPSECRET" not in err, f"{name}: {err}"
    assert "column 'x' (coordinate x) is missing" in flat(err)


# ------------------------------------------------------------------ configs


def test_config_that_is_not_a_yaml_file(tmp_path, capsys):
    """A folder, a binary file, an inner duplicate key (block, flow, deep, one line):
    exit 2 naming the file and, for duplicates, both places; no run folder."""
    (tmp_path / "bin.yaml").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00" + bytes(range(256)))
    dups = {
        "block.yaml": ("network:\n  width: 32\n  depth: 2\n  width: 64\n", "at line 2 and line 4"),
        "flow.yaml": ("network: {width: 32, width: 64}\n", "at line 1, column 11 and line 1, column 22"),
        "deep.yaml": ("optim:\n  phases:\n    - {kind: adam, lr: 0.1,\n       lr: 0.2}\n",
                      "'lr' is given twice in the same mapping, at line 3 and line 4"),
    }
    for name, (text, _) in dups.items():
        (tmp_path / name).write_text(text)
    cases = [(ROOT / "configs", "is a folder"), (tmp_path / "bin.yaml", "is a binary file")]
    cases += [(tmp_path / name, match) for name, (_, match) in dups.items()]
    for cfg, match in cases:
        rc, err = here(capsys, "train", cfg, "--out", tmp_path / "out", "--quiet")
        assert rc == 2 and one_paragraph(err) and match in flat(err), f"{cfg}: {err}"
        assert not (tmp_path / "out").exists()


def test_config_fifo_and_device_do_not_block(tmp_path):
    os.mkfifo(tmp_path / "fifo.yaml")
    for cfg, match in ((tmp_path / "fifo.yaml", "is a FIFO"), ("/dev/zero", "is a character device")):
        rc, err = child("train", cfg, "--out", tmp_path / "out", timeout=60)
        assert rc == 2 and one_paragraph(err) and match in flat(err), err
        assert not (tmp_path / "out").exists()


def test_damaged_config_yaml_points_fifo_and_unknown_platform(done_run, tmp_path, capsys):
    """A run's config.yaml that is not a mapping, a FIFO as --points (never opened), an
    export platform jax.export would accept silently: exit 2, one paragraph."""
    run = copy_run(done_run, tmp_path)
    (run / "config.yaml").write_text("just a string\n")
    rc, err = here(capsys, "eval", run)
    assert rc == 2 and one_paragraph(err) and "config.yaml is damaged" in flat(err), err
    os.mkfifo(tmp_path / "pts.csv")
    rc, err = child("predict", done_run, "--points", tmp_path / "pts.csv", "--out", tmp_path / "p.csv",
                    timeout=60)
    assert rc == 2 and one_paragraph(err) and "is not a regular file" in flat(err), err
    rc, err = here(capsys, "export", done_run, "--out", tmp_path / "m.jaxexport", "--platforms", "foo,cpu")
    assert rc == 2 and one_paragraph(err) and "['foo'] not known" in flat(err), err
    assert not (tmp_path / "m.jaxexport").exists() and not (tmp_path / "p.csv").exists()
