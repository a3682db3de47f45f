"""Loading a user's Python callable named as ``path/to/file.py:name`` or ``package.module:name``."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from pathlib import Path

from .errors import ConfigError


def is_callable_spec(value: object) -> bool:
    return isinstance(value, str) and ":" in value and not value.startswith(("http:", "https:"))


def load_callable(spec: str, *, base_dir: Path | None = None, what: str = "callable"):
    """Returns the object named by ``spec`` (``file.py:name`` or ``module:name``).

    A relative file path is tried against ``base_dir`` (the config's folder) first, then
    the current directory.
    """
    path_s, _, attr = spec.rpartition(":")
    if not path_s or not attr:
        raise ConfigError(
            f"{what} {spec!r} is not of the form 'path/to/file.py:name' or 'module:name'"
        )
    if path_s.endswith(".py"):
        candidates = [Path(path_s)]
        if base_dir is not None and not Path(path_s).is_absolute():
            candidates.insert(0, Path(base_dir) / path_s)
        path = next((p for p in candidates if p.is_file()), None)
        if path is None:
            tried = ", ".join(str(p) for p in candidates)
            raise ConfigError(f"{what} {spec!r}: file not found (tried {tried})")
        mod_name = f"pinnkit_user_{abs(hash(str(path.resolve())))}"
        module = sys.modules.get(mod_name)
        if module is None:
            s = importlib.util.spec_from_file_location(mod_name, path)
            module = importlib.util.module_from_spec(s)
            sys.modules[mod_name] = module
            try:
                s.loader.exec_module(module)
            except Exception as e:
                del sys.modules[mod_name]
                raise ConfigError(
                    f"{what} {spec!r}: importing {path} failed with {type(e).__name__}: {e}"
                ) from e
    else:
        try:
            module = importlib.import_module(path_s)
        except ImportError as e:
            raise ConfigError(f"{what} {spec!r}: cannot import module {path_s!r} ({e})") from e
    try:
        return getattr(module, attr)
    except AttributeError:
        names = sorted(
            n for n, v in vars(module).items()
            if not n.startswith("_") and callable(v) and not isinstance(v, types.ModuleType)
        )
        raise ConfigError(
            f"{what} {spec!r}: {path_s} has no attribute {attr!r}; it defines {names}"
        ) from None
