"""Package layout that pyproject.toml cannot say alone: the example configs in ``configs/``
(kept at the repository's top, where the docs and tests use them) are installed as the
package ``pinnkit.examples`` (its subfolders as ``pinnkit.examples.tiny``, ...), in wheels
and editable installs alike. Everything else is in pyproject.toml."""

from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).parent
folders = sorted(p.name for p in (HERE / "configs").iterdir()
                 if p.is_dir() and not p.name.startswith(("_", ".")))
examples = ["pinnkit.examples", *(f"pinnkit.examples.{name}" for name in folders)]

setup(
    packages=[*find_packages(include=["pinnkit", "pinnkit.*"]), *examples],
    package_dir={"pinnkit.examples": "configs"},
    # the configs and the files they read (pinnkit/cli/examples.py DATA_SUFFIXES)
    package_data={name: ["*.yaml", "*.obj", "*.stl", "*.npz"] for name in examples},
)
