"""Placement of a static array: ``numaprof_place(a, sizeof(a), NUMAPROF_<POLICY>);`` before
its first touch, or at the start of ``main()``.

``sizeof(a)`` is the array's size only where ``a`` denotes the array: the name is
resolved at the insertion point with the parser's scopes (recommender/patch/scope.py).
Where a parameter (``void fill(int a[])``, ``int *a``), a local or a macro of the same
name hides the file-scope array — the array is then reached through that parameter, and
``sizeof`` would give the size of a pointer — the call goes to the start of ``main()``
instead, where the name is checked again; C++ names the hidden global ``::a``.  The size
is compared with the one the profile recorded, from the file's own constants when it can
be evaluated here, and by the compile check (a probe statement the compiler must accept)
in every case.
"""

from __future__ import annotations

import os

from numaprof.recommender.patch import scope
from numaprof.recommender.patch.edits import (
    AlreadyPlaced,
    Edit,
    Patch,
    PatchInfo,
    Refusal,
    make_patch,
)
from numaprof.recommender.patch.place import (
    by_hand_words,
    find_placement,
    place_text,
    placement_words,
    policy_constant,
    with_include,
)
from numaprof.recommender.patch.source import (
    C_FAMILY,
    Source,
    contains_row,
    function_name,
    load,
    parse_refusal,
    walk,
)


def file_scope_arrays(src: Source, symbol: str) -> list[scope.Decl]:
    """Every file-scope declaration (definitions and ``extern`` ones) of the array
    `symbol` (C++: also in a named namespace, spelt ``ns::name`` as the symbol table
    demangles it), in file order; declarations in ``#if`` branches and ``extern "C"``
    blocks count.  A name declared as an array through a typedef counts too."""
    *spaces, name = symbol.split("::") if src.lang == "cpp" else [symbol]
    found = []
    todo = [(src.root, [])]
    while todo:
        container, where = todo.pop(0)
        for decl in container.named_children:
            if decl.type == "namespace_definition":
                ns = decl.child_by_field_name("name")
                body = decl.child_by_field_name("body")
                if ns is not None and body is not None:
                    # `namespace a::b {` is a nested namespace definition
                    todo.append((body, where + src.text(ns).replace(" ", "").split("::")))
                continue
            if decl.type == "linkage_specification":  # extern "C" { ... }
                body = decl.child_by_field_name("body")
                todo.append((body if body is not None and body.type == "declaration_list"
                             else decl, where))
                continue
            if decl.type in ("preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif"):
                todo.append((decl, where))
                continue
            if decl.type != "declaration" or where != spaces:
                continue
            for d in decl.children_by_field_name("declarator"):
                ident = scope.declarator_identifier(d)
                if ident is None or src.text(ident) != name:
                    continue
                candidate = scope.Decl(name, "file", decl, d)
                if _is_array(src, candidate):
                    found.append(candidate)
    return sorted(found, key=lambda c: c.node.start_byte)


def _is_array(src: Source, decl: scope.Decl) -> bool:
    how = scope.derivation(decl)
    if how == "array":
        return True
    if how != "value":
        return False
    typedef = _array_typedef(src, decl)
    return typedef is not None


def _array_typedef(src: Source, decl: scope.Decl):
    typ = scope.type_node(decl)
    if typ is None or typ.type != "type_identifier":
        return None
    td = scope.lookup(src, src.text(typ), decl.node.start_byte)
    if td is None or not td.typedef or td.node.type != "type_definition" or \
            scope.derivation(td) != "array":
        return None
    return td


def _complete(src: Source, decl: scope.Decl) -> bool:
    """Whether ``sizeof`` of the declared array is its whole size at this declaration."""
    arr = scope.innermost_array(decl)
    if arr is None:
        td = _array_typedef(src, decl)
        arr = scope.innermost_array(td) if td is not None else None
        if arr is None:
            return False
        return arr.child_by_field_name("size") is not None
    if arr.child_by_field_name("size") is not None:
        return True
    return decl.declarator.type == "init_declarator"


def _main_start(src: Source, symbol: str):
    """(main's definition, the statement a placement goes before) or None: the first
    statement after main's leading declarations (so that C89 code stays C89), or the
    declaration that uses the array."""
    func = next((f for f in walk(src.root) if f.type == "function_definition"
                 and function_name(f) == "main"), None)
    if func is None:
        return None
    body = func.child_by_field_name("body")
    stmts = [s for s in body.named_children if s.type != "comment"]
    last = symbol.rsplit("::", 1)[-1]
    stmt = next((s for s in stmts if s.type != "declaration"
                 or last in {i.text.decode() for i in walk(s) if i.type == "identifier"}),
                None)
    if stmt is None:
        return func, None
    while stmt.prev_named_sibling is not None and stmt.prev_named_sibling.type == "preproc_call":
        stmt = stmt.prev_named_sibling
    return func, stmt


def _before_touch(src: Source, before_line: int):
    """(function, the outermost statement of it holding `before_line`) or a reason."""
    name = os.path.basename(src.path)
    func = next((f for f in walk(src.root) if f.type == "function_definition"
                 and contains_row(f, before_line - 1)), None)
    if func is None:
        return f"line {before_line} of {name} is not inside a function"
    body = func.child_by_field_name("body")
    stmt = next((s for s in body.named_children
                 if s.type != "comment" and contains_row(s, before_line - 1)), None)
    if stmt is None:
        return f"no statement at line {before_line} of {name}"
    # A #pragma belongs to the statement after it: insert above the pragmas.
    while stmt.prev_named_sibling is not None and stmt.prev_named_sibling.type == "preproc_call":
        stmt = stmt.prev_named_sibling
    return func, stmt


def _insertion(src: Source, stmt) -> Edit:
    """Where the statement goes: on its own line above `stmt` (indented like the statement
    a run of #pragma lines precedes), or just before `stmt` when it shares its line."""
    if src.starts_line(stmt):
        indent = src.indent(stmt)
        if stmt.type == "preproc_call":
            nxt = stmt
            while nxt is not None and nxt.type == "preproc_call":
                nxt = nxt.next_named_sibling
            indent = src.indent(nxt) if nxt is not None else indent
        return Edit(src.line_start(stmt.start_byte), f"{indent}{{}}{src.nl}")
    return Edit(stmt.start_byte, "{} ")


def _name_at(src: Source, symbol: str, decls: list[scope.Decl], at: int,
             func) -> tuple[str, scope.Decl] | str:
    """The text that names the array at byte `at` and its complete declaration there,
    or why the array cannot be named there."""
    fname = function_name(func) if func is not None else None
    inside = f"in {fname}()" if fname else "there"
    complete = [d for d in decls if d.node.end_byte <= at and _complete(src, d)]
    seen = [d for d in decls if d.node.end_byte <= at]
    if not seen:
        return f"`{symbol}` is declared after that point ({inside})"
    if "::" in symbol:
        first = symbol.split("::", 1)[0]
        if scope.macro_at(src, first, at) is not None:
            return f"`{first}` is a macro {inside}"
        ref = symbol
    else:
        found = scope.lookup(src, symbol, at)
        if found is None or (found.scope not in ("file",) and not (
                found.scope == "local" and found.extern)):
            if found is not None and found.scope != "macro" and src.lang == "cpp":
                ref = f"::{symbol}"  # qualified lookup skips the local or parameter
            else:
                what = scope.describe(src, found) if found is not None else "undeclared"
                return (f"{inside} `{symbol}` is {what}, not the file-scope array: sizeof "
                        "there would not be the array's size")
        else:
            ref = symbol
    if not complete:
        return (f"`{symbol}` is declared there without its size (`"
                f"{' '.join(src.text(seen[-1].node).split())}`), so sizeof cannot give it")
    return ref, complete[-1]


def _static_size(src: Source, decl: scope.Decl, decls: list[scope.Decl]) -> int | None:
    """The array's bytes from the file's constants; None when they do not give it, or
    when declarations in different #if branches may disagree (the compiler decides)."""
    sizes = set()
    for d in decls:
        if not _complete(src, d):
            continue
        size = scope.object_size(src, d)
        if size is None:
            td = _array_typedef(src, d)
            size = scope.object_size(src, td) if td is not None else None
        sizes.add(size)
    if len(sizes) > 1:
        return None
    size = scope.object_size(src, decl)
    if size is None:
        td = _array_typedef(src, decl)
        size = scope.object_size(src, td) if td is not None else None
    return size


def function_static_arrays(src: Source, symbol: str, function: str) -> tuple[object, list[scope.Decl]] | None:
    """(the definition of `function`, the ``static`` declarations of the array `symbol`
    at the top of its body), or None when the file does not define `function`."""
    func = next((f for f in walk(src.root) if f.type == "function_definition"
                 and function_name(f) == function), None)
    if func is None:
        return None
    body = func.child_by_field_name("body")
    found = []
    for decl in body.named_children if body is not None else []:
        if decl.type != "declaration" or not scope._has_storage(decl, "static"):
            continue
        for d in decl.children_by_field_name("declarator"):
            ident = scope.declarator_identifier(d)
            if ident is not None and src.text(ident) == symbol:
                candidate = scope.Decl(symbol, "local", decl, d)
                if _is_array(src, candidate):
                    found.append(candidate)
    return func, found


def _after_declaration(decl: scope.Decl):
    """The statement a placement of the static `decl` goes before: the first statement
    after it that is no declaration (C89 code stays C89), above its #pragma lines."""
    stmt = decl.node.next_named_sibling
    while stmt is not None and stmt.type in ("declaration", "comment"):
        stmt = stmt.next_named_sibling
    if stmt is None:
        return None
    while stmt.prev_named_sibling is not None and stmt.prev_named_sibling.type == "preproc_call":
        stmt = stmt.prev_named_sibling
    return stmt


def place_function_static(path: str, symbol: str, function: str, policy_const: str, *,
                          root: str | None = None, weighted=None,
                          recorded_size: int | None = None) -> Patch | Refusal | AlreadyPlaced:
    """Insert ``numaprof_place(sym, sizeof(sym), POLICY);`` for an array declared
    ``static`` at the top of main()'s body, after main's declarations: nothing outside
    main can name it, so no access comes before that point.  A static of another
    function is refused: the call would run at every call of that function."""
    path = os.path.abspath(path)
    const = policy_constant(policy_const)
    src = load(path, want=C_FAMILY)
    if isinstance(src, Refusal):
        return Refusal(path, 0, src.reason)
    name = os.path.basename(path)
    found = function_static_arrays(src, symbol, function)
    if found is None or not found[1]:
        return Refusal(path, 0, f"`{symbol}` is not a static array at the top of {function}() "
                                f"in {name}", "numactl")
    func, decls = found
    decl = decls[-1]
    by_hand = by_hand_words(place_text(symbol, f"sizeof({symbol})", const, weighted),
                            f"in {function}() after the declaration of `{symbol}`, once, "
                            "before its first touch")
    if function != "main":
        return Refusal(path, decl.line, f"`{symbol}` is a static of {function}(), which may run "
                                        "many times: a placement there would run at every call",
                       "numactl", by_hand)
    existing = find_placement(src, symbol, accept=lambda call, first: (
        (d := scope.lookup(src, symbol, call.start_byte)) is not None and d.node == decl.node))
    if existing is not None:
        return existing
    bad = parse_refusal(src, func, decl.line)
    if bad is not None:
        return Refusal(path, decl.line, bad.reason, "numactl", by_hand)
    stmt = _after_declaration(decl)
    if stmt is None:
        return Refusal(path, decl.line, f"main() in {name} has no statement after the "
                                        f"declaration of `{symbol}`", "numactl", by_hand)
    edit = _insertion(src, stmt)
    seen = scope.lookup(src, symbol, edit.offset)
    if seen is None or seen.node != decl.node:
        return Refusal(path, decl.line, f"`{symbol}` does not denote the static array at "
                                        f"line {stmt.start_point[0] + 1} of {name}", "numactl", by_hand)
    if not _complete(src, decl):
        return Refusal(path, decl.line, f"`{symbol}` is declared without its size, so sizeof "
                                        "cannot give it", "numactl", by_hand)
    size = f"sizeof({symbol})"
    size_bytes = _static_size(src, decl, [decl])
    if size_bytes is not None and recorded_size is not None and size_bytes != recorded_size:
        return Refusal(path, decl.line, f"`{symbol}` as declared in {name} (line {decl.line}) is "
                                        f"{size_bytes} bytes, but the profile recorded "
                                        f"{recorded_size}: not the array it saw", "numactl")
    text = place_text(symbol, size, const, weighted)
    edits, probe = with_include(src, Edit(edit.offset, edit.text.format(text)), text, size, True,
                                recorded_size)
    info = PatchInfo(
        kind="place_static", statement=text, where=f"{name}:{stmt.start_point[0] + 1}",
        target=symbol, size=size, size_bytes=size_bytes, recorded_bytes=recorded_size,
        probe=probe,
        scope=(f"`{symbol}` is the static array main() declares at line {decl.line}, which "
               f"nothing outside main() names: placed after main's declarations, before any "
               f"access, and sizeof gives its whole size"))
    return make_patch(path, src.data, edits, root,
                      f"place main's static `{symbol}` with {placement_words(const, weighted)} "
                      f"after its declarations in {name}", info)


def place_static(path: str, symbol: str, policy_const: str, before_line: int | None = None,
                 *, root: str | None = None, weighted=None, recorded_size: int | None = None,
                 at_main: bool = True) -> Patch | Refusal | AlreadyPlaced:
    """Insert ``numaprof_place(sym, sizeof(sym), POLICY);`` before a static array's first touch.

    With `before_line`, the call goes before the outermost statement of the function that
    contains that line (the first-touch loop), above any #pragma attached to it; without
    it, or when `sym` does not denote the array there (a parameter or local of that name
    hides it), at the start of ``main()`` after its leading declarations (so C89 code
    stays C89), if this file has main() and `at_main`.  The array must be declared at
    file scope in `path` with its size, before the insertion point.  With
    `recorded_size` (the symbol's size in the profile), a size the file gives as
    constants must be that size, and the patch's info carries the probe with which the
    compile check has the compiler confirm it.  A ``numaprof_place`` call on the array
    already in the file gives `AlreadyPlaced`.  `weighted` as in `place_after_allocation`.
    """
    path = os.path.abspath(path)
    const = policy_constant(policy_const)
    src = load(path, want=C_FAMILY)
    line = before_line or 0
    if isinstance(src, Refusal):
        return Refusal(path, line, src.reason)
    name = os.path.basename(path)
    decls = file_scope_arrays(src, symbol)
    if not decls:
        return Refusal(path, line, f"`{symbol}` is not an array defined at file scope in "
                                   f"{name}", "numactl")
    existing = existing_static_placement(src, symbol)
    if existing is not None:
        return existing
    points, reasons = [], []
    if before_line is not None:
        found = _before_touch(src, before_line)
        if isinstance(found, str):
            reasons.append(found)
        else:
            points.append((*found, f"line {found[1].start_point[0] + 1}"))
    if before_line is None or at_main:
        found = _main_start(src, symbol)
        if found is not None and found[1] is not None and \
                all(found[1] != p[1] for p in points):
            points.append((*found, "the start of main()"))
        elif before_line is None:
            reasons.append(f"{name} has no main() to place `{symbol}` in" if found is None
                           else f"main() in {name} has no statement to place `{symbol}` "
                                "before")
    for func, stmt, where_words in points:
        bad = parse_refusal(src, func, line)
        if bad is not None:
            reasons.append(bad.reason)
            continue
        edit = _insertion(src, stmt)
        named = _name_at(src, symbol, decls, edit.offset, func)
        if isinstance(named, str):
            reasons.append(named)
            continue
        ref, decl = named
        size = f"sizeof({ref})"
        size_bytes = _static_size(src, decl, decls)
        if size_bytes is not None and recorded_size is not None and size_bytes != recorded_size:
            return Refusal(path, line, f"`{symbol}` as declared in {name} (line {decl.line}) is "
                                       f"{size_bytes} bytes, but the profile recorded "
                                       f"{recorded_size}: not the array it saw", "numactl")
        text = place_text(ref, size, const, weighted)
        edits, probe = with_include(src, Edit(edit.offset, edit.text.format(text)), text,
                                    size, True, recorded_size)
        hidden = "" if ref == symbol or "::" in symbol else \
            f" (`{symbol}` alone is hidden by a local or parameter there)"
        info = PatchInfo(
            kind="place_static", statement=text,
            where=f"{name}:{stmt.start_point[0] + 1}", target=ref, size=size,
            size_bytes=size_bytes, recorded_bytes=recorded_size, probe=probe,
            scope=(f"`{ref}` at {where_words} of {name} is the file-scope array declared at "
                   f"line {decl.line}{hidden}, so sizeof gives its whole size"
                   + ("" if not reasons else f"; not before its first touch: {reasons[0]}")))
        return make_patch(path, src.data, edits, root,
                          f"place static `{symbol}` with {placement_words(const, weighted)} "
                          f"before {where_words} of {name}", info)
    shown = symbol if "::" in symbol or src.lang != "cpp" else symbol
    by_hand = by_hand_words(place_text(shown, f"sizeof({shown})", const, weighted),
                            f"where `{symbol}` is the file-scope array (e.g. at the start of "
                            "main() in the file that defines it), before its first touch")
    return Refusal(path, line, "; ".join(dict.fromkeys(reasons)) or
                   f"no place in {name} to put the placement of `{symbol}`", "numactl", by_hand)


def existing_static_placement(src: Source, symbol: str) -> AlreadyPlaced | None:
    """A numaprof_place* call in the file on the static array `symbol` (where its name
    denotes the file-scope array, or through ``::name`` / ``ns::name``)."""
    last = symbol.rsplit("::", 1)[-1]

    def denotes_array(call, first) -> bool:
        decl = scope.lookup(src, last, call.start_byte)
        return decl is not None and (decl.scope == "file" or (decl.scope == "local" and
                                                              decl.extern))

    for key in dict.fromkeys((symbol, f"::{symbol}")):
        found = find_placement(src, key, accept=None if key.startswith("::") or "::" in symbol
                               else denotes_array)
        if found is not None:
            return found
    return None
