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


@dataclass(frozen=True)
class Refusal:
    """Why a patch was not made; `fallback` is the policy to recommend instead."""

    path: str
    line: int
    reason: str
    fallback: str = "bind_block"

    def __str__(self) -> str:
        return self.reason


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


def _apply_edits(data: bytes, edits: Iterable[Edit]) -> str:
    ordered = sorted(set(edits), key=lambda e: (e.offset, e.attach))
    parts, pos = [], 0
    for e in ordered:
        parts.append(data[pos:e.offset])
        parts.append(e.text.encode("utf-8", "surrogateescape"))
        pos = e.offset
    parts.append(data[pos:])
    return b"".join(parts).decode("utf-8", "surrogateescape")


def make_patch(path: str, data: bytes, edits: Iterable[Edit], root: str | None,
                description: str) -> Patch:
    root = os.path.abspath(root or os.getcwd())
    edits = tuple(sorted(set(edits), key=lambda e: (e.offset, e.attach)))
    old = data.decode("utf-8", "surrogateescape")
    new = _apply_edits(data, edits)
    return Patch(path=path, original_hash=hashlib.sha256(data).hexdigest(),
                 diff=unified_diff(old, new, path, root), new_text=new, edits=edits,
                 root=root, description=description)


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
