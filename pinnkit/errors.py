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


def name_list(names, limit: int = 12) -> str:
    """``a, b, c`` for a short list of names; the first ``limit`` and "... and N more" for
    a long one (a polygon of 10^4 sides has 10^4 boundary names)."""
    names = [str(n) for n in names]
    if len(names) <= limit:
        return ", ".join(names)
    return f"{', '.join(names[:limit])}, ... and {len(names) - limit} more"


def did_you_mean(name, valid) -> str:
    """`` Did you mean 'x'?`` for the closest of ``valid`` to ``name``, or ``""``."""
    import difflib

    close = difflib.get_close_matches(str(name), [str(v) for v in valid], n=1, cutoff=0.5)
    return f" Did you mean {close[0]!r}?" if close else ""
