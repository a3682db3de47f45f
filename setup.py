"""Package layout that pyproject.toml cannot say alone: the example configs in ``configs/``
(kept at the repository's top, where the docs and tests use them) are installed as the
package ``pinnkit.examples``, in wheels and editable installs alike. Everything else is
in pyproject.toml."""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["pinnkit", "pinnkit.*"]), "pinnkit.examples"],
    package_dir={"pinnkit.examples": "configs"},
    package_data={"pinnkit.examples": ["*.yaml", "*/*.yaml"]},
)
