"""User-facing errors.

Every mistake a user can make (a config typo, a missing file, an impossible value) is
raised as a `PinnkitError` whose message is one self-contained paragraph: what was
given, where (file and key), what is allowed, and how to fix it. The CLI prints that
paragraph without a traceback and exits with status 2.
"""


class PinnkitError(Exception):
    """Base class of the errors caused by user input rather than by a bug."""


class ConfigError(PinnkitError, ValueError):
    """A configuration file or override is invalid."""


class RunDirError(PinnkitError, OSError):
    """A run directory is missing, incomplete, or cannot be written."""
