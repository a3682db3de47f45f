"""Loading a user's Python callable named in a config: ``path/to/file.py:name`` or
``package.module:name``.

A config is data that may come from someone else, so what it can reach is limited:

- ``path/to/file.py:name`` runs that file (path relative to the config, then the current
  folder), as documented in docs/config.md;
- ``package.module:name`` only for a module that an installed distribution declares a
  pinnkit provider, with an entry point in the group `PROVIDER_GROUP` (and pinnkit's own
  ``pinnkit.problems``); nothing is imported before that check, so ``os:system`` runs
  nothing. Each entry point's name is also a problem name (`provider_factories`).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from pathlib import Path

from .errors import ConfigError

PROVIDER_GROUP = "pinnkit.problems"
_BUILTIN_PROVIDERS = ("pinnkit.problems",)
_HOW = (
    "A config may name a built-in problem, a file as 'path/to/file.py:function' (which runs "
    "that file), or a function of an installed package that declares itself a pinnkit "
    "provider in its pyproject.toml: [project.entry-points.\"pinnkit.problems\"] "
    "my_problem = \"mypkg.problems:make_problem\" (then problem.name: my_problem, or "
    "mypkg.problems:function for any function of that module)."
)


def _entry_points():
    from importlib.metadata import entry_points

    return entry_points(group=PROVIDER_GROUP)


def provider_factories() -> dict:
    """``{name: entry point}`` of the installed providers' problems (not yet imported)."""
    return {ep.name: ep for ep in _entry_points()}


def provider_modules() -> tuple[str, ...]:
    """Modules whose functions a config may name as ``module:function``."""
    return (*_BUILTIN_PROVIDERS, *sorted({ep.module for ep in _entry_points()}))


def _check_provider(module: str, spec: str, what: str) -> None:
    allowed = provider_modules()
    if not any(module == m or module.startswith(m + ".") for m in allowed):
        raise ConfigError(
            f"{what} {spec!r}: module {module!r} is not a pinnkit problem provider, so it is "
            f"not imported. {_HOW} Installed providers: {', '.join(allowed)}."
        )


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
        _check_provider(path_s, spec, what)
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
