"""Bounded reading of YAML config text: every input is refused or parsed within a
second and a few megabytes.

- `read_text`: regular files only (a folder, a FIFO or ``/dev/zero`` is refused at once,
  without blocking or reading), at most `MAX_BYTES`, text (a NUL byte: a binary file) in
  UTF-8 (an invalid byte is reported with its offset, line and column).
- `loads`: a first pass over the parser's events (iterative, no recursion) refuses a
  document nested deeper than `MAX_DEPTH` or whose *expanded* size exceeds `MAX_NODES`
  nodes, counting each use of an alias ``*a`` as a copy of what ``&a`` names (a "billion
  laughs" document is refused after reading a few hundred events, before anything is
  built). The second pass builds the data with PyYAML's safe constructor, rejecting a key
  given twice in one mapping, at any depth and in block or flow style (with both lines,
  and columns when they share one), instead of keeping the last.

Errors are `ConfigError` paragraphs naming the file (or ``--set`` value) and the fix.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import yaml

from ..errors import ConfigError

MAX_BYTES = 1 << 20  # configs are a few kB; 1 MiB leaves room for long expression strings
MAX_NODES = 100_000  # expanded scalars + collections
MAX_DEPTH = 64

_Base = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader
_MERGE = "tag:yaml.org,2002:merge"
_KINDS = {stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFCHR: "a character device",
          stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a folder"}


def read_text(path: Path, what: str = "config file") -> str:
    """The UTF-8 text of the regular file ``path`` (at most `MAX_BYTES`)."""
    shown = repr(str(path))
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise ConfigError(f"{what} {shown} not found (current folder: {Path.cwd()})") from None
    except OSError as e:
        raise ConfigError(f"{what} {shown} cannot be read: {e.strerror}") from None
    # The kind is checked on the descriptor, before wrapping it: `os.fdopen` itself raises
    # on a folder, and reading a device file would never end.
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        kind = _KINDS.get(stat.S_IFMT(st.st_mode), "not a regular file")
        raise ConfigError(f"{what} {shown} is {kind}; a config must be a regular YAML file"
                          + (_folder_hint(Path(path)) if stat.S_ISDIR(st.st_mode) else ""))
    with os.fdopen(fd, "rb") as f:
        if st.st_size > MAX_BYTES:
            raise ConfigError(
                f"{what} {shown} is {st.st_size / 2**20:.1f} MiB; configs are limited to "
                f"{MAX_BYTES // 2**20} MiB. Put large data in a file named by the config (e.g. "
                "problem.observations.NAME.file) instead of inline lists"
            )
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:  # grew while being read
        raise ConfigError(f"{what} {shown} is larger than the {MAX_BYTES // 2**20} MiB limit")
    if b"\0" in data:  # text never holds NUL; an executable, archive or image does
        at = data.index(b"\0")
        raise ConfigError(
            f"{what} {shown} is a binary file (a NUL byte at offset {at}), not YAML text; "
            "give the .yaml config file"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise ConfigError(
            f"{what} {shown} is not UTF-8: byte 0x{data[e.start]:02x} at offset {e.start} "
            f"(line {line}, column {col}) is invalid. Save the file as UTF-8 (e.g. "
            "`iconv -f latin1 -t utf-8`)"
        ) from None
    return text.removeprefix("\ufeff")


def _folder_hint(folder: Path) -> str:
    """`` (e.g. FOLDER/a.yaml)``: a few of the configs in ``folder``, if it holds any."""
    try:
        names = sorted(p.name for p in folder.iterdir() if p.suffix in (".yaml", ".yml"))[:3]
    except OSError:
        return ""
    return f" (this folder holds e.g. {', '.join(str(folder / n) for n in names)})" if names else ""


def _check_size(text: str, where: str) -> None:
    """Refuses deep or alias-expanded documents from the event stream alone."""
    loader = _Base(text)
    total, depth = 0, 0
    sizes: dict[str, int] = {}  # expanded size of each anchor
    open_: list[tuple[str | None, int]] = []  # (anchor, total at start) per open collection
    try:
        while True:
            ev = loader.get_event()
            if ev is None or isinstance(ev, yaml.StreamEndEvent):
                return
            if isinstance(ev, yaml.AliasEvent):
                total += sizes.get(ev.anchor, 1)
            elif isinstance(ev, yaml.ScalarEvent):
                total += 1
                if ev.anchor is not None:
                    sizes[ev.anchor] = 1
            elif isinstance(ev, yaml.CollectionStartEvent):
                total += 1
                depth += 1
                open_.append((ev.anchor, total))
                if depth > MAX_DEPTH:
                    raise ConfigError(
                        f"{where}: nested deeper than {MAX_DEPTH} levels at line "
                        f"{ev.start_mark.line + 1}; a config is a few levels of sections"
                    )
            elif isinstance(ev, yaml.CollectionEndEvent):
                depth -= 1
                anchor, start = open_.pop()
                if anchor is not None:
                    sizes[anchor] = total - start + 1
            if total > MAX_NODES:
                raise ConfigError(
                    f"{where}: the document expands to more than {MAX_NODES} values (line "
                    f"{ev.start_mark.line + 1}); each use of an alias (*name) counts as a copy of "
                    "what its anchor (&name) holds. Write the values out, or load large data "
                    "from a file"
                )
    except yaml.YAMLError:
        return  # the second pass reports it, with its position
    finally:
        loader.dispose()


def _at(node, other) -> str:
    """``line L`` of ``node``, with its column when ``other`` is on the same line."""
    mark, line = node.start_mark, node.start_mark.line + 1
    if line != other.start_mark.line + 1:
        return f"line {line}"
    return f"line {line}, column {mark.column + 1}"


class _Loader(_Base):
    """PyYAML's safe loader, refusing a key given twice in one mapping."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == _MERGE:
                    continue  # keys merged from `<<: *base` may be overridden on purpose
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, key_node)
                except TypeError:
                    continue  # an unhashable key: the constructor reports it
                if first is not key_node:  # by node, not line: `{a: 1, a: 2}` is one line
                    raise ConfigError(
                        f"{self.where}: key {key!r} is given twice in the same mapping, at "
                        f"{_at(first, key_node)} and {_at(key_node, first)}; YAML would "
                        "silently keep the last. Delete one of them"
                    )
        return super().construct_mapping(node, deep)


_RAISE = object()


def loads(text: str, where: str, invalid=_RAISE):
    """Parses one YAML document from ``text`` within the limits above. ``where`` names it
    in errors (a file, or ``--set KEY=VALUE``). Text that is not valid YAML raises, or
    returns ``invalid`` when given (``--set`` takes such a value as a plain string)."""
    if len(text) > MAX_BYTES:
        raise ConfigError(f"{where}: longer than the {MAX_BYTES // 2**20} MiB limit")
    _check_size(text, where)
    loader = _Loader(text)
    loader.where = where
    try:
        return loader.get_single_data()
    except yaml.YAMLError as e:
        if invalid is not _RAISE:
            return invalid
        mark = getattr(e, "problem_mark", None)
        pos = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e)
        raise ConfigError(f"{where}: invalid YAML{pos}: {problem}") from None
    except RecursionError:
        raise ConfigError(f"{where}: nested too deeply") from None
    finally:
        loader.dispose()
