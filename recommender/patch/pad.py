"""Padding per-thread slots that several threads write (false sharing): each element of a
file-scope array gets a cache line of its own.

``double slot[8];`` written as ``slot[t] += x`` by every thread puts eight threads' slots
on one 64-byte line: every write invalidates the line in the other threads' caches (on
another node, across the interconnect).  The patch makes every element the first of a
row of one line, with pure insertions (recommender/patch/edits.py):

    double slot[8][8] __attribute__((aligned(64)));     /* was: double slot[8]; */
    slot[t][0] += x;                                    /* was: slot[t] += x;   */

It is made only when every use of the name in the file is an element ``slot[i]`` (found
with the parser and resolved with its scopes: a parameter or local of that name is
another object), the array has one dimension with its size, no initialiser other than
zeros, elements that divide a line, and no other translation unit can see it (``static``,
or the program has this one unit).  Anything else — ``slot + i``, ``&slot``, passing
``slot`` to a function, ``sizeof slot`` (its value would change) — is refused with the
reason, to be padded by hand.
"""

from __future__ import annotations

import os

from numaprof.recommender.patch import scope
from numaprof.recommender.patch.edits import Edit, Patch, PatchInfo, Refusal, make_patch
from numaprof.recommender.patch.place_static import file_scope_arrays
from numaprof.recommender.patch.source import C_FAMILY, load, walk

LINE = 64  # bytes of a cache line
ALIGN = f"__attribute__((aligned({LINE})))"


def pad_slots(path: str, symbol: str, elem_size: int | None = None, *, root: str | None = None,
              one_unit: bool = False) -> Patch | Refusal:
    """The patch giving each element of the file-scope array ``symbol`` (elements of
    ``elem_size`` bytes; None: as the file's types give it) a cache line of its own, or
    why it is not made.  ``one_unit``: the program has no other translation unit of its
    own, so a non-static array is seen by this file only."""
    path = os.path.abspath(path)
    src = load(path, want=C_FAMILY)
    if isinstance(src, Refusal):
        return Refusal(path, 0, src.reason, fallback="")
    name = os.path.basename(path)

    def refuse(line: int, why: str) -> Refusal:
        return Refusal(path, line, why, fallback="",
                       by_hand=f"give each element of `{symbol}` a {LINE}-byte line of its own "
                               f"(e.g. a struct {{ T v; }} {ALIGN}, or {symbol}[N][{LINE} / "
                               f"sizeof(T)] used as {symbol}[i][0])")

    decls = file_scope_arrays(src, symbol)
    if not decls:
        return refuse(0, f"`{symbol}` is not an array defined at file scope in {name}")
    if len(decls) > 1:
        return refuse(decls[1].line, f"`{symbol}` is declared {len(decls)} times in {name} "
                                     "(extern declarations or #if branches)")
    decl = decls[0]
    if decl.extern:
        return refuse(decl.line, f"`{symbol}` is only declared `extern` in {name}: it is "
                                 "defined in another file")
    if not (scope._has_storage(decl.node, "static") or one_unit):
        return refuse(decl.line, f"`{symbol}` is visible to the program's other files (not "
                                 "`static`): their uses would not be changed")
    arr = scope.innermost_array(decl)
    if arr is None or arr.child_by_field_name("size") is None:
        return refuse(decl.line, f"`{symbol}` is not declared with its size")
    if arr.parent is not None and arr.parent.type == "array_declarator":
        return refuse(decl.line, f"`{symbol}` has more than one dimension")
    if decl.declarator.type == "init_declarator" and not _zeros(src, decl.declarator):
        return refuse(decl.line, f"`{symbol}` has an initialiser: its values would move")
    if elem_size is None:
        elem_size = scope.element_size(src, decl)
        if elem_size is None:
            return refuse(decl.line, f"the size of `{symbol}`'s elements is not known from "
                                     f"{name}")
    if elem_size <= 0 or elem_size >= LINE or LINE % elem_size:
        return refuse(decl.line, f"`{symbol}`'s elements are {elem_size} bytes: they do not "
                                 f"divide a {LINE}-byte line")
    own = scope.declarator_identifier(decl.declarator)
    edits = [Edit(arr.end_byte, f"[{LINE // elem_size}] {ALIGN}")]
    uses = 0
    for ident in walk(src.root):
        if ident.type != "identifier" or ident == own or src.text(ident) != symbol:
            continue
        if ident.parent is not None and ident.parent.type in _DECLARING and \
                ident.parent.child_by_field_name("declarator") == ident:
            continue  # a local or parameter of that name declared here: another object
        found = scope.lookup(src, symbol, ident.start_byte)
        if found is None or found.node != decl.node:
            continue  # a parameter, local or member of that name: another object
        line = ident.start_point[0] + 1
        parent = ident.parent
        if parent is not None and parent.type == "subscript_expression" and \
                parent.child_by_field_name("argument") == ident:
            edits.append(Edit(parent.end_byte, "[0]"))
            uses += 1
            continue
        text = src.text(parent) if parent is not None else symbol
        return refuse(line, f"`{symbol}` is used as `{' '.join(text.split())[:60]}` at "
                            f"{name}:{line}, not as an element {symbol}[i]")
    if not uses:
        return refuse(decl.line, f"`{symbol}` is not used in {name}")
    k = LINE // elem_size
    statement = " ".join(src.text(decl.node).split())
    info = PatchInfo("pad_slots", statement, f"{name}:{decl.line}", target=symbol,
                     scope=f"{uses} use(s) of `{symbol}` in {name}, each an element: "
                           f"{symbol}[i] becomes {symbol}[i][0], {k} elements a line")
    return make_patch(path, src.data, edits, root,
                      f"pad {symbol}: one {LINE}-byte line per element ({uses} uses)", info)


_DECLARING = ("init_declarator", "declaration", "parameter_declaration", "array_declarator",
              "pointer_declarator", "function_declarator", "parenthesized_declarator",
              "attributed_declarator", "reference_declarator")


def _zeros(src, init_declarator) -> bool:
    """Whether an initialiser gives zeros only (``= {0}``, ``= {}``, ``= {0.0}``)."""
    value = init_declarator.child_by_field_name("value")
    if value is None or value.type != "initializer_list":
        return False
    items = value.named_children
    return not items or (len(items) == 1 and src.text(items[0]).strip().rstrip("fFlLuU")
                         in ("0", "0.0", "0.", ".0", "0x0"))
