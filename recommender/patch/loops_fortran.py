"""Parallel first touch in free-form Fortran: ``!$omp parallel do`` ...
``!$omp end parallel do`` on the serial loop that first touched an array, by the same
rules as the C loops."""

from __future__ import annotations

import os

from numaprof.recommender.patch.edits import Edit, Patch, PatchInfo, Refusal, make_patch
from numaprof.recommender.patch.source import Source, contains_row, parse_refusal, walk

F_DIRECTIVE = "!$omp parallel do schedule(static)"


F_END_DIRECTIVE = "!$omp end parallel do"

F_WORKSHARE = "!$omp parallel workshare"
F_END_WORKSHARE = "!$omp end parallel workshare"


#: Fortran elemental intrinsics a parallelised loop may call (pure by the standard).
PURE_F_FUNCTIONS = frozenset({
    "sqrt", "sin", "cos", "tan", "exp", "log", "log10", "abs", "floor", "ceiling", "mod",
    "modulo", "min", "max", "dble", "real", "int", "nint", "float", "sign", "dsqrt",
    "dsin", "dcos", "dexp", "dlog", "dabs", "cmplx", "aimag", "conjg", "iand", "ior",
    "ieor", "ishft", "atan", "atan2", "asin", "acos", "sinh", "cosh", "tanh",
    "size", "lbound", "ubound", "len", "huge", "tiny", "epsilon", "kind",
})


_F_ALLOWED = frozenset({
    "assignment_statement", "call_expression", "argument_list", "identifier",
    "number_literal", "math_expression", "relational_expression", "logical_expression",
    "unary_expression", "parenthesized_expression", "if_statement", "elseif_clause",
    "else_clause", "end_if_statement", "do_loop_statement", "loop_control_expression",
    "end_do_loop_statement", "comment", "keyword_statement", "string_literal",
    "boolean_literal", "complex_literal", "derived_type_member_expression", "type_member",
    "keyword_argument", "concatenation_expression",
})


def fortran_name(src: Source, node) -> str:
    return src.text(node).lower()


def _f_declared(src: Source, unit) -> dict[str, bool]:
    """Names the specification part of one unit declares -> whether with a shape
    (``real :: a(10)``, ``dimension a(10)``, ``real, dimension(:) :: a``, a COMMON
    member given its shape there).  ``external f`` declares a procedure."""
    names: dict[str, bool] = {}
    for decl in unit.named_children:
        if decl.type not in ("variable_declaration", "variable_modification", "common_statement"):
            continue
        quals = [src.text(a).lower() for a in decl.children if a.type == "type_qualifier"]
        dims = any(q.startswith("dimension") for q in quals)
        proc = any(q.startswith(("external", "intrinsic")) for q in quals)
        decls = list(decl.children_by_field_name("declarator"))
        if decl.type == "common_statement":
            decls = [d for g in decl.named_children if g.type == "variable_group"
                     for d in g.named_children if d.type != "name"]
        for d in decls:
            if d.type == "sized_declarator":
                name, shaped = d.named_children[0], True
            elif d.type == "init_declarator":
                name, shaped = d.child_by_field_name("left"), dims
            else:
                name, shaped = d, dims
            if name is None or name.type != "identifier":
                continue
            key = fortran_name(src, name)
            if proc:
                names[key] = False
            elif decl.type != "common_statement" or shaped:
                names[key] = names.get(key, False) or shaped
    return names


def _f_modules(src: Source) -> dict[str, object]:
    return {fortran_name(src, n.named_children[0].named_children[0]): n
            for n in src.root.named_children
            if n.type == "module" and n.named_children and
            n.named_children[0].named_children}


def _f_used(src: Source, unit, modules: dict, seen: set[str]) -> dict[str, bool]:
    """Names use-associated into `unit` from modules defined in this file (``only:``
    lists respected; a module defined elsewhere contributes nothing)."""
    out: dict[str, bool] = {}
    for use in unit.named_children:
        if use.type != "use_statement":
            continue
        mod_name = next((c for c in use.named_children if c.type == "module_name"), None)
        if mod_name is None:
            continue
        key = src.text(mod_name).lower()
        module = modules.get(key)
        if module is None or key in seen:
            continue
        names = dict(_f_declared(src, module))
        for k, v in _f_used(src, module, modules, seen | {key}).items():
            names.setdefault(k, v)
        only = next((c for c in use.named_children if c.type == "included_items"), None)
        if only is not None:
            wanted = {fortran_name(src, i) for i in only.named_children if i.type == "identifier"}
            names = {k: v for k, v in names.items() if k in wanted}
        for k, v in names.items():
            out.setdefault(k, v)
    return out


def _f_arrays(src: Source, unit) -> set[str]:
    """The names that are arrays in `unit` (lower case), by Fortran's scoping: its own
    declarations, then what it uses from modules of this file, then its host's (the
    program, procedure or module it is contained in), and so on outwards.  A name only
    declared in another unit of the file is not an array here: ``b(i)`` may then be a
    call of a function, and the loop is refused."""
    modules = _f_modules(src)
    visible: dict[str, bool] = {}
    u = unit
    while u is not None:
        if u.type in _F_UNITS + ("module",):
            for k, v in _f_declared(src, u).items():
                visible.setdefault(k, v)
            for k, v in _f_used(src, u, modules, set()).items():
                visible.setdefault(k, v)
        u = u.parent
    return {k for k, v in visible.items() if v}


def _f_loop_header(src: Source, loop) -> tuple[str, list] | str:
    ctl = next((c for c in loop.named_children if c.type == "loop_control_expression"), None)
    if ctl is None:
        return "the loop is not a counted `do i = a, b` loop"
    parts = [c for c in ctl.named_children if c.type != "comment"]
    if len(parts) not in (3, 4) or parts[0].type != "identifier":
        return "the loop is not a counted `do i = a, b` loop"
    var = fortran_name(src, parts[0])
    if len(parts) == 4 and src.text(parts[3]).strip() != "1":
        return f"the loop steps `{var}` by {src.text(parts[3])}, not 1"
    return var, parts[1:3]


def _f_check_loop(src: Source, loop, unit, arrays: set[str]) -> str | None:
    header = _f_loop_header(src, loop)
    if isinstance(header, str):
        return header
    var, bounds = header
    for b in bounds:
        for n in walk(b):
            if n.type == "call_expression":
                name = fortran_name(src, n.named_children[0])
                if name not in arrays and name not in PURE_F_FUNCTIONS:
                    return f"the loop bound calls `{name}`"
    body = [c for c in loop.named_children
            if c.type not in ("loop_control_expression", "end_do_loop_statement")]
    written: set[str] = set()
    for stmt in body:
        for n in walk(stmt):
            if not n.is_named:
                continue
            t = n.type
            if t not in _F_ALLOWED:
                if t == "subroutine_call":
                    sub = n.child_by_field_name("subroutine")
                    return f"the loop calls the subroutine `{src.text(sub)}`"
                return f"the loop contains a `{t}` construct the safety check does not analyse"
            if t == "comment" and src.text(n).lower().startswith("!$"):
                return "the loop contains OpenMP directives"
            if t == "keyword_statement":
                kw = src.text(n).strip().lower()
                if kw.startswith("exit"):
                    p = n.parent
                    while p is not None and p != loop and p.type != "do_loop_statement":
                        p = p.parent
                    if p == loop or kw != "exit":
                        return "the loop leaves early with `exit`"
                elif not kw.startswith("cycle"):
                    return f"the loop contains `{kw.split()[0]}`"
            elif t == "call_expression":
                name = fortran_name(src, n.named_children[0])
                if name not in arrays and name not in PURE_F_FUNCTIONS:
                    return (f"the loop calls `{name}`, which may have side effects (or is an "
                            "array declared in another file)")
            elif t == "assignment_statement":
                why = _f_check_write(src, n.child_by_field_name("left"), var, arrays, written)
                if why:
                    return why
            elif t == "do_loop_statement" and n != loop:
                inner = _f_loop_header(src, n)
                if isinstance(inner, str):
                    return "the loop contains a loop that is not counted"
                return (f"the loop contains the loop over `{inner[0]}`, whose counter "
                        "would be shared between threads")
    for name in written:
        for n in walk(loop):
            if n.type != "identifier" or fortran_name(src, n) != name:
                continue
            p = n.parent
            if p.type == "call_expression" and p.named_children[0] == n and \
                    _f_is_var_index(src, p, var):
                continue
            if _f_inquiry_argument(src, n):
                continue  # size(y), ubound(y, 1): the shape, not an element
            shown = src.text(p) if p.type == "call_expression" else name
            return (f"the loop writes `{name}({var})` and also uses `{shown}`: one "
                    "iteration may depend on another")
    return _f_counter_used_elsewhere(src, loop, unit, var)


#: Intrinsics that ask about an array's shape or status without reading its elements.
F_INQUIRY = frozenset({"size", "lbound", "ubound", "shape", "allocated", "kind",
                       "is_contiguous", "rank"})


def _f_inquiry_argument(src: Source, ident) -> bool:
    """Whether `ident` is the whole-array argument of an inquiry intrinsic (``size(y)``)."""
    args = ident.parent
    call = args.parent if args is not None and args.type == "argument_list" else None
    if call is None or call.type != "call_expression" or not call.named_children:
        return False
    fn = call.named_children[0]
    return fn.type == "identifier" and fortran_name(src, fn) in F_INQUIRY and \
        fn != ident


def _f_is_var_index(src: Source, ref, var: str) -> bool:
    args = next((c for c in ref.named_children if c.type == "argument_list"), None)
    if args is None:
        return False
    items = [a for a in args.named_children if a.type != "comment"]
    return len(items) == 1 and items[0].type == "identifier" and fortran_name(src, items[0]) == var


def _f_check_write(src: Source, target, var: str, arrays: set[str],
                   written: set[str]) -> str | None:
    if target is None:
        return "the loop assigns to something the check cannot follow"
    if target.type == "identifier":
        name = fortran_name(src, target)
        if name == var:
            return f"the loop changes its own counter `{var}`"
        return f"the loop writes the scalar `{name}` declared outside it"
    if target.type == "call_expression":
        name = fortran_name(src, target.named_children[0])
        if name in arrays and _f_is_var_index(src, target, var):
            written.add(name)
            return None
        return (f"the loop writes `{src.text(target)}`, not exactly `{name}({var})`: "
                "iterations may write the same element")
    return f"the loop writes `{src.text(target)}`, which the check cannot follow"


def _f_counter_used_elsewhere(src: Source, loop, unit, var: str) -> str | None:
    """The do variable has no defined value after ``!$omp parallel do``: allow it only
    when every other use is inside another do loop over it, or its declaration."""
    if unit is None:
        return None
    for n in walk(unit):
        if n.type != "identifier" or fortran_name(src, n) != var:
            continue
        if loop.start_byte <= n.start_byte < loop.end_byte:
            continue
        p, ok = n.parent, False
        if p.type == "variable_declaration":
            continue
        while p is not None and p != unit:
            if p.type == "do_loop_statement" and _f_do_var(src, p) == var:
                ok = True
                break
            if p.type in _F_UNITS and _f_declares(src, p, var):
                ok = True  # an internal procedure with its own variable of that name
                break
            p = p.parent
        if not ok:
            return (f"the loop counter `{var}` is used after the loop (line "
                    f"{n.start_point[0] + 1}); its value would be undefined")
    return None


def _f_do_var(src: Source, loop) -> str | None:
    ctl = next((c for c in loop.named_children if c.type == "loop_control_expression"), None)
    if ctl is None or not ctl.named_children or ctl.named_children[0].type != "identifier":
        return None
    return fortran_name(src, ctl.named_children[0])


def _f_declares(src: Source, unit, var: str) -> bool:
    for decl in unit.named_children:
        if decl.type == "variable_declaration":
            for d in decl.children_by_field_name("declarator"):
                name = d.named_children[0] if d.type == "sized_declarator" else \
                    d.child_by_field_name("left") if d.type == "init_declarator" else d
                if name is not None and fortran_name(src, name) == var:
                    return True
    return False


def _f_omp_context(src: Source, node, unit) -> str | None:
    """An ``!$omp`` directive already governing `node`, or None."""
    n = node
    while n is not None and n != unit:
        depth = 0
        prev = n.prev_named_sibling
        first = True
        while prev is not None:
            if prev.type == "comment":
                text = " ".join(src.text(prev).lower().split())
                if text.startswith("!$omp"):
                    words = text[len("!$omp"):].split()
                    if first and words[:1] in (["do"], ["parallel"], ["simd"]):
                        return text
                    if words[:2] == ["end", "parallel"] and words[2:3] != ["do"]:
                        depth -= 1
                    elif words[:1] == ["parallel"] and words[1:2] != ["do"]:
                        depth += 1
            else:
                first = False
            prev = prev.prev_named_sibling
        if depth > 0:
            return "!$omp parallel"
        n = n.parent
    return None


_F_UNITS = ("program", "subroutine", "function", "module_procedure")


def _f_component_arrays(src: Source) -> set[str]:
    """Components that derived types of this file declare with a shape (lower case)."""
    out = set()
    for t in walk(src.root):
        if t.type != "derived_type_definition":
            continue
        for decl in walk(t):
            if decl.type == "variable_declaration":
                for d in decl.children_by_field_name("declarator"):
                    if d.type == "sized_declarator":
                        out.add(fortran_name(src, d.named_children[0]))
    return out


def _f_whole_array(src: Source, node, arrays: set[str]) -> bool:
    """`a`, `x%a` or `x(l)%a` (an element's component; no subscript on the array itself)
    naming an array: a whole-array reference."""
    if node.type == "identifier":
        return fortran_name(src, node) in arrays
    if node.type == "derived_type_member_expression":
        member = next((c for c in node.named_children if c.type == "type_member"), None)
        base = node.named_children[0] if node.named_children else None
        if base is not None and base.type == "call_expression":
            # `level(l)`: an element of the array `level`, not a function's result
            callee = base.named_children[0] if base.named_children else None
            if callee is None or callee.type != "identifier" or fortran_name(src, callee).lower() not in arrays:
                return False
        return (member is not None and base is not None
                and base.type in ("identifier", "derived_type_member_expression", "call_expression")
                and fortran_name(src, member) in _f_component_arrays(src))
    return False


def _f_workshare(src: Source, path: str, line: int, root: str | None) -> Patch | Refusal | None:
    """A whole-array assignment on `line` (``f%rhs = 1.0d0``, ``a = b * 2``), the idiomatic
    Fortran initialisation: ``!$omp parallel workshare`` around it, which gfortran runs
    as a static loop over the array's last dimension, split among the threads as a
    static ``parallel do`` over that dimension splits it.  Any array assignment keeps
    its meaning under WORKSHARE (OpenMP: each element's evaluation and assignment is a
    unit of work); the right side may call only elemental intrinsics.  None when the
    line holds no such statement."""
    row = line - 1
    stmts = [n for n in walk(src.root) if n.type == "assignment_statement"
             and n.start_point[0] == row == n.end_point[0]]
    if len(stmts) != 1:
        return None
    stmt = stmts[0]
    unit = stmt.parent
    while unit is not None and unit.type not in _F_UNITS:
        unit = unit.parent
    left, right = stmt.child_by_field_name("left"), stmt.child_by_field_name("right")
    if unit is None or left is None or right is None:
        return None
    if not _f_whole_array(src, left, _f_arrays(src, unit)):
        return None
    where = f"{os.path.basename(path)}:{line}"
    bad = parse_refusal(src, unit, line)
    if bad is not None:
        return bad
    for n in walk(right):
        if n.type == "call_expression":
            callee = n.named_children[0] if n.named_children else None
            name = fortran_name(src, callee) if callee is not None else ""
            if name not in PURE_F_FUNCTIONS and name not in _f_arrays(src, unit):
                return Refusal(path, line, f"the assignment at {where} calls `{name}`, which "
                                           "WORKSHARE would run on one thread")
    omp = _f_omp_context(src, stmt, unit)
    if omp is not None:
        return Refusal(path, line, f"the assignment at {where} already runs under `{omp}`")
    if not src.starts_line(stmt):
        return Refusal(path, line, f"the assignment at {where} does not stand on its own line")
    indent = src.indent(stmt)
    at_end = src.line_end(stmt.end_byte)
    pre = src.nl if at_end == len(src.data) and not src.data.endswith(b"\n") else ""
    edits = [Edit(src.line_start(stmt.start_byte), f"{indent}{F_WORKSHARE}{src.nl}", attach=True),
             Edit(at_end, f"{pre}{indent}{F_END_WORKSHARE}{src.nl}")]
    info = PatchInfo(kind="parallel_first_touch", statement=F_WORKSHARE, where=where, scope=(
        "a whole-array assignment to an array of this unit, a module it uses, its host or "
        "a derived type's component; its right side calls only elemental intrinsics"))
    return make_patch(path, src.data, edits, root,
                      f"parallel first touch: `{F_WORKSHARE}` around the array assignment at "
                      f"{where}", info)


def first_whole_assignment(src: Source, alloc_line: int, var: str) -> int | None:
    """The line of the statement that first uses the array `var` (``a``, ``f%u``, or
    ``level(l)%t``, a component of an element) after its allocation at `alloc_line`, when
    that statement assigns the whole array and stands in the block of the allocation (the
    allocating procedure's, or the loop body allocating one array per element);
    otherwise None.  gfortran turns ``f%u = 0.0d0`` into a call of memset, whose page
    faults name no line of the program: this is the statement they come from."""
    row = alloc_line - 1
    units = [n for n in walk(src.root) if n.type in _F_UNITS and contains_row(n, row)]
    if not units:
        return None
    unit = units[-1]
    alloc = [n for n in walk(unit) if n.type == "allocate_statement" and contains_row(n, row)]
    block = alloc[-1].parent if alloc and alloc[-1].parent is not None else unit
    var = "".join(var.lower().split())
    for n in walk(block):
        if n.type not in ("identifier", "derived_type_member_expression") or \
                n.parent is None or n.parent.type == "derived_type_member_expression":
            continue
        ref = "".join(fortran_name(src, n).split()).lower()
        if ref != var and not var.startswith(ref + "%"):
            continue  # another variable, or another component of the same one
        stmt = n
        while stmt.parent is not None and stmt.parent != block:
            stmt = stmt.parent
        if stmt.parent != block or stmt.start_point[0] <= row:
            continue  # the allocation itself, or what precedes it
        left = stmt.child_by_field_name("left") if stmt.type == "assignment_statement" else None
        if left is not None and left.type in ("identifier", "derived_type_member_expression") \
                and "".join(fortran_name(src, left).split()).lower() == var:
            return stmt.start_point[0] + 1
        return None
    return None


def parallelize_fortran(src: Source, path: str, line: int, root: str | None) -> Patch | Refusal:
    row = line - 1
    where = f"{os.path.basename(path)}:{line}"
    loops = [n for n in walk(src.root) if n.type == "do_loop_statement"
             and contains_row(n, row)]
    # a whole-array assignment is its own loop, also inside a `do` over something else
    # (`do l = 1, nl ... level(l)%t = 0d0`: one array per level)
    ws = _f_workshare(src, path, line, root)
    if isinstance(ws, Patch) or (ws is not None and not loops):
        return ws
    if not loops:
        return Refusal(path, line, f"{where} is neither inside a `do` loop nor a whole-array "
                                   "assignment")
    unit = loops[0].parent
    while unit is not None and unit.type not in _F_UNITS:
        unit = unit.parent
    bad = parse_refusal(src, unit, line)
    if bad is not None:
        return bad
    omp = _f_omp_context(src, loops[-1], unit)
    if omp is not None:
        return Refusal(path, line, f"the loop at {where} already runs under `{omp}`")
    arrays = _f_arrays(src, unit)
    reasons = []
    for loop in loops:
        why = _f_check_loop(src, loop, unit, arrays)
        if why is None:
            end = next((c for c in loop.named_children if c.type == "end_do_loop_statement"),
                       None)
            if end is None or not src.starts_line(loop):
                why = "the loop's `do` or `end do` does not stand on its own line"
            else:
                indent = src.indent(loop)
                at_end = src.line_end(end.end_byte)
                pre = src.nl if at_end == len(src.data) and not src.data.endswith(b"\n") else ""
                edits = [Edit(src.line_start(loop.start_byte),
                              f"{indent}{F_DIRECTIVE}{src.nl}", attach=True),
                         Edit(at_end, f"{pre}{indent}{F_END_DIRECTIVE}{src.nl}")]
                lline = loop.start_point[0] + 1
                where = f"{os.path.basename(path)}:{lline}"
                info = PatchInfo(kind="parallel_first_touch", statement=F_DIRECTIVE,
                                 where=where, scope=(
                                     "the names the loop writes are arrays of this unit, a "
                                     "module it uses or its host, indexed exactly by the "
                                     "counter"))
                return make_patch(path, src.data, edits, root,
                                  f"parallel first touch: `{F_DIRECTIVE}` on the loop at "
                                  f"{where}", info)
        reasons.append(why)
    return Refusal(path, line, f"not parallelising the loop at {where}: {reasons[-1]}")
