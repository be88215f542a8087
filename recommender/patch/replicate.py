"""A copy per node of data written first and then only read (replicate): the calls of
numaprof_place.h written into the function that initialises and reads it.

A lookup table filled by the main thread and then read by the threads of every node has
no placement that is local to all of them; a copy on each node is (Dashti et al.,
"Traffic management: a holistic approach to memory placement on NUMA systems", ASPLOS
2013, §3).  The patch is insertions only (recommender/patch/edits.py):

    for (long i = 0; i < n; i++)
        table[i] = f(i);
    numaprof_replicate(table, malloc_usable_size(table));   /* after the last write */
    ...
    #pragma omp parallel for
    for (...)
        sum += NUMAPROF_LOCAL(table)[k];                     /* reads in parallel code */
    ...
    (void)numaprof_replicate_free(table), free(table);

It is made only when the patch maker can see that the object is not written after the
copy: every use of the name (resolved in scope) is in one function; each use is an
element read ``x[i]``, an element write (``x[i] = ...``, ``x[i] += ...``, ``&x[i]``),
the allocation that sets the pointer, ``free(x)``, ``sizeof`` or a null test — a pointer
passed to a function, copied or offset could be written through, and is refused; the
copy goes after the last top-level statement of that function that writes the object,
and at least one read inside an OpenMP parallel construct comes after it.  For a static
array or a file-scope pointer the function may run again: the copies are dropped before
its first write (``numaprof_replicate_free``, which does nothing when there are none).
Heap objects come from malloc, calloc, realloc, aligned_alloc or posix_memalign (their
usable size is copied: ``malloc_usable_size``); static arrays copy ``sizeof``.
"""

from __future__ import annotations

import os

from numaprof.recommender.patch import scope
from numaprof.recommender.patch.edits import Edit, Patch, PatchInfo, Refusal, make_patch
from numaprof.recommender.patch.place import (
    PLACE_HEADER,
    allocation_target_node,
    allocator_name,
    edit_after,
    include_edit,
)
from numaprof.recommender.patch.place_static import file_scope_arrays
from numaprof.recommender.patch.source import (
    C_FAMILY,
    Source,
    function_name,
    load,
    omp_words,
    pragma_before,
    pragma_clauses,
    walk,
)

_WRITE_PARENTS = ("assignment_expression", "update_expression")
_HEAP_ALLOCATORS = ("malloc", "calloc", "realloc", "aligned_alloc", "posix_memalign",
                    "memalign", "valloc", "reallocarray")


def _by_hand(symbol: str) -> str:
    return (f"after `{symbol}` is initialised call numaprof_replicate({symbol}, bytes) "
            f"(#include \"{PLACE_HEADER}\"), read it in parallel code as "
            f"NUMAPROF_LOCAL({symbol})[i], and call numaprof_replicate_free({symbol}) "
            "before it is written again or freed")


def _pragma_words(src: Source, node) -> list[str] | None:

    return omp_words(src, pragma_before(node))


def _in_parallel(src: Source, node, stop) -> bool:
    """Whether an OpenMP ``parallel`` construct between `node` and `stop` runs it."""
    return _parallel_construct(src, node, stop)[0] is not None


def _parallel_construct(src: Source, node, stop):
    """(pragma, statement) of the innermost ``#pragma omp parallel...`` running `node`."""
    n = node
    while n is not None and n != stop:
        w = _pragma_words(src, n)
        if w and w[0] == "parallel":
            return pragma_before(n), n
        n = n.parent
    return None, None


def _local_name(src: Source, symbol: str) -> str:
    """``<symbol>_local``, or with a number when the file already has that name."""
    names = {src.text(n) for n in walk(src.root) if n.type == "identifier"}
    name, k = f"{symbol}_local", 2
    while name in names:
        name, k = f"{symbol}_local{k}", k + 1
    return name


def _local_copy_edits(src: Source, pragma, node, symbol: str, local: str) -> list[Edit] | str:
    """The edits giving each thread of the construct `local`, this node's copy of
    `symbol`, taken once per thread: declared at the start of a ``parallel`` region's
    block; for a ``parallel for`` loop, a ``firstprivate`` null pointer set in the
    thread's first iteration.  A string says why neither applies."""

    words = omp_words(src, pragma)
    at = pragma.start_point[0] + 1
    typed = f"__typeof__(&({symbol})[0]) {local}"
    take = f"NUMAPROF_LOCAL({symbol})"
    if words == ["parallel"] and node.type == "compound_statement":
        return [Edit(node.start_byte + 1, f"{src.nl}{src.indent(node)}    {typed} = {take};")]
    if words[:2] != ["parallel", "for"] or node.type != "for_statement":
        return (f"the reads are in `#pragma omp {' '.join(words)}` at line {at}: only a "
                "parallel region's block or a parallel for loop is given a copy per thread")
    arg = pragma.child_by_field_name("argument")
    clauses = pragma_clauses(src.text(arg))
    if "\\" in clauses or "collapse" in clauses:
        return (f"the directive at line {at} continues over several lines or collapses "
                "loops")
    if pragma.parent is None or pragma.parent.type != "compound_statement":
        return f"the directive at line {at} is not in a block"
    end = arg.start_byte + len(clauses.encode("utf-8", "surrogateescape"))
    set_it = f"if (!{local}) {local} = {take};"
    body = node.child_by_field_name("body")
    edits = [Edit(src.line_start(pragma.start_byte),
                  f"{src.indent(pragma) or src.indent(node)}{typed} = 0;{src.nl}"),
             Edit(end, f" firstprivate({local})")]
    if body is not None and body.type == "compound_statement":
        edits.append(Edit(body.start_byte + 1, f" {set_it}"))
    elif body is not None:
        edits += [Edit(body.start_byte, f"{{ {set_it} "), Edit(body.end_byte, " }")]
    else:
        return f"the loop at line {at} has no body"
    return edits


def at_line(node) -> int:
    return node.end_point[0] + 1


def _route_reads(src: Source, idents, func, name: str) -> tuple[list[Edit], int, str]:
    """The edits sending the reads `idents` of `name` (in parallel constructs of `func`)
    to this node's copy, through one per-thread pointer per construct: (edits, reads
    routed, why a construct could not be)."""
    local = _local_name(src, name)
    constructs: dict[int, tuple] = {}
    for ident in idents:
        pragma, node = _parallel_construct(src, ident, func)
        constructs.setdefault(pragma.start_byte, (pragma, node, []))[2].append(ident)
    edits, routed, why = [], 0, ""
    for pragma, node, found in constructs.values():
        got = _local_copy_edits(src, pragma, node, name, local)
        if isinstance(got, str):
            why = why or got
            continue
        edits += got + [Edit(i.end_byte, local[len(name):]) for i in found]
        routed += len(found)
    return edits, routed, why


def _top_statement(body, node):
    """The statement of the function body `body` that holds `node`."""
    n = node
    while n is not None and n.parent != body:
        n = n.parent
    return n


def _use_kind(src: Source, ident, allocation) -> tuple[str, object]:
    """How a use of the object's name uses it: (kind, node) with kind ``read``, ``write``,
    ``alloc``, ``free``, ``neutral`` or ``other``."""
    parent = ident.parent
    # (x) counts as x
    node = ident
    while parent is not None and parent.type == "parenthesized_expression":
        node, parent = parent, parent.parent
    if parent is None:
        return "other", ident
    if allocation is not None and node == allocation:
        return "alloc", parent
    if parent.type == "subscript_expression" and parent.child_by_field_name("argument") == node:
        # the element, or a member or element of it (x[i].v, x[i][j]): the whole lvalue
        lvalue = parent
        up = lvalue.parent
        while up is not None and (
                up.type == "parenthesized_expression" or
                (up.type in ("field_expression", "subscript_expression") and
                 up.child_by_field_name("argument") == lvalue)):
            lvalue, up = up, up.parent
        if up is not None and up.type in _WRITE_PARENTS:
            target = up.child_by_field_name("left" if up.type == "assignment_expression"
                                            else "argument")
            if target is not None and target.start_byte <= lvalue.start_byte and \
                    lvalue.end_byte <= target.end_byte:
                return "write", lvalue
        if up is not None and up.type == "pointer_expression" and \
                src.text(up).lstrip().startswith("&"):
            return "write", lvalue  # &x[i]: may be written through
        return "read", lvalue
    if parent.type == "argument_list":
        call = parent.parent
        fn = call.child_by_field_name("function") if call is not None else None
        name = src.text(fn) if fn is not None else ""
        if name in ("free", "std::free") and len(parent.named_children) == 1:
            return "free", call
        if fn is not None and fn.type == "identifier":
            param = _const_pointer_parameter(src, name, parent.named_children.index(node))
            if param is not None:
                return "pass", param
        return "other", call
    if parent.type in ("sizeof_expression",):
        return "neutral", parent
    if parent.type == "unary_expression" and src.text(parent).lstrip().startswith("!"):
        return "neutral", parent
    if parent.type == "binary_expression" and \
            src.text(parent.child_by_field_name("operator")) in ("==", "!="):
        other = parent.child_by_field_name("right" if parent.child_by_field_name("left") == node
                                           else "left")
        if other is not None and src.text(other).strip() in ("NULL", "0", "nullptr"):
            return "neutral", parent
    if parent.type in ("if_statement", "while_statement") or (
            parent.type == "condition_clause"):
        return "neutral", parent
    return "other", parent


def _factory(src: Source, call):
    """The function a call calls, when it is defined in the file and returns a block it
    allocates (malloc & co.) into a local pointer that it only fills, reads, tests and
    returns; else None."""
    fn = call.child_by_field_name("function")
    if fn is None or fn.type != "identifier":
        return None
    defs = [f for f in walk(src.root) if f.type == "function_definition"
            and function_name(f) == src.text(fn)]
    if len(defs) != 1:
        return None
    func = defs[0]
    returns = [n for n in walk(func) if n.type == "return_statement"]
    values = [scope._unparen(r.named_children[0]) if r.named_children else None
              for r in returns]
    if not values or any(v is None or v.type != "identifier" for v in values) or \
            len({src.text(v) for v in values}) != 1:
        return None
    var = src.text(values[0])
    allocs = [n for n in walk(func) if allocator_name(src, n) in _HEAP_ALLOCATORS]
    owner = None
    for a in allocs:
        t = allocation_target_node(src, a)
        ident = scope.declarator_identifier(t) if t is not None and \
            t.type == "init_declarator" else t
        if ident is not None and ident.type == "identifier" and src.text(ident) == var:
            owner = ident
    if owner is None:
        return None
    decl = scope.lookup(src, var, values[0].start_byte)
    if decl is None or decl.scope != "local":
        return None
    for n in walk(func):
        if n.type != "identifier" or src.text(n) != var or n == owner:
            continue
        found = scope.lookup(src, var, n.start_byte)
        if found is None or found.node != decl.node or \
                (decl.declarator is not None and scope.declarator_identifier(decl.declarator) == n):
            continue
        kind, _ = _use_kind(src, n, owner)
        if kind == "other" and not (n.parent is not None and
                                    (n.parent.type == "return_statement" or
                                     scope._unparen(n.parent) in values)):
            return None
        if kind in ("free", "pass"):
            return None
    return func


def _const_pointer_parameter(src: Source, func_name: str, index: int):
    """The `index`-th parameter of the one function `func_name` defined in the file, when
    it is a pointer to const (``const T *p``, ``const T p[]``): (function, declaration,
    its identifier); else None."""
    defs = [f for f in walk(src.root) if f.type == "function_definition"
            and function_name(f) == func_name]
    if len(defs) != 1:
        return None
    params = scope.function_parameters(defs[0])
    if index >= len(params):
        return None
    param = params[index]
    decl = param.child_by_field_name("declarator")
    if decl is None or decl.type not in ("pointer_declarator", "array_declarator"):
        return None
    inner = decl.child_by_field_name("declarator")
    if inner is None or inner.type != "identifier":
        return None  # T **p, T (*p)[n]: not one level of pointer
    # the pointee is const: `const T *p`, `T const *p`, `const T p[]`
    if "const" not in src.text(param)[:decl.start_byte - param.start_byte].split():
        return None
    ident = inner
    return defs[0], param, ident


def _callee_reads(src: Source, callee, param, ident) -> list | str:
    """The parameter's element reads in parallel code of `callee`, or why the callee is
    not patched (a use that could write through it or copy it)."""
    pname = src.text(ident)
    reads = []
    for n in walk(callee):
        if n.type != "identifier" or n == ident or src.text(n) != pname:
            continue
        found = scope.lookup(src, pname, n.start_byte)
        if found is None or found.node != param:
            continue
        kind, _ = _use_kind(src, n, None)
        if kind == "other" or kind == "write":
            line = n.start_point[0] + 1
            return (f"`{pname}` of {function_name(callee)}() is used as "
                    f"`{' '.join(src.text(n.parent).split())[:60]}` at line {line}")
        if kind == "read" and _in_parallel(src, n, callee):
            reads.append(n)
    return reads


def replicate_patch(path: str, symbol: str, alloc_line: int | None = None, *,
                    root: str | None = None, one_unit: bool = False) -> Patch | Refusal:
    """The replicate patch of `symbol` in `path`: a heap object allocated at `alloc_line`
    (its pointer variable is `symbol`), or a static array (`alloc_line` None)."""
    path = os.path.abspath(path)
    name = os.path.basename(path)

    def refuse(line: int, why: str) -> Refusal:
        return Refusal(path, line, why, fallback="", by_hand=_by_hand(symbol))

    src = load(path, want=C_FAMILY)
    if isinstance(src, Refusal):
        return Refusal(path, 0, src.reason, fallback="", by_hand=_by_hand(symbol))
    allocation = None
    if alloc_line is not None:
        row = alloc_line - 1
        calls = [n for n in walk(src.root) if n.start_point[0] <= row <= n.end_point[0]
                 and allocator_name(src, n) in _HEAP_ALLOCATORS]
        targets = [(c, allocation_target_node(src, c)) for c in calls]
        targets = [(c, t) for c, t in targets if t is not None and
                   (scope.declarator_identifier(t) if t.type == "init_declarator" else t) is not None]
        if not targets:
            # `double *t = build_table(n);`: a function of the file that allocates the
            # block, fills it and returns it
            calls = [n for n in walk(src.root) if n.start_point[0] <= row <= n.end_point[0]
                     and n.type == "call_expression" and _factory(src, n) is not None]
            targets = [(c, allocation_target_node(src, c)) for c in calls]
            targets = [(c, t) for c, t in targets if t is not None]
        hits = []
        for c, t in targets:
            ident = scope.declarator_identifier(t) if t.type == "init_declarator" else t
            if ident is not None and ident.type == "identifier" and src.text(ident) == symbol:
                hits.append((c, ident))
        if len(hits) != 1:
            return refuse(alloc_line, f"{name}:{alloc_line} has no allocation by malloc & co. "
                                      f"whose pointer goes to a variable `{symbol}`"
                          if not hits else
                          f"{name}:{alloc_line} allocates `{symbol}` {len(hits)} times")
        call, allocation = hits[0]
        stmt = allocation
        while stmt.parent is not None and not (stmt.type.endswith("_statement")
                                               or stmt.type == "declaration"):
            stmt = stmt.parent
        decl = scope.lookup(src, symbol, stmt.end_byte)
        if decl is None or decl.node is None or decl.scope not in ("file", "local"):
            return refuse(alloc_line, f"`{symbol}` is not declared in {name} as a variable")
        if scope.derivation(decl) != "pointer":
            return refuse(decl.line, f"`{symbol}` is not a pointer variable")
        size = f"malloc_usable_size({symbol})"
    else:
        decls = file_scope_arrays(src, symbol)
        if len(decls) != 1:
            return refuse(0, f"`{symbol}` is not one array defined at file scope in {name}")
        decl = decls[0]
        if decl.extern:
            return refuse(decl.line, f"`{symbol}` is only declared `extern` in {name}")
        size = f"sizeof({symbol})"
    if decl.scope == "file" and not (scope._has_storage(decl.node, "static") or one_unit):
        return refuse(decl.line, f"`{symbol}` is visible to the program's other files (not "
                                 "`static`): what they write is not seen by the patch")

    # every use, classified
    own = scope.declarator_identifier(decl.declarator) if decl.declarator is not None else None
    uses = []
    for ident in walk(src.root):
        if ident.type != "identifier" or ident == own or src.text(ident) != symbol:
            continue
        found = scope.lookup(src, symbol, ident.start_byte)
        if found is None or found.node != decl.node:
            continue
        kind, node = _use_kind(src, ident, allocation)
        line = ident.start_point[0] + 1
        if kind == "other":
            text = " ".join(src.text(node).split())[:60]
            return refuse(line, f"`{symbol}` is used as `{text}` at {name}:{line}: a pointer "
                                "passed, copied or offset may be written through")
        uses.append((kind, ident, node, line))
    if allocation is not None and allocation == own:
        # `T *x = malloc(...)` / `= build_table(...)`: the declaration sets (and, through a
        # function that fills the block, writes) the object
        uses.append(("alloc", allocation, allocation.parent, allocation.start_point[0] + 1))
    if not uses:
        return refuse(decl.line, f"`{symbol}` is not used in {name}")
    funcs = {scope.enclosing_function(u[1]) for u in uses}
    if len(funcs) != 1 or None in funcs:
        where = sorted({u[3] for u in uses if scope.enclosing_function(u[1]) is not None})
        return refuse(uses[0][3], f"`{symbol}` is used in {len(funcs)} functions (lines "
                                  f"{', '.join(map(str, where[:6]))}): the order of their "
                                  "writes and reads is not seen in one place")
    func = funcs.pop()
    body = func.child_by_field_name("body")
    fname = function_name(func) or "the function"
    writes = [u for u in uses if u[0] in ("write", "alloc")]
    if not writes:
        return refuse(decl.line, f"no write of `{symbol}` is seen in {name}: where it is "
                                 "initialised is not known")
    tops = {id(u[1]): _top_statement(body, u[1]) for u in uses}
    last_write = max((tops[id(u[1])] for u in writes), key=lambda n: n.start_byte)
    first_write = min((tops[id(u[1])] for u in writes), key=lambda n: n.start_byte)
    after = [u for u in uses if u[1].start_byte >= last_write.end_byte]
    # passed to a function's `const T *` parameter: in parallel code, the argument is
    # this node's copy; in serial code, the callee's parallel reads of the parameter are
    callees: dict[int, tuple] = {}
    for u in after:
        if u[0] == "pass" and not _in_parallel(src, u[1], func):
            callees.setdefault(u[2][1].start_byte, u[2])
    callee_reads = {}
    for key, (callee, param, pident) in callees.items():
        got = _callee_reads(src, callee, param, pident)
        if isinstance(got, str):
            return refuse(pident.start_point[0] + 1, got)
        if got:
            callee_reads[key] = (callee, pident, got)
    reads = [u for u in after if u[0] in ("read", "pass") and _in_parallel(src, u[1], func)]
    if not reads and not callee_reads:
        line = last_write.end_point[0] + 1
        return refuse(line, f"no read of `{symbol}` in parallel code follows its last write "
                            f"(the statement ending at {name}:{line}) in {fname}(): "
                            "it is not written first, then only read there")
    free_before = [u for u in uses if u[0] == "free" and u[1].start_byte < last_write.end_byte]
    if free_before and allocation is None:
        return refuse(free_before[0][3], f"`{symbol}` is freed before its last write")

    edits = [edit_after(src, last_write, f"numaprof_replicate({symbol}, {size});")]
    inc = include_edit(src)
    if inc is not None:
        edits.append(inc)
    if allocation is not None and not any(
            n.type == "preproc_include" and n.child_by_field_name("path") is not None
            and src.text(n.child_by_field_name("path")).strip("<>\"") == "malloc.h"
            for n in walk(src.root)):
        first_include = inc.offset if inc is not None else 0
        edits.append(Edit(first_include, f"#include <malloc.h>{src.nl}"))
    if decl.scope == "file":
        # the function may run again: its writes must not go under live copies
        edits.append(Edit(first_write.start_byte,
                          f"numaprof_replicate_free({symbol});{src.nl}{src.indent(first_write)}"))
    edits_main, routed, why = _route_reads(src, [u[1] for u in reads], func, symbol)
    edits += edits_main
    in_callees = []
    for callee, pident, preads in callee_reads.values():
        more, n, why2 = _route_reads(src, preads, callee, src.text(pident))
        edits += more
        routed += n
        why = why or why2
        if n:
            in_callees.append(function_name(callee) or "?")
    if not routed:
        return refuse(reads[0][3] if reads else at_line(last_write), why)
    frees = [u for u in uses if u[0] == "free"]
    for _, _, call, _ in frees:
        edits.append(Edit(call.start_byte, f"(void)numaprof_replicate_free({symbol}), "))
    at = last_write.end_point[0] + 1
    statement = f"numaprof_replicate({symbol}, {size});"
    info = PatchInfo("replicate", statement, f"{name}:{at}", target=symbol, size=size,
                     scope=f"every use of `{symbol}` in {fname}(): {len(writes)} write(s), the "
                           f"last ending at line {at}; {routed} read(s) in "
                           f"parallel code after it read this node's copy, taken once per "
                           f"thread" + (f" (also in {', '.join(sorted(set(in_callees)))}(), "
                                        "through its const pointer parameter)"
                                        if in_callees else "")
                           + f"; {len(frees)} free(s) drop the copies first")
    return make_patch(path, src.data, edits, root,
                      f"replicate {symbol}: a copy per node after line {at}, "
                      f"{routed} parallel read(s) of this node's copy", info)
