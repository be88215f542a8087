"""Parallel first touch in C and C++: ``#pragma omp parallel for schedule(static)`` on
the serial loop that first touched an array, only when the loop is provably safe to run
in parallel; otherwise a `Refusal` says why in plain words."""

from __future__ import annotations

import os
from functools import lru_cache

from numaprof.recommender.patch import scope
from numaprof.recommender.patch.edits import Edit, Patch, PatchInfo, Refusal, make_patch
from numaprof.recommender.patch.source import (
    Source,
    contains_row,
    cxx_plain_type,
    cxx_vector_element,
    declarator_name,
    enclosing,
    function_at,
    has_side_effects,
    is_cxx_cast,
    omp_words,
    parse_refusal,
    parser,
    pragma_before,
    strip_parens,
    subscript_index,
    walk,
)

C_PRAGMA = "#pragma omp parallel for schedule(static)"

_LOOP_SCOPE = ("the loop's counter, bound and every variable it writes were resolved in the "
               "loop's scope: it writes only its own locals and elements indexed exactly by "
               "the counter")


#: Functions a parallelised C loop may call: pure, no side effects, no shared state.
PURE_C_FUNCTIONS = frozenset(
    name + suffix
    for name in ("sqrt", "sin", "cos", "exp", "log", "fabs", "pow", "floor", "ceil")
    for suffix in ("", "f", "l")
)


# Node types a loop body may contain; anything else is refused rather than guessed at.
_C_ALLOWED = frozenset({
    "compound_statement", "expression_statement", "declaration", "init_declarator",
    "if_statement", "else_clause", "for_statement", "while_statement", "do_statement",
    "switch_statement", "case_statement", "break_statement", "continue_statement",
    "parenthesized_expression", "condition_clause", "binary_expression", "unary_expression",
    "update_expression", "assignment_expression", "conditional_expression",
    "cast_expression", "sizeof_expression", "subscript_expression", "call_expression",
    "argument_list", "identifier", "field_identifier", "number_literal", "char_literal",
    "character", "string_literal", "string_content", "escape_sequence",
    "concatenated_string", "true", "false", "null", "field_expression",
    "pointer_expression", "type_descriptor", "primitive_type", "sized_type_specifier",
    "type_identifier", "type_qualifier", "comment", "array_declarator",
    "pointer_declarator", "abstract_pointer_declarator", "initializer_list",
    "comma_expression", "storage_class_specifier",
})


#: C++ adds qualified names (``std::sqrt``, ``grid::field``), C++ subscripts and casts.
_CXX_ALLOWED = _C_ALLOWED | {
    "qualified_identifier", "namespace_identifier", "subscript_argument_list",
    "template_function", "template_argument_list", "type_descriptor", "nullptr",
    "raw_string_literal", "reference_declarator",
}


_C_JUMPS = {
    "return_statement": "the loop leaves early with `return`",
    "goto_statement": "the loop jumps with `goto`",
    "labeled_statement": "the loop contains a label that `goto` may jump to",
}


_C_SCOPES = ("for_statement", "while_statement", "do_statement", "switch_statement")


_FLOAT_TYPES = ("float", "double", "long double", "bool", "_Bool")


def _c_loop_header(src: Source, loop) -> tuple[str, bool, object] | str:
    """(counter, declared in the header, bound node) of a simple counted loop, or why not."""
    init = loop.child_by_field_name("initializer")
    cond = loop.child_by_field_name("condition")
    upd = loop.child_by_field_name("update")
    if init is None or cond is None or upd is None:
        return "the loop is not a counted `for (i = a; i < n; i++)` loop"
    var, declared = None, False
    if init.type == "declaration":
        decls = init.children_by_field_name("declarator")
        typ = init.child_by_field_name("type")
        if len(decls) != 1 or decls[0].type != "init_declarator":
            return "the loop header declares more than one variable"
        name_node = decls[0].child_by_field_name("declarator")
        if name_node.type != "identifier":
            return "the loop counter is not a plain integer variable"
        if typ is None or src.text(typ) in _FLOAT_TYPES:
            return "the loop counter is not an integer"
        var, declared = src.text(name_node), True
    elif init.type == "assignment_expression" and \
            src.text(init.child_by_field_name("operator")) == "=" and \
            init.child_by_field_name("left").type == "identifier":
        var = src.text(init.child_by_field_name("left"))
        if has_side_effects(init.child_by_field_name("right")):
            return "the loop start has side effects"
    else:
        return "the loop does not start with `i = start`"
    cond = strip_parens(cond)
    if cond.type != "binary_expression":
        return "the loop condition is not `i < bound`"
    op = src.text(cond.child_by_field_name("operator"))
    left, right = cond.child_by_field_name("left"), cond.child_by_field_name("right")
    if op in ("<", "<=", "!=") and left.type == "identifier" and src.text(left) == var:
        bound = right
    elif op in (">", ">=") and right.type == "identifier" and src.text(right) == var:
        bound = left
    else:
        return f"the loop condition is not `{var} < bound`"
    for n in walk(bound):
        if n.type == "call_expression":
            return f"the loop bound calls `{src.text(n.child_by_field_name('function'))}`"
        if n.type in ("assignment_expression", "update_expression", "comma_expression"):
            return "the loop bound has side effects"
    ok_update = False
    if upd.type == "update_expression":
        ok_update = src.text(upd).replace(" ", "") in (f"{var}++", f"++{var}")
    elif upd.type == "assignment_expression":
        ok_update = (src.text(upd.child_by_field_name("left")) == var
                     and src.text(upd.child_by_field_name("operator")) == "+="
                     and src.text(upd.child_by_field_name("right")).strip() == "1")
    if not ok_update:
        return f"the loop does not step `{var}` by one (`{src.text(upd)}`)"
    return var, declared, bound


def _c_locals(src: Source, body) -> dict[str, str]:
    """Variables declared inside the loop body -> ``array`` | ``pointer`` | ``scalar``.

    Local arrays and scalars are private to an iteration; a local pointer is not: it
    points into memory other iterations may share.
    """
    names: dict[str, str] = {}
    for n in walk(body):
        if n.type == "declaration":
            for d in n.children_by_field_name("declarator"):
                name = declarator_name(d)
                inner = d.child_by_field_name("declarator") if d.type == "init_declarator" \
                    else d
                kind = {"array_declarator": "array", "pointer_declarator": "pointer",
                        "reference_declarator": "reference"}.get(
                    inner.type if inner is not None else "", "scalar")
                if name:
                    names[name] = kind
    return names


_CONSTANT_NODES = frozenset({
    "number_literal", "char_literal", "character", "escape_sequence", "binary_expression",
    "unary_expression", "parenthesized_expression", "sizeof_expression", "cast_expression",
    "type_descriptor", "primitive_type", "sized_type_specifier", "type_identifier",
    "conditional_expression", "comment",
})


def _c_macros(src: Source) -> dict[str, str | None]:
    """Macros #defined in the file: name -> body text (None for function-like ones)."""
    macros: dict[str, str | None] = {}
    for n in walk(src.root):
        if n.type in ("preproc_def", "preproc_function_def"):
            name = n.child_by_field_name("name")
            value = n.child_by_field_name("value")
            if name is None:
                continue
            macros[src.text(name)] = None if n.type == "preproc_function_def" else (
                src.text(value) if value is not None else "")
    return macros


def _c_macro_is_constant(name: str, macros: dict[str, str | None], depth: int = 0) -> bool:
    """Whether an object-like macro expands to a constant expression (``N``, ``(1 << 20)``)."""
    body = macros.get(name)
    if body is None or depth > 8:
        return False
    if not body.strip():
        return True
    tree = parser("c").parse(f"long long numaprof_m_ = ({body});\n".encode())
    decl = tree.root_node.named_children[0] if tree.root_node.named_children else None
    if decl is None or tree.root_node.has_error:
        return False
    value = decl.child_by_field_name("declarator").child_by_field_name("value")
    for n in walk(value):
        if not n.is_named or n.type in _CONSTANT_NODES:
            continue
        if n.type == "identifier" and n.text.decode() in macros and \
                _c_macro_is_constant(n.text.decode(), macros, depth + 1):
            continue
        return False
    return True


def _c_check_loop(src: Source, loop, func) -> str | None:
    """None when `loop` is provably safe to run with ``omp parallel for``; else the reason."""
    header = _c_loop_header(src, loop)
    if isinstance(header, str):
        return header
    if src.lang == "cpp" and enclosing(loop, "lambda_expression") is not None:
        return "the loop is inside a lambda, which the check does not follow to its callers"
    macros = _c_macros(src)
    for n in walk(loop):
        if n.type == "identifier" and src.text(n) in macros and \
                not _c_macro_is_constant(src.text(n), macros):
            # A macro can expand to anything (a call, an assignment): the check cannot
            # see into it, so only constant ones are accepted.
            return f"the loop uses the macro `{src.text(n)}`, which the check cannot see into"
    var, declared, _bound = header
    body = loop.child_by_field_name("body")
    local = _c_locals(src, body)
    local.pop(var, None)
    written: dict[str, object] = {}  # non-local arrays written as name[var]
    allowed = _CXX_ALLOWED if src.lang == "cpp" else _C_ALLOWED
    for n in walk(body):
        t = n.type
        if not n.is_named:
            continue
        if t not in allowed:
            if t.startswith("preproc"):
                return "the loop contains preprocessor directives"
            if t in _C_JUMPS:
                return _C_JUMPS[t]
            return f"the loop contains a `{t}` construct the safety check does not analyse"
        if t == "storage_class_specifier" and src.text(n) == "static":
            return "the loop declares a static variable, shared by every iteration"
        if t == "call_expression":
            fn = n.child_by_field_name("function")
            name = src.text(fn)
            if is_cxx_cast(src, n) and src.text(fn.child_by_field_name("name")) == \
                    "static_cast":
                continue  # a conversion, not a call
            if fn.type == "qualified_identifier" and src.lang == "cpp" and \
                    src.text(fn.child_by_field_name("scope")) == "std":
                fn = fn.child_by_field_name("name")  # std::sqrt is sqrt
            if fn is None or fn.type != "identifier" or src.text(fn) not in PURE_C_FUNCTIONS:
                return f"the loop calls `{name}`, which may have side effects"
        elif t == "declaration" and src.lang == "cpp":
            why = _cxx_check_local_declaration(src, n)
            if why:
                return why
        elif t == "break_statement":
            p = n.parent
            while p is not None and p != loop and p.type not in _C_SCOPES:
                p = p.parent
            if p == loop:
                return "the loop leaves early with `break`"
        elif t in ("assignment_expression", "update_expression"):
            target = n.child_by_field_name("left" if t == "assignment_expression"
                                           else "argument")
            why = _c_check_write(src, strip_parens(target), var, local, written)
            if why:
                return why
    for name in written:
        # C++: `grid::field` and a plain `field` may be one array: match the last name.
        last = name.rsplit("::", 1)[-1]
        for n in walk(loop):
            if n.type != "identifier" or src.text(n) != last:
                continue
            ref = n
            if n.parent.type == "qualified_identifier" and \
                    n.parent.child_by_field_name("name") == n:
                ref = n.parent
            p = ref.parent
            ok = (p.type == "subscript_expression" and p.child_by_field_name("argument") == ref
                  and (idx := strip_parens(subscript_index(p))) is not None
                  and idx.type == "identifier" and src.text(idx) == var
                  and p.parent.type != "subscript_expression")
            if not ok:
                shown = src.text(p) if p.type == "subscript_expression" else src.text(ref)
                return (f"the loop writes `{name}[{var}]` and also uses `{shown}`: one "
                        "iteration may depend on another")
    if src.lang == "cpp":
        why = _cxx_check_types(src, loop, var)
        if why:
            return why
    if not declared:
        why = _c_counter_used_elsewhere(src, loop, func, var)
        if why:
            return why
    return None


def _cxx_declarator(d) -> tuple[str | None, str]:
    """(name, kind) of a C++ declarator; kind: pointer | array | reference | function | value
    (the outermost of these around the name)."""
    chain = list(scope.declarator_chain(d))
    ident = scope.declarator_identifier(d, ("identifier", "field_identifier"))
    if ident is None:
        return None, "value" if d is None else ""
    kinds = ("pointer_declarator", "array_declarator", "reference_declarator", "function_declarator")
    kind = next((n.type.removesuffix("_declarator") for n in chain if n.type in kinds), "value")
    return ident.text.decode(), kind


def _cxx_type_class(src: Source, typ) -> str:
    """``plain`` (built-in arithmetic), ``vector`` (std::vector of those, not bool), or
    the type's text: the classes whose operators and constructors are known to be pure."""
    if cxx_plain_type(src, typ):
        return "plain"
    elem = cxx_vector_element(src, typ)
    if elem is not None and cxx_plain_type(src, elem) and src.text(elem).strip() != "bool":
        return "vector"
    return " ".join(src.text(typ).split()) if typ is not None else "?"


@lru_cache(maxsize=8)
def _cxx_declared(src: Source) -> dict[str, set[tuple[str, str]]]:
    """Every name declared in the file -> {(type class, declarator kind)}, by plain name and
    by namespace-qualified name.  Names, not scopes: a name declared twice with two
    types has both, and the check then needs both to be safe."""
    out: dict[str, set[tuple[str, str]]] = {}
    kinds = ("declaration", "field_declaration", "parameter_declaration",
             "optional_parameter_declaration")
    for n in walk(src.root):
        if n.type == "enumerator":
            name = n.child_by_field_name("name")
            if name is not None:
                out.setdefault(src.text(name), set()).add(("plain", "value"))
            continue
        if n.type not in kinds:
            continue
        cls = _cxx_type_class(src, n.child_by_field_name("type"))
        spaces = []
        p = n.parent
        while p is not None:
            if p.type == "namespace_definition" and p.child_by_field_name("name") is not None:
                spaces.append(src.text(p.child_by_field_name("name")).replace(" ", ""))
            p = p.parent
        prefix = "::".join(reversed(spaces))
        for d in n.children_by_field_name("declarator"):
            name, kind = _cxx_declarator(d)
            if not name:
                continue
            out.setdefault(name, set()).add((cls, kind))
            if prefix:
                out.setdefault(f"{prefix}::{name}", set()).add((cls, kind))
    return out


def _cxx_lookup(src: Source, ref, name: str) -> set[tuple[str, str]]:
    """The declaration `name` refers to at `ref`: the nearest enclosing block, for header,
    function parameter list or namespace that declares it before `ref`; else (members
    used in a member function, qualified names) every declaration of that name."""
    if "::" not in name:
        n = ref
        while n.parent is not None:
            p = n.parent
            if p.type in ("compound_statement", "translation_unit", "declaration_list"):
                decls = [c for c in p.named_children
                         if c.type == "declaration" and c.start_byte < ref.start_byte]
            elif p.type == "for_statement":
                init = p.child_by_field_name("initializer")
                decls = [init] if init is not None and init.type == "declaration" else []
            elif p.type == "function_definition":
                fd = p.child_by_field_name("declarator")
                while fd is not None and fd.type != "function_declarator":
                    fd = fd.child_by_field_name("declarator")
                params = fd.child_by_field_name("parameters") if fd is not None else None
                decls = [c for c in params.named_children if c.type in (
                    "parameter_declaration", "optional_parameter_declaration")] \
                    if params is not None else []
            else:
                decls = []
            for decl in reversed(decls):  # the last declaration before `ref` wins
                for d in decl.children_by_field_name("declarator"):
                    dname, kind = _cxx_declarator(d)
                    if dname == name:
                        return {(_cxx_type_class(src, decl.child_by_field_name("type")), kind)}
            n = p
    return _cxx_declared(src).get(name, set())


def _cxx_check_local_declaration(src: Source, decl) -> str | None:
    typ = decl.child_by_field_name("type")
    names = ", ".join(f"`{_cxx_declarator(d)[0]}`"
                      for d in decl.children_by_field_name("declarator"))
    if typ is not None and typ.type == "placeholder_type_specifier":
        return f"the loop declares {names} as `auto`; the check does not deduce types"
    if not cxx_plain_type(src, typ):
        return (f"the loop declares {names} of type `{src.text(typ) if typ else '?'}`, whose "
                "constructor and operators may run code the check cannot see")
    return None


def _cxx_check_types(src: Source, loop, var: str) -> str | None:
    """C++: operators can be overloaded, so every variable the loop uses must have a type
    whose operators are known: a built-in arithmetic type (or pointer/array of one), or a
    std::vector of one used as ``v[...]``.  The member of a class object reached with
    ``.`` (or ``->`` on a plain pointer) must itself be of such a type."""
    declared = _cxx_declared(src)
    macros = _c_macros(src)
    file = os.path.basename(src.path)
    for n in walk(loop):
        if n.type == "qualified_identifier":
            p = n.parent
            last = n.child_by_field_name("name")
            if p.type == "qualified_identifier" or last is None or last.type != "identifier":
                continue  # a type (std::size_t), or part of a longer name
            if p.type == "call_expression" and p.child_by_field_name("function") == n:
                continue  # the function of a call: the call check decides
            ref, name = n, src.text(n).replace(" ", "").lstrip(":")
        elif n.type in ("identifier", "field_identifier"):
            p = n.parent
            if p.type == "qualified_identifier" or p.type == "template_function":
                continue
            if p.type == "call_expression" and p.child_by_field_name("function") == n:
                continue
            if p.type in ("init_declarator", "declaration", "pointer_declarator",
                          "array_declarator", "reference_declarator") and \
                    p.child_by_field_name("declarator") in (n, None):
                continue  # a declared name: the declaration check decides
            if n.type == "field_identifier":
                continue  # checked with its object below
            ref, name = n, src.text(n)
        else:
            continue
        if name in macros:
            continue  # non-constant macros were refused already
        classes = _cxx_lookup(src, ref, name)
        if not classes:
            return (f"`{name}` is not declared in {file}, so the check cannot tell whether "
                    "its operators run code")
        cls = {c for c, _ in classes}
        if cls <= {"plain"}:
            continue
        p = ref.parent
        if cls <= {"plain", "vector"}:
            if p.type == "subscript_expression" and p.child_by_field_name("argument") == ref:
                continue
            return f"the loop uses the std::vector `{name}` other than as `{name}[...]`"
        if p.type == "field_expression" and p.child_by_field_name("argument") == ref:
            op = src.text(p.child_by_field_name("operator"))
            kinds = {k for _, k in classes}
            if op == "." and kinds <= {"value", "reference", "function"} or \
                    op == "->" and kinds <= {"pointer"}:
                field = p.child_by_field_name("field")
                fname = src.text(field) if field is not None else "?"
                fcls = {c for c, _ in declared.get(fname, ())}
                if fcls and fcls <= {"plain"}:
                    continue
                if fcls and fcls <= {"plain", "vector"} and p.parent.type == \
                        "subscript_expression" and p.parent.child_by_field_name("argument") == p:
                    continue
                return (f"the member `{src.text(p)}` is not of a built-in type declared in "
                        f"{file}; its operators may run code the check cannot see")
        shown = next(c for c in sorted(cls) if c not in ("plain", "vector"))
        if shown == "auto":
            return f"`{name}` is declared `auto`; the check does not deduce types"
        return (f"`{name}` has the type `{shown}`, whose operators and conversions may "
                "run code the check cannot see")
    return None


def _c_check_write(src: Source, target, var: str, local: dict[str, str],
                   written: dict) -> str | None:
    if target is None:
        return "the loop writes through an expression the check cannot follow"
    t = target.type
    if t == "identifier":
        name = src.text(target)
        if name == var:
            return f"the loop changes its own counter `{var}`"
        if local.get(name) == "reference":
            return (f"the loop writes through the reference `{name}`, which may name memory "
                    "other iterations use")
        if name in local:
            return None
        return f"the loop writes the scalar `{name}` declared outside it"
    if t == "subscript_expression":
        base = strip_parens(target.child_by_field_name("argument"))
        idx = strip_parens(subscript_index(target))
        if base is not None and base.type == "identifier" and src.text(base) in local:
            if local[src.text(base)] == "array":
                return None
            return (f"the loop writes `{src.text(target)}` through `{src.text(base)}`, a "
                    "pointer that may reach memory other iterations use")
        named = ("identifier", "qualified_identifier") if src.lang == "cpp" else ("identifier",)
        if base is not None and base.type not in named:
            return (f"the loop writes `{src.text(target)}` through `{src.text(base)}`, which "
                    "the check does not follow")
        if base is None or idx is None or idx.type != "identifier" or src.text(idx) != var:
            arr = src.text(base) if base is not None else "x"
            return (f"the loop writes `{src.text(target)}`, not exactly `{arr}[{var}]`: "
                    "iterations may write the same element")
        written[src.text(base)] = target
        return None
    if t == "field_expression":
        base = strip_parens(target.child_by_field_name("argument"))
        op = target.child_by_field_name("operator")
        if base is not None and base.type == "identifier" and \
                local.get(src.text(base)) == "scalar" and op is not None and src.text(op) == ".":
            return None
        return f"the loop writes the member `{src.text(target)}`, shared by all iterations"
    if t == "pointer_expression":
        return f"the loop writes through the pointer `{src.text(target)}`"
    return f"the loop writes `{src.text(target)}`, which the check cannot follow"


def _c_counter_used_elsewhere(src: Source, loop, func, var: str) -> str | None:
    """A counter declared outside the loop has no defined value after ``omp parallel
    for``: allow it only if every other use is as the counter of another ``for``."""
    if func is None:
        return None
    for n in walk(func):
        if n.type != "identifier" or src.text(n) != var:
            continue
        if loop.start_byte <= n.start_byte < loop.end_byte:
            continue
        p, ok = n.parent, False
        if p.type == "declaration" and n in p.children_by_field_name("declarator"):
            continue
        while p is not None and p != func:
            if p.type == "for_statement":
                init = p.child_by_field_name("initializer")
                if init is not None and init.type == "assignment_expression" and \
                        src.text(init.child_by_field_name("left")) == var:
                    ok = True
                    break
            p = p.parent
        if not ok:
            return (f"the loop counter `{var}` is declared outside the loop and used "
                    f"after it (line {n.start_point[0] + 1}); its value would be undefined")
    return None


def _c_omp_context(src: Source, node, func) -> str | None:
    """The OpenMP pragma already governing `node` (on it or an enclosing statement)."""
    n = node
    while n is not None and n != func:
        prev = pragma_before(n)
        if omp_words(src, prev) is not None:
            return f"#pragma {src.text(prev.child_by_field_name('argument')).strip()}"
        n = n.parent
    return None


def parallelize_c(src: Source, path: str, line: int, root: str | None) -> Patch | Refusal:
    row = line - 1
    func = function_at(src, row)
    bad = parse_refusal(src, func, line)
    if bad is not None:
        return bad
    loops = [n for n in walk(func if func is not None else src.root)
             if n.type == "for_statement" and contains_row(n, row)]
    where = f"{os.path.basename(path)}:{line}"
    if not loops and src.lang == "cpp" and any(
            n.type == "for_range_loop" and contains_row(n, row) for n in walk(src.root)):
        return Refusal(path, line, f"the loop at {where} is a range-based `for`; only counted "
                                   "`for (i = a; i < n; i++)` loops are parallelised")
    if not loops:
        return Refusal(path, line, f"{where} is not inside a `for` loop")
    omp = _c_omp_context(src, loops[-1], func)
    if omp is not None:
        return Refusal(path, line, f"the loop at {where} already runs under `{omp}`",
                       "bind_block")
    reasons = []
    for loop in loops:  # outermost first (walk is pre-order)
        why = _c_check_loop(src, loop, func)
        if why is None:
            if not src.starts_line(loop):
                why = "the loop does not start its own line"
            else:
                edit = Edit(src.line_start(loop.start_byte),
                            f"{src.indent(loop)}{C_PRAGMA}{src.nl}", attach=True)
                lline = loop.start_point[0] + 1
                where = f"{os.path.basename(path)}:{lline}"
                info = PatchInfo(kind="parallel_first_touch", statement=C_PRAGMA, where=where,
                                 scope=_LOOP_SCOPE)
                return make_patch(path, src.data, [edit], root,
                                  f"parallel first touch: `{C_PRAGMA}` on the loop at {where}",
                                  info)
        reasons.append(why)
    return Refusal(path, line, f"not parallelising the loop at {where}: {reasons[-1]}")
