"""The same objects in two profiles of one program (`report --diff BEFORE AFTER`).

A patch (`suggest --apply`) shifts the lines below what it inserts, so an object named by
its allocation site (``func@file:line``) has another name after it, and the line that
named one object before may name another after.  Objects are therefore paired in two
passes, each one-to-one and in allocation order within a group:

1. by kind, name and site, with the lines of BEFORE carried over to AFTER through a line
   map of each source file: the two versions' texts, from the profiles' archives (the
   copies taken at record time), or for the original, from `suggest --apply`'s own copy
   (``.numaprof/apply``, recommender/apply_state.py) when the BEFORE profile has none;
2. what is left, by kind, name without its line, and allocating function and file.

Anything still unpaired is shown on its side alone.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from numaprof.analyzer import profile_io
from numaprof.analyzer.model import Analysis, ObjectResult
from numaprof.errors import ProfileError

_SITE = re.compile(r"^(?P<func>.*)@(?P<file>[^@:]+):(?P<line>\d+)$")
_AT_ADDR = re.compile(r"^(?P<base>[^@]*)@0x[0-9a-f]+$")  # heap@0x..., anon@0x...

LineMap = Callable[[int], "int | None"]


@dataclass
class Pair:
    """One object of BEFORE and its counterpart in AFTER (either may be None)."""

    before: ObjectResult | None
    after: ObjectResult | None
    how: str  # "site" (pass 1), "function" (pass 2), "" unpaired


def line_map(old: str, new: str) -> LineMap:
    """Line number in `old` -> the same line in `new` (1-based), None for a line the
    change replaced or removed."""
    a, b = old.splitlines(), new.splitlines()
    table: dict[int, int] = {}
    for tag, i1, i2, j1, _j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            for k in range(i2 - i1):
                table[i1 + k + 1] = j1 + k + 1
    return table.get


def _archived_sources(profile: str) -> dict[str, Path]:
    """{recorded source path: its archived copy} of a profile; {} without an archive."""
    index = Path(profile) / "archive.json"
    try:
        doc = profile_io.read_json(index)
    except (FileNotFoundError, ProfileError):
        return {}
    out = {}
    if isinstance(doc, dict) and isinstance(doc.get("sources"), dict):
        for path, digest in doc["sources"].items():
            try:
                out[path] = profile_io.archive_copy(profile, digest)
            except (FileNotFoundError, ProfileError):
                continue
    return out


def _read(path: os.PathLike | str) -> str | None:
    try:
        return profile_io.read_bytes(path, profile_io.TEXT_LIMIT).decode("utf-8", "replace")
    except (OSError, ValueError, ProfileError):
        return None


def _journal_original(path: str, patched: str) -> str | None:
    """The text `path` had before `suggest --apply` patched it into `patched`, from the
    apply's copy of the original (the journal names the file, its original and its
    patched sha256)."""
    from numaprof.recommender import apply_state

    root = apply_state.find_tree(os.path.dirname(path) or ".")
    if root is None:
        return None
    state = apply_state.state_dir(root)
    try:
        doc = apply_state.validated(profile_io.read_json(os.path.join(state, apply_state.MANIFEST)))
    except (OSError, ValueError, TypeError, ProfileError):
        return None
    rel = os.path.relpath(os.path.realpath(path), os.path.realpath(root))
    digest = apply_state.sha256(patched.encode())
    for entry in doc["files"]:
        if entry["path"] == rel and entry["patched_sha256"] == digest:
            text = _read(os.path.join(state, entry["backup"]))
            if text is not None and apply_state.sha256(text.encode()) == entry["original_sha256"]:
                return text
    return None


def line_maps(before: Analysis, after: Analysis) -> dict[str, LineMap]:
    """{source file name as sites give it (its base name): line map BEFORE -> AFTER} for
    the files whose two versions are known and differ."""
    old, new = _archived_sources(before.profile.path), _archived_sources(after.profile.path)
    out: dict[str, LineMap] = {}
    by_name: dict[str, list[str]] = {}
    for path in new:
        by_name.setdefault(os.path.basename(path), []).append(path)
    for name, paths in by_name.items():
        if len(paths) != 1:
            continue  # two files of one name: a site would not say which
        path = paths[0]
        new_text = _read(new[path])
        if new_text is None:
            continue
        old_text = _read(old[path]) if path in old else _journal_original(path, new_text)
        if old_text is not None and old_text != new_text:
            out[name] = line_map(old_text, new_text)
    return out


def _moved(text: str, maps: dict[str, LineMap]) -> str | None:
    """A name or site ending in ``@file:line`` with the line carried over; the text itself
    when it names no line of a changed file; None for a line the change removed."""
    m = _SITE.match(text)
    if not m or m["file"] not in maps:
        return text
    line = maps[m["file"]](int(m["line"]))
    return None if line is None else f"{m['func']}@{m['file']}:{line}"


def _function_key(o: ObjectResult) -> tuple:
    m = _SITE.match(o.site or "")
    func, file = (m["func"], m["file"]) if m else (o.site or "", "")
    name = o.name
    if name == o.site or _SITE.match(name):
        name = ""  # named by its site: the function and file say it
    elif _AT_ADDR.match(name):
        name = _AT_ADDR.match(name)["base"] + "@"  # an address changes from run to run
    return (o.kind, name, func, file)


def _order(o: ObjectResult) -> tuple:
    return (o.alloc_time, o.address)


def match(before: Analysis, after: Analysis, maps: dict[str, LineMap] | None = None) -> list[Pair]:
    """The objects of both analyses paired (see the module's docstring); BEFORE's objects
    in their order, then AFTER's that have no counterpart."""
    maps = line_maps(before, after) if maps is None else maps
    partner: dict[int, tuple[ObjectResult, str]] = {}
    taken: set[int] = set()

    def pair(key_b, key_a, how):
        groups: dict[tuple, list[ObjectResult]] = {}
        for o in sorted(after.objects, key=_order):
            if id(o) not in taken:
                groups.setdefault(key_a(o), []).append(o)
        for b in sorted(before.objects, key=_order):
            if id(b) in partner:
                continue
            k = key_b(b)
            if k is None or not groups.get(k):
                continue
            a = groups[k].pop(0)
            partner[id(b)] = (a, how)
            taken.add(id(a))

    def moved_key(b):
        name, site = _moved(b.name, maps), _moved(b.site or "", maps)
        return None if name is None or site is None else (b.kind, name, site)

    pair(moved_key, lambda a: (a.kind, a.name, a.site or ""), "site")
    pair(_function_key, _function_key, "function")
    out = [Pair(b, *partner.get(id(b), (None, ""))) for b in before.objects]
    out += [Pair(None, a, "") for a in after.objects if id(a) not in taken]
    return out
