"""What a new user meets at the command line: --version, the shipped examples, a readable
problem list, errors attributed to --set, every offending term named at once."""

import re
from pathlib import Path

import pytest
import yaml

import pinnkit
from pinnkit.cli.examples import DATA_SUFFIXES, copy_examples, example_files, missing_config_hint
from pinnkit.cli.listing import describe, plain
from pinnkit.cli.main import main
from pinnkit.errors import ConfigError
from pinnkit.problems import PROBLEMS
from pinnkit.run.config import load_config

ROOT = Path(__file__).resolve().parents[1]


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"pinnkit {pinnkit.__version__}"
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", pinnkit.__version__)


def test_examples_are_the_repository_configs(tmp_path, capsys):
    shipped = set(example_files())
    in_repo = {str(p.relative_to(ROOT / "configs")) for p in (ROOT / "configs").rglob("*.yaml")}
    assert shipped == in_repo and "tiny/poisson2d.yaml" in shipped
    assert main(["examples"]) == 0
    out = capsys.readouterr().out
    assert "tiny/poisson2d.yaml" in out and "Seconds-long variant" in out
    assert main(["examples", "copy", str(tmp_path / "ex")]) == 0
    copied = tmp_path / "ex" / "tiny" / "climate_tracer.yaml"
    assert copied.read_text() == (ROOT / "configs" / "tiny" / "climate_tracer.yaml").read_text()
    load_config(copied)  # its `base: ../climate_tracer.yaml` resolves in the copy
    assert main(["examples", "copy", str(tmp_path / "ex")]) == 2  # no silent overwrite
    written = copy_examples(tmp_path / "ex", overwrite=True)
    data = {str(p.relative_to(ROOT / "configs")) for s in DATA_SUFFIXES
            for p in (ROOT / "configs").rglob(f"*{s}")}
    assert data and {str(p.relative_to(tmp_path / "ex")) for p in written} == shipped | data


def test_missing_example_config_says_how_to_get_it(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["train", "configs/tiny/poisson2d.yaml"]) == 2
    err = capsys.readouterr().err
    assert "pinnkit examples copy configs" in " ".join(err.split()) and "Traceback" not in err
    assert missing_config_hint("nothing/like/this.yaml") is None


def test_problem_list_is_plain_text(capsys):
    assert main(["problems"]) == 0
    out = capsys.readouterr().out
    assert "$" not in out and "\\" not in out and "``" not in out
    assert "[0, 1]×[-1, 1)" in out  # allen_cahn's domain, from $[0, 1]\times[-1, 1)$
    for name, factory in PROBLEMS.items():
        text = describe(factory)
        assert text and not text.endswith(":"), name  # a sentence, not cut at a colon
    assert "ζ = Δ_Sψ" in describe(PROBLEMS["rossby_haurwitz"])  # the equation it introduces
    assert plain(r"$e^{-2\nu t}\sin x$") == "e^(-2ν t) sin x"


def test_set_errors_name_the_override(tmp_path):
    cfg = ROOT / "configs" / "tiny" / "poisson2d.yaml"
    with pytest.raises(ConfigError, match=r"^--set train\.step=10: unknown key 'train\.step'"):
        load_config(cfg, ["train.steps=20", "train.step=10"])
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**yaml.safe_load(cfg.read_text()), "train": {"steps": 0}}))
    with pytest.raises(ConfigError, match=f"^{re.escape(str(bad))}: train.steps"):  # the file's own error
        load_config(bad, ["train.chunk=5"])


def test_divisibility_error_names_every_term(capsys):
    cfg = str(ROOT / "configs" / "tiny" / "burgers.yaml")
    rc = main(["train", cfg, "--devices", "4", "--dry-run", "--set", "sampler.batch.pde=250",
               "--set", "sampler.batch.initial=63"])
    err = " ".join(capsys.readouterr().err.split())
    assert rc == 2 and "sampler.batch.pde=250" in err and "sampler.batch.initial=63" in err
    assert "boundary" not in err  # 64 divides by 4


def test_example_descriptions_are_whole_sentences_without_issue_numbers():
    from pinnkit.cli.examples import _summary

    text = "# P1 in float64 to rel. L2 <= 1e-8 (Kiyani et al. 2025,\n# e.g. here): a net. More.\nx: 1\n"
    assert _summary(text) == "P1 in float64 to rel. L2 <= 1e-8 (Kiyani et al. 2025, e.g. here): a net."
    assert _summary("\n# No full stop\n# at all\n\n# later block.\n") == "No full stop at all"
    for path in (ROOT / "configs").rglob("*.yaml"):
        head = _summary(path.read_text())
        assert head and head[-1] in ".!?" or len(head.split()) < 40, path
        header = "".join(ln for ln in path.read_text().splitlines(True) if ln.startswith("#"))
        assert not re.search(r"\b(issue|session)s?\b\s*\d", header, re.I), path


def test_unknown_problem_suggests_the_closest_name():
    from pinnkit.run.build import build_run

    cfg = load_config(ROOT / "configs" / "tiny" / "poisson2d.yaml", ["problem.name=poison2d"])
    with pytest.raises(ConfigError, match=r"unknown problem 'poison2d'\. Did you mean 'poisson2d'\?"):
        build_run(cfg, with_mesh=False)
    cfg = load_config(ROOT / "configs" / "tiny" / "poisson2d.yaml", ["problem.name=zzzz"])
    with pytest.raises(ConfigError, match=r"unknown problem 'zzzz'\. Built-in"):  # nothing close
        build_run(cfg, with_mesh=False)
