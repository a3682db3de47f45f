"""No file of the repository cites a repository path that does not exist.

Every tracked text file is scanned for paths under the repository's own top-level
folders (``docs/``, ``configs/``, ``scripts/``, ``pinnkit/``, ``tests/``, ``notebooks/``);
each must name an existing file or folder, or be the prefix of one (``configs/tiny/ns_``
in "``configs/tiny/ns_*.yaml``"). Paths the code builds at run time (the installed
``pinnkit/examples``, user folders such as ``configs/X``) are listed below with why.
"""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEXT = {".md", ".py", ".yaml", ".yml", ".toml", ".ipynb", ".sh", ".cfg", ".txt"}
REF = re.compile(r"(?<![\w./-])((?:docs|configs|scripts|pinnkit|tests|notebooks)/[\w./-]*\w)")
# Not repository files: names a user or the installer makes.
NOT_FILES = {
    "configs/X",  # `pinnkit examples copy` usage text: a user's folder
    "configs/p.yaml",  # a config-error example in a docstring
    "pinnkit/alive",  # a key in jax.distributed's key-value store
    "pinnkit/examples/tiny/poisson2d.yaml",  # inside the installed wheel (setup.py maps configs/)
}


def _tracked() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    files = [ROOT / f for f in out.stdout.split() if Path(f).suffix in TEXT or f.startswith(".ci/")]
    return [f for f in files if f != Path(__file__).resolve()]  # its own examples are not citations


def _exists(ref: str) -> bool:
    path = ROOT / ref
    return path.exists() or any(path.parent.glob(path.name + "*"))


def test_every_cited_repository_path_exists():
    missing = {}
    for f in _tracked():
        try:
            text = f.read_text()
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        for m in REF.finditer(text):
            ref = m.group(1).rstrip(".")
            if ref not in NOT_FILES and not _exists(ref):
                missing.setdefault(ref, []).append(str(f.relative_to(ROOT)))
    assert not missing, missing


def test_the_check_finds_a_missing_path():
    """The check can fail: a path that is not there is reported."""
    assert not _exists("docs/no_such_page.md") and _exists("docs/architecture")
