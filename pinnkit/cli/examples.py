"""``pinnkit examples``: the example configs that ship inside the package.

    pinnkit examples                 # list them, with each one's first comment line
    pinnkit examples copy DIR        # copy them all to DIR (DIR/poisson2d.yaml, DIR/tiny/...)
    pinnkit train DIR/tiny/poisson2d.yaml

They are the repository's ``configs/`` folder, installed as the package data of
``pinnkit.examples`` (setup.py), so that a wheel installed anywhere carries them.
"""

from __future__ import annotations

import importlib.resources
import re
import sys
import textwrap
from pathlib import Path

from ..errors import PinnkitError

DATA_SUFFIXES = (".obj", ".stl", ".npz")
"""The files configs read besides each other (meshes, observation tables), shipped with them."""


def example_files(suffixes=(".yaml",)) -> dict[str, importlib.resources.abc.Traversable]:
    """``{relative name: resource}`` of every shipped config, e.g. ``"tiny/poisson2d.yaml"``
    (or of the shipped files with other ``suffixes``: `DATA_SUFFIXES`)."""
    root = importlib.resources.files("pinnkit.examples")
    out = {}

    def walk(node, prefix):
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            if child.is_dir() and not child.name.startswith(("_", ".")):
                walk(child, f"{prefix}{child.name}/")
            elif child.name.endswith(tuple(suffixes)):
                out[f"{prefix}{child.name}"] = child

    walk(root, "")
    return out


# Abbreviations whose full stop ends no sentence.
_ABBREV = ("e.g.", "i.e.", "et al.", "cf.", "vs.", "approx.", "rel.", "Eq.", "Fig.")


def _summary(text: str) -> str:
    """The first sentence of a config's leading comment block (its description), whole:
    the comment lines joined, up to the first full stop (or ``!``/``?``) that ends a
    sentence; the whole block when none does."""
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            if line.strip() or lines:
                break
            continue
        lines.append(line.lstrip("#").strip())
    block = re.sub(r"\s+", " ", " ".join(lines)).strip()
    for m in re.finditer(r"[.!?](?=\s|$)", block):
        head = block[: m.end()]
        if not head.endswith(_ABBREV):
            return head
    return block


def copy_examples(dest: str | Path, overwrite: bool = False) -> list[Path]:
    """Copies every shipped config into ``dest`` (subfolders kept, so that ``base:``
    references between them still resolve), with the meshes and data tables they read
    (`DATA_SUFFIXES`). Refuses to replace existing files unless ``overwrite``.
    **Returns:** the files written."""
    dest = Path(dest)
    files = {**example_files(), **example_files(DATA_SUFFIXES)}
    clash = [n for n in files if (dest / n).exists()]
    if clash and not overwrite:
        raise PinnkitError(
            f"examples copy: {dest} already holds {len(clash)} of the example files (e.g. "
            f"{dest / clash[0]}); pass --overwrite to replace them or choose another folder"
        )
    written = []
    try:
        for name, res in files.items():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(res.read_bytes())
            written.append(target)
    except OSError as e:
        raise PinnkitError(f"examples copy: cannot write into {dest}: {e.strerror or e}") from None
    return written


def missing_config_hint(config: str) -> str | None:
    """For a config path that does not exist but names a shipped example (``configs/X``,
    ``X`` or ``tiny/X``), the sentence that says how to get it; else None."""
    parts = Path(config).parts
    name = "/".join(parts[1:] if parts and parts[0] == "configs" else parts)
    if name not in example_files():
        return None
    return (f"{config!r} is one of pinnkit's example configs, which are not in this folder: "
            f"copy them with `pinnkit examples copy configs`, then run `pinnkit train configs/{name}`")


def cmd_examples(args) -> int:
    if args.action == "copy":
        if not args.dir:
            raise PinnkitError("examples copy needs a destination folder: pinnkit examples copy DIR")
        written = copy_examples(args.dir, overwrite=args.overwrite)
        configs = sum(w.suffix == ".yaml" for w in written)
        print(f"pinnkit: {configs} example configs (and {len(written) - configs} mesh and data "
              f"files) copied to {args.dir}/; e.g. "
              f"pinnkit train {Path(args.dir) / 'tiny' / 'poisson2d.yaml'}", file=sys.stderr)
        return 0
    if args.dir:
        raise PinnkitError(f"examples: unexpected {args.dir!r}; use `pinnkit examples` or "
                           "`pinnkit examples copy DIR`")
    files = example_files()
    width = max(len(n) for n in files)
    pad = " " * (width + 2)  # a long first sentence continues under itself
    for name, res in files.items():
        text = textwrap.fill(_summary(res.read_text()), max(width + 42, 110), initial_indent=pad,
                             subsequent_indent=pad, break_long_words=False, break_on_hyphens=False)
        print(f"{name:<{width}}  {text[len(pad):]}")
    return 0


def register(sub) -> None:
    """Adds ``examples`` to the ``pinnkit`` subparsers ``sub``."""
    p = sub.add_parser("examples", help="list the example configs, or copy them: examples copy DIR")
    p.add_argument("action", nargs="?", choices=("list", "copy"), default="list")
    p.add_argument("dir", nargs="?", metavar="DIR", help="destination folder of `copy`")
    p.add_argument("--overwrite", action="store_true", help="replace files that DIR already holds")
    p.set_defaults(func=cmd_examples)
