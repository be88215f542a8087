"""Placement calls: ``numaprof_place(ptr, bytes, NUMAPROF_<POLICY>);`` after a heap
allocation (C; C++ ``new[]`` and ``std::vector``) or before a static array's first touch,
with ``#include "numaprof_place.h"``.  For weighted_interleave the statement is a block
calling ``numaprof_place_weighted`` with the suggestion's nodes and weights.
"""

from __future__ import annotations

import os

from numaprof.recommender import emit
from numaprof.recommender.patch.edits import Edit, Patch, Refusal, make_patch
from numaprof.recommender.patch.source import (
    C_FAMILY,
    Source,
    block_statement,
    contains_row,
    cxx_plain_type,
    cxx_vector_element,
    declarator_name,
    enclosing,
    function_at,
    function_name,
    has_side_effects,
    is_cxx_cast,
    load,
    own_statement,
    parse_refusal,
    strip_parens,
    walk,
)

#: Policy name (recommender.policies) -> constant of numaprof_place.h.
POLICY_CONSTANTS = {
    "first_touch": "NUMAPROF_FIRST_TOUCH",
    "bind_all": "NUMAPROF_BIND_ALL",
    "bind_block": "NUMAPROF_BIND_BLOCK",
    "cyclic": "NUMAPROF_CYCLIC",
    "cyclic_block": "NUMAPROF_CYCLIC_BLOCK",
    "skew_mapp": "NUMAPROF_SKEW_MAPP",
    "prime_mapp": "NUMAPROF_PRIME_MAPP",
    "random": "NUMAPROF_RANDOM",
    "random_block": "NUMAPROF_RANDOM_BLOCK",
    "weighted_interleave": "NUMAPROF_WEIGHTED_INTERLEAVE",
}


PLACE_HEADER = "numaprof_place.h"


# Allocators: name -> index of the byte-count argument (calloc multiplies two).
_ALLOCATORS = {"malloc": 0, "calloc": None, "realloc": 1, "aligned_alloc": 1,
               "memalign": 1, "valloc": 0, "pvalloc": 0, "posix_memalign": 2}


def place_text(ptr: str, size: str, const: str, weighted) -> str:
    """The placement statement: ``numaprof_place(ptr, size, CONST);``, or for
    weighted_interleave with `weighted` = (node ids, weights) the block calling
    ``numaprof_place_weighted`` with them (emit.weighted_place_statement)."""
    if weighted is not None and const == POLICY_CONSTANTS["weighted_interleave"]:
        nodes, weights = weighted
        return emit.weighted_place_statement(ptr, size, nodes, weights)
    return f"numaprof_place({ptr}, {size}, {const});"


def placement_words(const: str, weighted) -> str:
    """How a patch's description names the placement."""
    if weighted is not None and const == POLICY_CONSTANTS["weighted_interleave"]:
        nodes, weights = weighted
        return (f"{const} (weights {':'.join(str(int(w)) for w in weights)} for nodes "
                f"{', '.join(str(int(n)) for n in nodes)})")
    return const


def policy_constant(policy: str) -> str:
    """``cyclic`` or ``NUMAPROF_CYCLIC`` -> ``NUMAPROF_CYCLIC``; ValueError if unknown."""
    if policy in POLICY_CONSTANTS.values():
        return policy
    try:
        return POLICY_CONSTANTS[policy]
    except KeyError:
        raise ValueError(f"no placement constant for policy {policy!r} "
                         f"(known: {', '.join(POLICY_CONSTANTS)})") from None


def include_edit(src: Source) -> Edit | None:
    """Insert ``#include "numaprof_place.h"`` after the last top-level #include, once."""
    for n in walk(src.root):
        if n.type == "preproc_include":
            p = n.child_by_field_name("path")
            if p is not None and src.text(p).strip('"<>') == PLACE_HEADER:
                return None
    line = f'#include "{PLACE_HEADER}"{src.nl}'
    tops = [n for n in src.root.named_children if n.type == "preproc_include"]
    if not tops:
        # A header with an include guard keeps its #includes one level down.
        for guard in src.root.named_children:
            if guard.type in ("preproc_ifdef", "preproc_if"):
                tops = [n for n in guard.named_children if n.type == "preproc_include"]
                if tops:
                    break
    if tops:
        last = tops[-1]
        end = last.end_byte
        if not src.data[:end].endswith(b"\n"):
            return Edit(src.line_end(end), (src.nl if end == len(src.data) else "") + line)
        return Edit(end, line)
    first = next((n for n in src.root.named_children if n.type != "comment"), None)
    return Edit(src.line_start(first.start_byte) if first is not None else 0, line)


def allocation_target(src: Source, call) -> str | None:
    """The variable an allocator call's (or new-expression's) result goes to (lvalue text)."""
    name = allocator_name(src, call)
    if name == "posix_memalign":
        args = call.child_by_field_name("arguments").named_children
        if not args:
            return None
        first = strip_parens(args[0])
        if first is not None and first.type == "pointer_expression" and \
                src.text(first).startswith("&"):
            return src.text(first.child_by_field_name("argument"))
        return None
    n = call
    while n.parent is not None:
        if n.parent.type in ("cast_expression", "parenthesized_expression"):
            n = n.parent
        elif n.parent.type == "argument_list" and is_cxx_cast(src, n.parent.parent) and \
                len(n.parent.named_children) == 1:
            n = n.parent.parent  # static_cast<double *>(malloc(...))
        else:
            break
    parent = n.parent
    if parent is None:
        return None
    if parent.type == "init_declarator" and parent.child_by_field_name("value") == n:
        return declarator_name(parent.child_by_field_name("declarator"))
    if parent.type == "assignment_expression" and parent.child_by_field_name("right") == n \
            and src.text(parent.child_by_field_name("operator")) == "=":
        return src.text(parent.child_by_field_name("left"))
    return None


def allocator_name(src: Source, node) -> str | None:
    """``malloc`` for a call to a C allocator (C++: also ``std::malloc``), else None."""
    if node.type != "call_expression":
        return None
    fn = node.child_by_field_name("function")
    if fn is None:
        return None
    if fn.type == "qualified_identifier" and src.lang == "cpp":
        scope, name = fn.child_by_field_name("scope"), fn.child_by_field_name("name")
        if scope is None or src.text(scope) != "std" or name is None:
            return None
        fn = name
    if fn.type != "identifier" or src.text(fn) not in _ALLOCATORS:
        return None
    return src.text(fn)


def _new_size(src: Source, new, target: str | None, where: str) -> str:
    """Bytes of ``new T[n]`` as ``n * sizeof(*target)``, or ``!reason`` when there is none."""
    if new.child_by_field_name("placement") is not None:
        return (f"!the new-expression at {where} is a placement new: it constructs in memory "
                "allocated elsewhere, which is where a placement belongs")
    decl = new.child_by_field_name("declarator")
    length = decl.child_by_field_name("length") if decl is not None and \
        decl.type == "new_declarator" else None
    if length is None:
        return (f"!the new-expression at {where} allocates one object, not an array; "
                "numaprof places arrays")
    if has_side_effects(length):
        return (f"!the length of the new[] at {where} has side effects; it cannot be "
                "evaluated twice")
    # sizeof(*p) is the element size whatever T is (also for new T[n][4]).
    return f"{operand(src, length)} * sizeof(*{target})"


def _size_expression(src: Source, call) -> str | None:
    name = allocator_name(src, call)
    args = call.child_by_field_name("arguments").named_children
    args = [a for a in args if a.type != "comment"]
    if any(has_side_effects(a) for a in args):
        return None
    if name == "calloc":
        if len(args) != 2:
            return None
        return " * ".join(operand(src, a) for a in args)
    idx = _ALLOCATORS[name]
    return src.text(args[idx]) if idx < len(args) else None


def operand(src: Source, node) -> str:
    simple = ("identifier", "number_literal", "sizeof_expression", "parenthesized_expression",
              "subscript_expression", "field_expression", "call_expression")
    t = src.text(node)
    return t if node.type in simple else f"({t})"


def place_after_allocation(path: str, line: int, var: str | None, policy_const: str,
                           size_expr: str | None = None, *,
                           root: str | None = None, weighted=None) -> Patch | Refusal:
    """Insert ``numaprof_place(var, bytes, POLICY);`` after the allocation on `line`.

    `line` is the 1-based source line of the allocation (from DWARF); `var` the variable
    that receives the pointer (None: the only allocation on that line); `policy_const`
    a policy name (``cyclic``) or constant (``NUMAPROF_CYCLIC``).  The byte count is
    the allocator's argument (``calloc``: the product of both) unless `size_expr`
    gives one.  The call gets the indentation of the allocation statement, and
    ``#include "numaprof_place.h"`` goes after the last #include.  Diff paths are
    relative to `root` (default: the current directory).  For weighted_interleave,
    `weighted` = (node ids, weights) makes the statement a block calling
    ``numaprof_place_weighted`` with them (without it: the header's default, equal
    weights over all nodes).
    """
    path = os.path.abspath(path)
    const = policy_constant(policy_const)
    src = load(path, want=C_FAMILY)
    if isinstance(src, Refusal):
        return Refusal(path, line, src.reason)
    row = line - 1
    bad = parse_refusal(src, function_at(src, row), line)
    if bad is not None:
        return bad
    candidates = []
    in_initialiser = False
    for n in walk(src.root):
        if allocator_name(src, n) is None and not (
                n.type == "new_expression" and src.lang == "cpp"):
            continue
        own = own_statement(n)
        if own is None or not contains_row(own, row):
            if contains_row(n, row) and enclosing(n, "field_initializer") is not None:
                in_initialiser = True
            continue
        stmt = block_statement(n)
        if stmt != own:
            holder = own.parent.type.replace("_statement", "").replace("_clause", "")
            return Refusal(path, line, f"the allocation at {os.path.basename(path)}:{line} "
                                       f"is the body of an `{holder}` without braces",
                           "numactl")
        candidates.append((n, stmt, allocation_target(src, n)))
    where = f"{os.path.basename(path)}:{line}"
    if not candidates and src.lang == "cpp":
        vec = cxx_vector_construction(src, row, var)
        if vec is not None:
            return _place_vector(src, vec, const, where, root, weighted)
    if not candidates:
        if in_initialiser:
            return Refusal(path, line, f"the allocation at {where} is in a constructor's member "
                                       "initialiser list; a placement call needs a statement "
                                       "after it (assign it in the constructor body instead)",
                           "numactl")
        what = ("new[], std::vector construction or malloc/calloc/realloc/aligned_alloc/"
                "posix_memalign" if src.lang == "cpp" else
                "malloc/calloc/realloc/aligned_alloc/posix_memalign call")
        return Refusal(path, line, f"no {what} in a block statement at {where}", "numactl")

    def same(target: str | None) -> bool:
        return target is not None and (target == var or (
            target.startswith("this->") and target[len("this->"):] == var))

    if var is not None:
        chosen = [c for c in candidates if same(c[2])]
    else:
        chosen = [c for c in candidates if c[2] is not None]
    if len(chosen) != 1:
        what = f"assigned to `{var}`" if var is not None else "assigned to a variable"
        many = "more than one allocation" if chosen else "no allocation"
        return Refusal(path, line, f"{many} {what} at {where}", "numactl")
    call, stmt, target = chosen[0]
    func = stmt.parent
    while func is not None and func.type != "function_definition":
        func = func.parent
    if func is not None and any(
            n.type == "return_statement" and n.named_children
            and src.text(strip_parens(n.named_children[0]) or n) == target
            for n in walk(func)):
        # An allocation wrapper: a placement here would hit every caller's arrays.
        fname = function_name(func)
        return Refusal(path, line, f"the allocation at {where} is in `{fname}`, which returns "
                                   "it: a wrapper shared by other allocations; not placing "
                                   "there", "numactl")
    touched = ""
    if call.type == "new_expression":
        size = _new_size(src, call, target, where)
        if isinstance(size, str) and size.startswith("!"):
            return Refusal(path, line, size[1:], "numactl")
        if call.child_by_field_name("arguments") is not None:
            touched = (" (the new-expression initialises the elements, so the call moves the "
                       "pages it touched)")
        elif not cxx_plain_type(src, call.child_by_field_name("type")):
            touched = (" (if the element constructors write the memory, the call moves the "
                       "pages they touched)")
        size = size_expr or size
    else:
        size = size_expr or _size_expression(src, call)
    if size is None:
        return Refusal(path, line, f"the size argument of the allocation at {where} has "
                                   "side effects; it cannot be evaluated twice", "numactl")
    text = place_text(target, size, const, weighted)
    edits = [edit_after(src, stmt, text)]
    inc = include_edit(src)
    if inc is not None:
        edits.append(inc)
    return make_patch(path, src.data, edits, root,
                       f"place `{target}` with {placement_words(const, weighted)} after its allocation "
                       f"at {where}{touched}")


def edit_after(src: Source, stmt, text: str) -> Edit:
    """Insert the statement `text` after `stmt`, on its own line when `stmt` has one."""
    rest = src.data[stmt.end_byte:src.line_end(stmt.end_byte)]
    rest_is_comment = rest.strip() == b"" or rest.strip().startswith((b"//", b"/*"))
    if rest_is_comment and src.starts_line(stmt):
        at = src.line_end(stmt.end_byte)
        prefix = src.nl if at == len(src.data) and not src.data.endswith(b"\n") else ""
        return Edit(at, f"{prefix}{src.indent(stmt)}{text}{src.nl}")
    # Other code shares the line (``a = malloc(n); }``): insert right after the
    # statement so the call stays inside the same block.
    return Edit(stmt.end_byte, f" {text}")


def cxx_vector_construction(src: Source, row: int, var: str | None):
    """The block-level declaration that constructs a `std::vector` with elements on `row`.

    Returns (statement, name, element type node), a Refusal, or None when there is none.
    ``std::vector<T> v(n)`` parses as a function declarator (C++'s most vexing parse);
    ``v(n, x)``, ``v{...}`` and ``v = std::vector<T>(n)`` are constructions too.
    """
    found = []
    for n in walk(src.root):
        if n.type != "declaration" or not contains_row(n, row):
            continue
        elem = cxx_vector_element(src, n.child_by_field_name("type"))
        if elem is None:
            continue
        for d in n.children_by_field_name("declarator"):
            inner = d.child_by_field_name("declarator")
            if d.type == "function_declarator" or (
                    d.type == "init_declarator" and inner is not None and
                    inner.type == "identifier"):
                name = declarator_name(inner if d.type == "function_declarator" else d)
                if name and (var is None or name == var):
                    found.append((n, name, elem))
    if len(found) != 1:
        return None
    stmt, name, elem = found[0]
    where = f"{os.path.basename(src.path)}:{row + 1}"
    if src.text(elem).strip() == "bool":
        return Refusal(src.path, row + 1, f"`{name}` at {where} is a std::vector<bool>, which "
                                          "packs bits and has no data() to place", "numactl")
    if block_statement(stmt) != stmt:
        return Refusal(src.path, row + 1, f"the std::vector `{name}` at {where} is not "
                                          "constructed in a block of a function", "numactl")
    return stmt, name, elem


def _place_vector(src: Source, found, const: str, where: str, root,
                  weighted=None) -> Patch | Refusal:
    if isinstance(found, Refusal):
        return found
    stmt, name, _elem = found
    text = place_text(f"{name}.data()", f"{name}.size() * sizeof(*{name}.data())", const,
                       weighted)
    edits = [edit_after(src, stmt, text)]
    inc = include_edit(src)
    if inc is not None:
        edits.append(inc)
    return make_patch(src.path, src.data, edits, root,
                       f"place std::vector `{name}` with {placement_words(const, weighted)} after its "
                       f"construction at "
                       f"{where} (the constructor already wrote the elements: the call "
                       "moves those pages)")


def file_scope_array(src: Source, symbol: str):
    """(declaration, array declarator, declarator) of a file-scope array, C++: also one
    in a named namespace, spelt ``ns::name`` as the symbol table demangles it."""
    *spaces, name = symbol.split("::") if src.lang == "cpp" else [symbol]
    scopes = [(src.root, [])]
    while scopes:
        scope, where = scopes.pop()
        for decl in scope.named_children:
            if decl.type == "namespace_definition":
                ns = decl.child_by_field_name("name")
                body = decl.child_by_field_name("body")
                if ns is not None and body is not None:
                    # `namespace a::b {` is a nested namespace definition
                    scopes.append((body, where + src.text(ns).replace(" ", "").split("::")))
                continue
            if decl.type == "linkage_specification":  # extern "C" { ... }
                body = decl.child_by_field_name("body")
                if body is not None and body.type == "declaration_list":
                    scopes.append((body, where))
                elif body is not None:
                    scopes.append((decl, where))
                continue
            if decl.type != "declaration" or where != spaces:
                continue
            for d in decl.children_by_field_name("declarator"):
                inner = d.child_by_field_name("declarator") if d.type == "init_declarator" \
                    else d
                if inner is not None and inner.type == "array_declarator" and \
                        declarator_name(inner) == name:
                    return decl, inner, d
    return None


def place_static(path: str, symbol: str, policy_const: str, before_line: int | None = None,
                 *, root: str | None = None, weighted=None) -> Patch | Refusal:
    """Insert ``numaprof_place(sym, sizeof(sym), POLICY);`` before a static array's first touch.

    Without `before_line` the call goes at the start of ``main()`` (after its leading
    declarations, so C89 code stays C89); with it, before the outermost statement of the
    function that contains that line (the first-touch loop), and before any #pragma
    attached to that statement.  The array must be defined with a size at file scope
    in `path`, before the insertion point, so that ``sizeof(sym)`` is its size.
    `weighted` as in `place_after_allocation`.
    """
    path = os.path.abspath(path)
    const = policy_constant(policy_const)
    src = load(path, want=C_FAMILY)
    line = before_line or 0
    if isinstance(src, Refusal):
        return Refusal(path, line, src.reason)
    found = file_scope_array(src, symbol)
    name = os.path.basename(path)
    if found is None:
        return Refusal(path, line, f"`{symbol}` is not an array defined at file scope in "
                                   f"{name}", "numactl")
    decl, arr, _ = found
    has_init = any(d.type == "init_declarator" for d in decl.children_by_field_name("declarator"))
    if arr.child_by_field_name("size") is None and not has_init:
        return Refusal(path, line, f"`{symbol}` is declared without a size in {name}; "
                                   "sizeof cannot give its length", "numactl")
    funcs = [n for n in walk(src.root) if n.type == "function_definition"]
    if before_line is not None:
        func = next((f for f in funcs if contains_row(f, before_line - 1)), None)
        if func is None:
            return Refusal(path, line, f"line {before_line} of {name} is not inside a "
                                       "function", "numactl")
        body = func.child_by_field_name("body")
        stmt = next((s for s in body.named_children
                     if s.type != "comment" and contains_row(s, before_line - 1)), None)
        if stmt is None:
            return Refusal(path, line, f"no statement at line {before_line} of {name}",
                           "numactl")
        # A #pragma belongs to the statement after it: insert above the pragmas.
        while stmt.prev_named_sibling is not None and stmt.prev_named_sibling.type == \
                "preproc_call":
            stmt = stmt.prev_named_sibling
    else:
        func = next((f for f in funcs if function_name(f) == "main"), None)
        if func is None:
            return Refusal(path, line, f"{name} has no main() to place `{symbol}` in",
                           "numactl")
        body = func.child_by_field_name("body")
        stmts = [s for s in body.named_children if s.type != "comment"]
        stmt = next((s for s in stmts if s.type != "declaration"
                     or symbol.rsplit("::", 1)[-1] in {
                         i.text.decode() for i in walk(s) if i.type == "identifier"}),
                    None)
        if stmt is None:
            return Refusal(path, line, f"main() in {name} has no statement to place "
                                       f"`{symbol}` before", "numactl")
        while stmt.prev_named_sibling is not None and stmt.prev_named_sibling.type == \
                "preproc_call":
            stmt = stmt.prev_named_sibling
    bad = parse_refusal(src, func, line)
    if bad is not None:
        return bad
    if stmt.start_byte < decl.end_byte:
        return Refusal(path, line, f"`{symbol}` is defined after the place it is first "
                                   f"touched in {name}", "numactl")
    text = place_text(symbol, f"sizeof({symbol})", const, weighted)
    if src.starts_line(stmt):
        indent = src.indent(stmt)
        if stmt.type == "preproc_call":
            # Pragmas often sit in column 0; indent like the statement they precede.
            nxt = stmt
            while nxt is not None and nxt.type == "preproc_call":
                nxt = nxt.next_named_sibling
            indent = src.indent(nxt) if nxt is not None else indent
        edit = Edit(src.line_start(stmt.start_byte), f"{indent}{text}{src.nl}")
    else:
        edit = Edit(stmt.start_byte, f"{text} ")
    edits = [edit]
    inc = include_edit(src)
    if inc is not None:
        edits.append(inc)
    where = f"line {before_line}" if before_line else "the start of main()"
    return make_patch(path, src.data, edits, root,
                       f"place static `{symbol}` with {placement_words(const, weighted)} before {where} "
                       f"of {name}")
