"""A reduction for an accumulator that every thread updates (true sharing): an OpenMP
``reduction`` clause on the construct that runs the update.

``counter += x`` under ``#pragma omp atomic`` in a parallel region makes every thread
write the same bytes: each update takes the line from the cache of the thread before
(from another node, across the interconnect).  With ``reduction(+:counter)`` each thread
accumulates in a private copy that the runtime combines once at the end of the
construct, and the ``atomic`` is no longer needed (OpenMP 5.2, 5.5.8).  The patch is
insertions only (recommender/patch/edits.py):

    #pragma omp parallel num_threads(2) reduction(+:counter)
    ...
                // #pragma omp atomic
                counter += term(mine[i]);

It is made when the construct is the innermost ``parallel``, ``for`` or ``parallel for``
governing the update; every use of the name inside the construct is an update with one
operator (``x += e``, ``x -= e``, ``x = x + e``, ``x++``; ``*=``; ``&=``, ``|=``,
``^=``) whose right side does not read it; the variable is an arithmetic scalar or a
one-dimensional array of them with its size (an array reduction, OpenMP 4.5, one private
copy per thread: at most `MAX_ARRAY` bytes); it is used by no other function of the file
(a function called from the region would see the shared variable, not the thread's
copy), its address is not taken, and no other file can see it (``static``, a local, or
the program's only source).  A ``critical`` section, a clause already naming it, or any
other construct (``task``, ``simd``, ``single``, ...) is refused with the reason.
"""

from __future__ import annotations

import os
import re

from numaprof.recommender.patch import scope
from numaprof.recommender.patch.edits import Edit, Patch, PatchInfo, Refusal, make_patch
from numaprof.recommender.patch.source import (
    C_FAMILY,
    OMP_STANDALONE,
    PLAIN_TYPEDEFS,
    Source,
    language,
    load,
    omp_words,
    pragma_before,
    pragma_clauses,
    walk,
)

#: The largest array given a private copy per thread by the patch.
MAX_ARRAY = 64 << 10

#: compound assignment -> reduction identifier (``-`` accumulates like ``+``: each
#: private copy starts at 0 and the copies are added; OpenMP 5.2 deprecates ``-``).
_COMPOUND = {"+=": "+", "-=": "+", "*=": "*", "&=": "&", "|=": "|", "^=": "^"}
_BINARY = {"+": "+", "*": "*", "&": "&", "|": "|", "^": "^"}
_INTEGER_ONLY = ("&", "|", "^")

_ARITHMETIC = frozenset({"char", "short", "int", "long", "float", "double", "unsigned",
                         "signed", "_Bool", "bool"}) | PLAIN_TYPEDEFS
_FLOATING = ("float", "double")

#: OpenMP constructs the clause may be added to (the words after ``omp``).
_TAKES_REDUCTION = (("parallel",), ("for",), ("parallel", "for"))


def _update(src: Source, node, symbol: str):
    """(target identifier, reduction operator, the target's repetition in ``x = x + e``
    or None) when `node` updates `symbol` (an element of it when it is an array), else
    None; the rest of the right side must not read it."""
    def target(n):
        n = scope._unparen(n)
        if n is not None and n.type == "subscript_expression":
            n = scope._unparen(n.child_by_field_name("argument"))
        return n if n is not None and n.type == "identifier" and src.text(n) == symbol \
            else None

    def reads(n) -> bool:
        return n is not None and any(i.type == "identifier" and src.text(i) == symbol
                                     for i in walk(n))

    if node.type == "update_expression":
        arg = node.child_by_field_name("argument")
        t = target(arg)
        return (t, "+", None) if t is not None and not _index_reads(src, arg, symbol) \
            else None
    if node.type != "assignment_expression":
        return None
    left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
    op = src.text(node.child_by_field_name("operator"))
    t = target(left)
    if t is None or _index_reads(src, left, symbol):
        return None
    if op in _COMPOUND:
        return None if reads(right) else (t, _COMPOUND[op], None)
    if op == "=" and right is not None and right.type == "binary_expression":
        bop = src.text(right.child_by_field_name("operator"))
        first, rest = right.child_by_field_name("left"), right.child_by_field_name("right")
        if bop in _BINARY and " ".join(src.text(first).split()) == \
                " ".join(src.text(left).split()) and not reads(rest):
            return t, _BINARY[bop], target(first)
    return None


def _index_reads(src: Source, target, symbol: str) -> bool:
    """``a[a[0]] += 1``: the index reads the array itself."""
    target = scope._unparen(target)
    if target is None or target.type != "subscript_expression":
        return False
    return any(i.type == "identifier" and src.text(i) == symbol
               for c in target.children if c != target.child_by_field_name("argument")
               for i in walk(c))


def _type_words(src: Source, decl) -> list[str]:
    typ = scope.type_node(decl)
    return src.text(typ).replace("std::", "").split() if typ is not None else []


def reduction_patch(path: str, symbol: str, line: int, *, root: str | None = None,
                    one_unit: bool = False) -> Patch | Refusal:
    """The patch adding ``reduction(op:symbol)`` to the OpenMP construct running the
    update of `symbol` at `line` of `path`, or why it is not made."""
    path = os.path.abspath(path)
    name = os.path.basename(path)
    lang = language(path)

    def refuse(at: int, why: str, clause: str = "reduction(+:" + symbol + ")") -> Refusal:
        return Refusal(path, at, why, fallback="",
                       by_hand=f"accumulate `{symbol}` in a variable of each thread and "
                               f"combine once at the end (e.g. `{clause}` on the parallel "
                               "loop, without the atomic)")

    if lang == "fortran":
        return refuse(line, f"{name} is Fortran: the reduction is not written there yet",
                      f"reduction(+:{symbol})")
    src = load(path, want=C_FAMILY)
    if isinstance(src, Refusal):
        return Refusal(path, 0, src.reason, fallback="")
    row = line - 1
    updates = [(n, u) for n in walk(src.root)
               if n.start_point[0] <= row <= n.end_point[0]
               and (u := _update(src, n, symbol)) is not None]
    if not updates:
        return refuse(line, f"{name}:{line} has no update of `{symbol}` of the form "
                            f"`{symbol} += e` (or -=, *=, &=, |=, ^=, ++)")
    stmt_node, (ident, op, _) = updates[0]
    decl = scope.lookup(src, symbol, ident.start_byte)
    if decl is None or decl.scope not in ("file", "local") or decl.node is None:
        return refuse(line, f"the `{symbol}` updated at {name}:{line} is not declared in "
                            f"{name} as a variable of the file or of the function")
    clause = f"reduction({op}:{symbol})"
    if decl.extern or (decl.scope == "file" and not (scope._has_storage(decl.node, "static")
                                                     or one_unit)):
        return refuse(decl.line, f"`{symbol}` is visible to the program's other files (not "
                                 "`static`): their uses would not see the threads' copies",
                      clause)
    words = _type_words(src, decl)
    if not words or any(w not in _ARITHMETIC for w in words if w not in ("const",
                                                                          "volatile")):
        return refuse(decl.line, f"`{symbol}` is not of an arithmetic type "
                                 f"(`{' '.join(words) or '?'}`)", clause)
    if "volatile" in words or "const" in words:
        return refuse(decl.line, f"`{symbol}` is declared `{' '.join(words)}`", clause)
    if op in _INTEGER_ONLY and any(w in _FLOATING for w in words):
        return refuse(line, f"`{op}` needs an integer type, `{symbol}` is "
                            f"`{' '.join(words)}`", clause)
    how = scope.derivation(decl)
    how = "" if how == "value" else how
    size = None
    if how == "array":
        arr = scope.innermost_array(decl)
        if arr is None or (arr.parent is not None and arr.parent.type == "array_declarator"):
            return refuse(decl.line, f"`{symbol}` has more than one dimension", clause)
        size = scope.object_size(src, decl)
        if size is None:
            return refuse(decl.line, f"the size of `{symbol}` is not known from {name}", clause)
        if size > MAX_ARRAY:
            return refuse(decl.line, f"`{symbol}` is {size} bytes: a private copy per thread "
                                     f"(the array reduction) would be more than "
                                     f"{MAX_ARRAY >> 10} KiB each", clause)
    elif how:
        return refuse(decl.line, f"`{symbol}` is a {how}, not a variable or an array",
                      clause)

    # The construct: the innermost OpenMP directive governing the update.
    atomic = None
    n, construct, pragma = stmt_node, None, None
    func = scope.enclosing_function(stmt_node)
    while n is not None and n != func:
        p = pragma_before(n)
        w = omp_words(src, p)
        if w is not None and w[:1] and w[0] not in OMP_STANDALONE:
            if w[:1] == ["atomic"] and n.type == "expression_statement" and atomic is None \
                    and construct is None:
                atomic = p
            elif w[:1] == ["critical"]:
                return refuse(p.start_point[0] + 1, f"the update is in a `critical` section "
                                                    f"({name}:{p.start_point[0] + 1}): the "
                                                    "patch writes insertions only", clause)
            elif tuple(w) in _TAKES_REDUCTION:
                construct, pragma = n, p
                break
            else:
                return refuse(p.start_point[0] + 1,
                              f"the update is governed by `#pragma omp {' '.join(w)}` at "
                              f"{name}:{p.start_point[0] + 1}, not by a parallel region or "
                              "loop", clause)
        n = n.parent
    if construct is None:
        return refuse(line, f"no OpenMP parallel region or loop runs the update at "
                            f"{name}:{line}", clause)
    at = pragma.start_point[0] + 1
    arg = pragma.child_by_field_name("argument")
    text = src.text(arg)
    if "\\" in pragma_clauses(text):
        return refuse(at, f"the directive at {name}:{at} continues over several lines", clause)
    if re.search(rf"\b{re.escape(symbol)}\b", pragma_clauses(text)):
        return refuse(at, f"`{symbol}` already appears in a clause of the directive at "
                          f"{name}:{at}", clause)
    if decl.scope == "local" and construct.start_byte <= decl.node.start_byte:
        return refuse(decl.line, f"`{symbol}` is declared inside the construct: each thread "
                                 "has its own already", clause)

    # Every use of the variable: updates with the same operator inside the construct,
    # anything (but its address) in the same function outside it, nothing elsewhere.
    atomics, count = [], 0
    for ident2 in walk(src.root):
        if ident2.type != "identifier" or src.text(ident2) != symbol:
            continue
        found = scope.lookup(src, symbol, ident2.start_byte)
        if found is None or found.node != decl.node:
            continue
        use_line = ident2.start_point[0] + 1
        parent = ident2.parent
        if parent is not None and parent.type == "pointer_expression" and \
                src.text(parent).lstrip().startswith("&"):
            return refuse(use_line, f"the address of `{symbol}` is taken at {name}:{use_line}",
                          clause)
        if found.declarator is not None and (ident2 == found.declarator or
                                             scope.declarator_identifier(found.declarator)
                                             == ident2):
            continue
        inside = construct.start_byte <= ident2.start_byte < construct.end_byte
        if not inside:
            if scope.enclosing_function(ident2) != func:
                return refuse(use_line, f"`{symbol}` is also used in another function "
                                        f"({name}:{use_line}), which the region may call: "
                                        "it would not see the threads' copies", clause)
            continue
        up = next((u for u in _ancestors(ident2, construct)
                   if u.type in ("assignment_expression", "update_expression")), None)
        got = _update(src, up, symbol) if up is not None else None
        if got is None or ident2 not in (got[0], got[2]) or got[1] != op:
            stmt = " ".join(src.text(up if up is not None else parent).split())[:60]
            return refuse(use_line, f"`{symbol}` is also used as `{stmt}` at "
                                    f"{name}:{use_line} inside the construct: with a "
                                    "reduction it would see only the thread's partial value",
                          clause)
        if ident2 != got[0]:
            continue  # the x of x = x + e, counted with its update
        count += 1
        holder = up.parent
        p = pragma_before(holder) if holder is not None and \
            holder.type == "expression_statement" else None
        if omp_words(src, p) is not None and omp_words(src, p)[:1] == ["atomic"]:
            atomics.append(p)
    end = arg.start_byte + len(pragma_clauses(text).encode("utf-8", "surrogateescape"))
    edits = [Edit(end, f" {clause}")]
    for p in dict.fromkeys(atomics):
        edits.append(Edit(p.start_byte, "// "))
    directive = f"#pragma {pragma_clauses(text)}"
    info = PatchInfo("reduction", f"{directive} {clause}", f"{name}:{at}", target=symbol,
                     size=str(size) if size is not None else "",
                     size_bytes=size,
                     scope=f"{count} update(s) of `{symbol}` ({how or 'scalar'} of "
                           f"{' '.join(words)}, {decl.scope} scope) inside the construct, "
                           f"each `{op}`; no other use inside it, none in another function"
                           + (f"; {len(set(atomics))} atomic directive(s) no longer needed"
                              if atomics else ""))
    return make_patch(path, src.data, edits, root,
                      f"reduce {symbol}: {clause} on the construct at line {at}", info)


def _ancestors(node, stop):
    n = node.parent
    while n is not None and n != stop:
        yield n
        n = n.parent
