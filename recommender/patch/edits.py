"""Patches as insertions into the text a profile saw: edits, unified diffs, merging.

Every patch is a set of pure insertions into the original text, so several patches to
one file combine without conflict (`merge_patches`); `recommender.apply` writes them.
"""

from __future__ import annotations

import difflib
import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Edit:
    """Insert `text` at byte `offset` of the original file.

    `attach` edits must end up immediately before the code at `offset` (an OpenMP
    directive belongs to the statement that follows it), so they go after any other
    insertion at the same offset.
    """

    offset: int
    text: str
    attach: bool = False


#: The kinds of patch (docs/apply.md): what a patch does to the source.
PATCH_KINDS = (
    "place_after_allocation",  # numaprof_place after malloc / new[] (C, C++)
    "place_vector",  # numaprof_place on v.data() after a std::vector is sized
    "place_in_constructor",  # at the start of a constructor body (member initialisers)
    "place_static",  # numaprof_place(a, sizeof(a), ...) before a static array's first touch
    "parallel_first_touch",  # OpenMP on the serial loop that first touched the array
    "pad_slots",  # a cache line per element of per-thread slots (false sharing)
    "reduction",  # an OpenMP reduction clause for a shared accumulator (true sharing)
    "replicate",  # a copy per node of data written first, then only read
    "page_chunks",  # a loop's schedule chunk scaled to whole pages (page sharing)
)


@dataclass(frozen=True)
class PatchInfo:
    """What a patch claims to do, for the checks that prove it and for the report.

    `size` is the byte count the statement passes, as written; `size_bytes` its value
    when the file gives it as constants (None: a run-time value); `recorded_bytes` what
    the profile recorded for the object.  `probe` is a check-only statement, inserted
    next to the placement in the copy the compile check compiles (never in the patch),
    that fails to compile unless `size` equals `recorded_bytes` at that point; the
    compiler thereby confirms the size with the program's own flags and headers.
    `scope` says in words what the names of the statement denote where it is inserted.
    """

    kind: str
    statement: str
    where: str  # file:line of the statement it is inserted next to
    target: str = ""  # the pointer expression placed
    size: str = ""
    size_bytes: int | None = None
    recorded_bytes: int | None = None
    scope: str = ""
    probe: Edit | None = None


@dataclass(frozen=True)
class Patch:
    """A change to one source file, as insertions into the text the profile saw."""

    path: str  # absolute
    original_hash: str  # sha256 of the original bytes
    diff: str  # unified diff, `--- a/<rel>` / `+++ b/<rel>` relative to `root`
    new_text: str
    edits: tuple[Edit, ...]
    root: str
    description: str = ""
    info: PatchInfo | None = None  # None for a merged patch (one file, several objects)


@dataclass(frozen=True)
class Refusal:
    """Why a patch was not made; `fallback` is the policy to recommend instead.

    `by_hand`: the statement to add by hand and where, when numaprof knows it but could
    not write it safely itself ("" when it does not).
    """

    path: str
    line: int
    reason: str
    fallback: str = "bind_block"
    by_hand: str = ""

    def __str__(self) -> str:
        return self.reason


@dataclass(frozen=True)
class AlreadyPlaced:
    """The source already places the object: a `numaprof_place` call (or a parallel
    first-touch loop) that a second patch would only repeat."""

    path: str
    line: int
    statement: str  # the call as it stands in the source
    constant: str  # its policy constant (NUMAPROF_...), "" for a loop directive

    @property
    def where(self) -> str:
        return f"{os.path.basename(self.path)}:{self.line}"


def _relpath(path: str, root: str) -> str:
    rel = os.path.relpath(path, root)
    if rel.startswith(".."):
        rel = path.lstrip("/")
    return rel.replace(os.sep, "/")


def unified_diff(old: str, new: str, path: str, root: str) -> str:
    """A unified diff of one file with ``--- a/<rel>`` / ``+++ b/<rel>`` headers."""
    rel = _relpath(path, root)
    out = []
    for line in difflib.unified_diff(old.splitlines(keepends=True),
                                     new.splitlines(keepends=True),
                                     fromfile=f"a/{rel}", tofile=f"b/{rel}"):
        if not line.endswith("\n"):
            # The last line had no newline: say so the way diff(1) and patch(1) expect.
            line += "\n\\ No newline at end of file\n"
        out.append(line)
    return "".join(out)


def _edit_order(e: Edit) -> tuple:
    # the text breaks ties: several insertions at one offset come out in one order on
    # every run, whatever order the patches were made in
    return (e.offset, e.attach, e.text)


def apply_edits(data: bytes, edits: Iterable[Edit]) -> str:
    """The text with every (distinct) insertion made."""
    ordered = sorted(set(edits), key=_edit_order)
    parts, pos = [], 0
    for e in ordered:
        parts.append(data[pos:e.offset])
        parts.append(e.text.encode("utf-8", "surrogateescape"))
        pos = e.offset
    parts.append(data[pos:])
    return b"".join(parts).decode("utf-8", "surrogateescape")


def make_patch(path: str, data: bytes, edits: Iterable[Edit], root: str | None,
               description: str, info: PatchInfo | None = None) -> Patch:
    root = os.path.abspath(root or os.getcwd())
    edits = tuple(sorted(set(edits), key=_edit_order))
    old = data.decode("utf-8", "surrogateescape")
    new = apply_edits(data, edits)
    return Patch(path=path, original_hash=hashlib.sha256(data).hexdigest(),
                 diff=unified_diff(old, new, path, root), new_text=new, edits=edits,
                 root=root, description=description, info=info)


def merge_patches(patches: Iterable[Patch], root: str | None = None) -> list[Patch]:
    """Combine patches to the same file into one per file (insertions are unioned).

    All patches of one file must have been made from the same text (same hash);
    ValueError otherwise.  Identical insertions (the #include of several placements)
    appear once.
    """
    by_path: dict[str, list[Patch]] = {}
    for p in patches:
        # Two names of one file (a symbolic link) must become one patch, or the second
        # write would undo the first.
        by_path.setdefault(os.path.realpath(p.path), []).append(p)
    merged = []
    for path, group in by_path.items():
        hashes = {p.original_hash for p in group}
        if len(hashes) > 1:
            raise ValueError(f"patches to {path} were made from different versions of it")
        with open(path, "rb") as f:
            data = f.read()
        if hashlib.sha256(data).hexdigest() != group[0].original_hash:
            raise ValueError(f"{path} changed since its patches were made")
        edits = [e for p in group for e in p.edits]
        desc = "; ".join(dict.fromkeys(p.description for p in group if p.description))
        merged.append(make_patch(path, data, edits, root or group[0].root, desc))
    return merged
