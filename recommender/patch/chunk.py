"""Whole pages per chunk for a loop whose threads write the same pages (page sharing): the
loop's ``schedule`` chunk scaled up.

``#pragma omp parallel for schedule(static, 16)`` over doubles hands the threads 128-byte
chunks in turn: no line is written by two threads, but every 4 KiB page is, and a page
lives on one node, so the other nodes' threads write it remotely whatever the placement
(NumaPerf's page-level false sharing).  The patch multiplies the chunk so that it covers
`CHUNK_BYTES` (16 pages): then at most one page in 16 holds two threads' chunks (none
when the array starts on a page), as an insertion (recommender/patch/edits.py):

    #pragma omp parallel for schedule(static, 16 * 512)

It is made for a ``static``, ``dynamic`` or ``guided`` schedule whose chunk is an integer
literal, on the innermost ``parallel for`` / ``for`` directive running the statement
that writes the object, when the element size of the object's name there is known.
``schedule(runtime)`` takes the chunk from OMP_SCHEDULE: no source change, the reason says
what to set.  Larger chunks balance the load in coarser steps: a loop of few iterations
per thread may lose balance, which the reason says.
"""

from __future__ import annotations

import os
import re

from numaprof.recommender.patch import scope
from numaprof.recommender.patch.edits import Edit, Patch, PatchInfo, Refusal, make_patch
from numaprof.recommender.patch.source import (
    C_FAMILY,
    load,
    omp_words,
    pragma_before,
    pragma_clauses,
    walk,
)

PAGE = 4096
#: Bytes each chunk covers after the patch: 16 pages.
CHUNK_BYTES = 16 * PAGE

_SCHEDULE = re.compile(r"\bschedule\s*\(\s*(?:(?:monotonic|nonmonotonic)\s*:\s*)?"
                       r"(static|dynamic|guided|runtime|auto)\s*(?:,\s*([^)]*?))?\s*\)")


def page_chunk_patch(path: str, symbol: str, line: int, *, root: str | None = None,
                     elem_size: int | None = None) -> Patch | Refusal:
    """The patch scaling the schedule chunk of the loop that writes `symbol` at `line`."""

    path = os.path.abspath(path)
    name = os.path.basename(path)
    by_hand = (f"give each thread whole pages of `{symbol}`: a schedule chunk of at least "
               f"{CHUNK_BYTES >> 10} KiB of elements (or `schedule(static)`, one block per "
               "thread), and the array aligned to 4096 bytes")

    def refuse(at: int, why: str) -> Refusal:
        return Refusal(path, at, why, fallback="", by_hand=by_hand)

    src = load(path, want=C_FAMILY)
    if isinstance(src, Refusal):
        return Refusal(path, 0, src.reason, fallback="", by_hand=by_hand)
    row = line - 1
    writes = []
    for n in walk(src.root):
        if n.type != "assignment_expression" or not n.start_point[0] <= row <= n.end_point[0]:
            continue
        left = scope._unparen(n.child_by_field_name("left"))
        if left is not None and left.type == "subscript_expression":
            arg = scope._unparen(left.child_by_field_name("argument"))
            if arg is not None and arg.type == "identifier" and src.text(arg) == symbol:
                writes.append((n, arg))
    if not writes:
        return refuse(line, f"{name}:{line} has no write `{symbol}[i] = ...`")
    stmt, ident = writes[0]
    n, pragma, words = stmt, None, None
    while n is not None:
        p = pragma_before(n)
        w = omp_words(src, p)
        if w and w[0] in ("parallel", "for"):
            pragma, words = p, w
            break
        n = n.parent
    if pragma is None or words not in (["parallel", "for"], ["for"]):
        return refuse(line, f"the write at {name}:{line} is not in an OpenMP loop"
                      if pragma is None else
                      f"the write at {name}:{line} is in `#pragma omp {' '.join(words)}`, "
                      "not a loop")
    at = pragma.start_point[0] + 1
    arg = pragma.child_by_field_name("argument")
    text = pragma_clauses(src.text(arg))
    m = _SCHEDULE.search(text)
    if m is None:
        return refuse(at, f"the loop at {name}:{at} has no schedule clause (the default gives "
                          "each thread one block): the pages are not shared by its chunks")
    kind, chunk = m.group(1), (m.group(2) or "").strip()
    if kind in ("runtime", "auto"):
        return Refusal(path, at, f"the loop at {name}:{at} takes its schedule from "
                                 f"{'OMP_SCHEDULE' if kind == 'runtime' else 'the runtime'}: "
                                 "no source change", fallback="",
                       by_hand=f"run with OMP_SCHEDULE=static (one block per thread), or "
                               f"OMP_SCHEDULE={'static' if kind == 'runtime' else kind},C with "
                               f"C elements of `{symbol}` of at least {CHUNK_BYTES >> 10} KiB")
    if not chunk:
        if kind == "static":
            return refuse(at, f"the loop at {name}:{at} is `schedule(static)`: one block per "
                              "thread, no page is shared by its chunks")
        chunk = "1"
    if not re.fullmatch(r"\d+", chunk):
        return refuse(at, f"the chunk `{chunk}` of the loop at {name}:{at} is not a number")
    if elem_size is None:
        decl = scope.lookup(src, symbol, ident.start_byte)
        elem_size = scope.element_size(src, decl) if decl is not None else None
    if not elem_size:
        return refuse(line, f"the size of `{symbol}`'s elements is not known from {name}")
    c = int(chunk)
    if c * elem_size >= CHUNK_BYTES:
        return refuse(at, f"the chunk of the loop at {name}:{at} is {c * elem_size} bytes "
                          "already: the shared pages come from elsewhere")
    k = -(-CHUNK_BYTES // (c * elem_size))
    if m.group(2) is not None:
        offset = arg.start_byte + len(text[:m.end(2)].encode("utf-8", "surrogateescape"))
        edits = [Edit(offset, f" * {k}")]
        new_clause = f"schedule({kind}, {chunk} * {k})"
    else:  # schedule(dynamic) / schedule(guided): a chunk of 1 by default
        offset = arg.start_byte + len(text[:m.end(1)].encode("utf-8", "surrogateescape"))
        edits = [Edit(offset, f", {k}")]
        new_clause = f"schedule({kind}, {k})"
    info = PatchInfo("page_chunks", new_clause, f"{name}:{at}", target=symbol,
                     size=f"{c * k} elements", size_bytes=c * k * elem_size,
                     scope=f"the loop writing `{symbol}` at line {line}: chunks of {c} "
                           f"element(s) of {elem_size} bytes become {c * k} "
                           f"({(c * k * elem_size) >> 10} KiB, whole pages)")
    return make_patch(path, src.data, edits, root,
                      f"{symbol}: {new_clause}, whole pages per chunk", info)
