"""The installed distribution's version (pyproject.toml), or the source tree's when
pinnkit runs from a checkout that is not installed."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("pinnkit")
except PackageNotFoundError:  # a source tree on sys.path without an install
    __version__ = "0+unknown"
