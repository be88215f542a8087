"""Names read from the user's sources: the variable an allocation is assigned to, whether
a function hands its allocation back to its caller (an allocation wrapper), and which
names are members of the class a C++ member function works on.  The sources are parsed
with tree-sitter (:mod:`sourcelang`); an archived copy from the profile is read in place
of the file on disk when the profile has one (:class:`~numaprof.analyzer.archive.Archive`).
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from numaprof.analyzer import profile_io, sourcelang
from numaprof.analyzer.archive import EMPTY, Archive
from numaprof.analyzer.symbols import SourceLine, source_language
from numaprof.errors import ProfileError

SOURCE_LIMIT = 64 << 20  # a larger source file is not parsed for names


def _parser(lang: str):
    try:
        return sourcelang.parser(lang)
    except Exception:  # noqa: BLE001 - a missing grammar only disables naming
        return None


def find_source(path: str, roots: list[str], archive: Archive = EMPTY) -> Path | None:
    """The source file DWARF names (its copy in ``archive``, the profile's, when there is
    one), or the same name under one of ``roots``."""
    copy = archive.source(path)
    if copy is not None:
        return Path(copy)
    p = Path(path)
    if p.is_file():
        return p
    for r in roots:
        for cand in (Path(r) / path.lstrip("/"), Path(r) / p.name):
            if cand.is_file():
                return cand
    return None


def _parse(path: str, lang: str, archive: Archive):
    return _parse_file(path, lang, archive.is_copy(path))


@lru_cache(maxsize=128)
def _parse_file(path: str, lang: str, archived: bool):
    parser = _parser(lang)
    if parser is None:
        return None
    try:
        # an archived copy (inside the profile) is not followed through a symbolic link;
        # a source on disk may be one
        src = profile_io.read_bytes(path, SOURCE_LIMIT, follow=not archived)
    except (OSError, ValueError, ProfileError):
        return None
    return parser.parse(src), src


def assigned_name(path: str, line: int, column: int = 0, lang: str | None = None,
                  call: tuple[int, int] | None = None, archive: Archive = EMPTY) -> str | None:
    """The variable an allocation on ``path:line`` is assigned to, if the source says so.

    C: ``double *field = malloc(...)`` → ``field``; ``a = (double *)calloc(...)`` →
    ``a``; ``s->buf = malloc(...)`` → ``s->buf``.  Fortran: ``allocate(x(n))`` → ``x``.
    C++ (tree-sitter-cpp), the same forms and ``double *a = new double[n]`` → ``a``,
    ``data_ = new double[n]`` → ``data_``, ``std::vector<double> v(n)`` /
    ``std::vector<double> v{...}`` → ``v`` (the allocation is inside the constructor
    called there), a member initialiser ``data_(new double[n])`` → ``data_``; a
    container growing (``v.resize(n)``, ``.reserve``, ``.assign``, ``.push_back``, ...)
    → its receiver ``v``, and so is any other method's when nothing else on the line
    names the block (``A.setFromTriplets(t.begin(), t.end())`` of an Eigen matrix →
    ``A``: the library allocated it inside and the object keeps it); an owning pointer
    taking the block (``p.reset(new T[n])``,
    ``std::unique_ptr<T[]> p(new T[n])``, ``p = std::unique_ptr<T[]>(new T[n])``) → ``p``;
    a copy (``a = b;``, ``std::vector<double> a = b;``) → ``a``.
    ``column`` (1-based, from DWARF) picks among several calls on the line; ``call``
    (``n, count``, :meth:`ElfInfo.call_rank`) among the arrays of one Fortran
    ``allocate`` statement.  ``lang`` (``c``, ``cpp``, ``fortran``) defaults to
    :func:`source_language` of ``path``; pass the one of the name DWARF gives when
    ``path`` is an archived copy (no extension), which ``archive`` holds.
    """
    lang = lang or source_language(path)
    parsed = _parse(path, lang, archive)
    if parsed is None or line <= 0:
        return None
    tree, src = parsed
    row = line - 1
    calls = []
    want = {"c": ("call_expression",),
            "cpp": ("call_expression", "new_expression", "init_declarator", "field_initializer",
                    "function_declarator", "assignment_expression"),
            "fortran": ("sized_allocation", "allocate_statement")}[lang]
    _collect(tree.root_node, row, want, calls)
    if lang == "fortran" and not calls:
        return _fortran_automatic(tree, row, column, call, src)
    if lang == "cpp":
        # a declaration constructing an object (`std::vector<double> v(n);`) is a call
        # only when it has constructor arguments; plain `double *a = ...` defers to its
        # value; an assignment or a copy-initialisation allocates only when nothing else
        # on the line does (a container's operator=, its copy constructor)
        copies = [c for c in calls if c.type in ("assignment_expression", "init_declarator")]
        calls = [c for c in calls if c.type not in ("init_declarator", "field_initializer", "function_declarator",
                                                    "assignment_expression") or _constructs(c)]
        if not calls and len(copies) == 1:
            c = copies[0]
            if c.type == "init_declarator":
                return _declared_name(c.child_by_field_name("declarator"), src)
            return _lvalue(c.child_by_field_name("left"), src)
    chosen = None
    if column > 0:
        for c in calls:  # the innermost holding the column
            if c.start_point[0] == row and c.start_point[1] <= column - 1 < c.end_point[1]:
                chosen = c
    # without a column: the first of the line's calls that names something
    for node in [chosen] if chosen is not None else calls:
        if lang == "fortran":
            name = _fortran_allocated(node, call, src)
        elif node.type in ("init_declarator", "function_declarator"):
            name = _declared_name(node.child_by_field_name("declarator"), src)
        elif node.type == "field_initializer":
            name = _field_name(node, src)
        else:
            name = _c_target(node, src) or _macro_target(node, src, tree.root_node, src, lang)
        if name is not None:
            return name
    if lang == "cpp":
        # any other method of an object called as a statement of its own, inside which a
        # library allocated and kept the block (`A.setFromTriplets(...)` of an Eigen
        # matrix, `solver.compute(A)`): the object's own storage.  Not a call nested in
        # another (`std::stable_sort(v.begin(), v.end())`'s buffer is not v's), nor one of
        # the methods that only release or hand out (`p.reset()`)
        for node in [chosen] if chosen is not None else calls:
            if node.parent is None or node.parent.type != "expression_statement":
                continue
            name = _method_receiver(node, None, src)
            fn = node.child_by_field_name("function")
            method = fn.child_by_field_name("field") if fn is not None else None
            if (name is not None and name not in ("this", "*this") and method is not None
                    and _text(method, src) not in _RELEASING_METHODS):
                return name
    return None


def _fortran_allocated(node, call: tuple[int, int] | None, src: bytes) -> str | None:
    """The array a Fortran allocation names: the sized allocation ``node`` or, for a
    whole ``allocate`` statement, its ``call[0]``-th one when the statement allocates
    ``call[1]`` arrays (else its first)."""
    stmt = node if node.type == "allocate_statement" else node.parent
    allocs = [ch for ch in stmt.named_children if ch.type == "sized_allocation"] if stmt is not None else []
    if call is not None and allocs and call[1] == len(allocs) and 0 <= call[0] < len(allocs):
        node = allocs[call[0]]
    elif node.type == "allocate_statement" and allocs:
        node = allocs[0]
    return _allocated_array(node, src)


def _allocated_array(node, src: bytes) -> str | None:
    """The array a ``sized_allocation`` allocates: ``u`` of ``u(n)``, ``g%u`` of ``g%u(n)``."""
    ident = next((ch for ch in node.named_children if ch.type in ("identifier", "derived_type_member_expression")), None)
    return _text(ident, src) if ident is not None else None


def allocated_names(path: str, line: int, lang: str, archive: Archive = EMPTY) -> tuple[str, ...]:
    """Every variable that the statements on ``path:line`` allocate for, in order: the
    arrays of Fortran ``allocate`` statements (``allocate(q(n, m), w(n), flux(m, g))`` ->
    ``q``, ``w``, ``flux``), the variables C and C++ calls there are assigned to
    (``double *a = malloc(n), *b = malloc(n);`` -> ``a``, ``b``); () for another language
    or line."""
    if lang not in ("fortran", "c", "cpp") or line <= 0:
        return ()
    parsed = _parse(path, lang, archive)
    if parsed is None:
        return ()
    tree, src = parsed
    found: list = []
    if lang == "fortran":
        _collect(tree.root_node, line - 1, ("sized_allocation",), found)
        names = (_allocated_array(node, src) for node in found)
    else:
        _collect(tree.root_node, line - 1, ("call_expression", "new_expression"), found)
        names = (_c_target(node, src) for node in found if node.start_point[0] == line - 1)
    return tuple(dict.fromkeys(n for n in names if n is not None))


#: attributes of a declaration whose arrays are not automatic ones the procedure allocates
_NOT_AUTOMATIC = ("intent", "allocatable", "pointer", "parameter", "save", "value", "external")


def _fortran_automatic(tree, row: int, column: int, call: tuple[int, int] | None, src: bytes) -> str | None:
    """A Fortran automatic array declared on ``row`` (``real, dimension(n) :: a, b``,
    ``real :: w(n)``): a local whose size is known only at run time, which gfortran
    allocates with malloc on entry (unless -fstack-arrays) at the line and column of its
    name: the one at ``column``, else the ``call[0]``-th of the ``call[1]`` such arrays
    there, or the only one."""
    decls: list = []
    _collect(tree.root_node, row, ("variable_declaration",), decls)
    procs = [p for p in _nodes_at(tree, row + 1, "subroutine", "function", "program") if p.is_named]
    dummies: set[str] = set()
    stmt = next((c for c in procs[-1].children if c.type in ("subroutine_statement", "function_statement")),
                None) if procs else None
    params = next((c for c in stmt.children if c.type == "parameters"), None) if stmt is not None else None
    if params is not None:
        dummies = {_text(c, src).lower() for c in params.named_children if c.type == "identifier"}
    autos = []
    for d in decls:
        quals = [c for c in d.named_children if c.type == "type_qualifier"]
        if any(_text(q, src).lower().startswith(_NOT_AUTOMATIC) for q in quals):
            continue
        shape = next((q for q in quals if _text(q, src).lower().startswith("dimension")), None)
        shared = shape is not None and _runtime_size(shape)
        for c in d.named_children:
            if c.type == "identifier" and shared:
                ident = c
            elif c.type == "sized_declarator" and _runtime_size(c):
                ident = next((x for x in c.named_children if x.type == "identifier"), None)
            else:
                continue
            if ident is not None and _text(ident, src).lower() not in dummies:
                autos.append(_text(ident, src))
                # gfortran's column is the name's last character
                if ident.start_point[0] == row and ident.start_point[1] <= column - 1 < ident.end_point[1]:
                    return autos[-1]
    if call is not None and len(autos) == call[1] and 0 <= call[0] < len(autos):
        return autos[call[0]]
    return autos[0] if len(autos) == 1 else None


def _runtime_size(node) -> bool:
    """Whether a shape holds a name (``dimension(nang, 4)``, ``w(n)``): a size known at
    run time only.  A deferred or assumed shape (``(:)``, ``(*)``) holds none."""
    if node.type == "identifier":
        return True
    return any(_runtime_size(c) for c in node.named_children
               if c.type not in ("kind",) and not (node.type == "sized_declarator" and c is node.named_children[0]))


def _constructs(node) -> bool:
    """An init_declarator ``v{n}`` (its value is the constructor's argument list), a
    member initialiser ``data_(...)``, or ``v(n)`` declared in a function body: the
    grammar reads that as a function declarator (C++'s "most vexing parse"), but an
    allocation on that line says it constructs an object."""
    if node.type == "field_initializer":
        return True
    if node.type == "function_declarator":
        decl = node.parent
        return (decl is not None and decl.type == "declaration" and decl.parent is not None
                and decl.parent.type not in ("translation_unit", "declaration_list", "field_declaration_list"))
    value = node.child_by_field_name("value")
    return value is not None and value.type in ("argument_list", "initializer_list")


def _declared_name(d, src: bytes) -> str | None:
    while d is not None and d.type in ("pointer_declarator", "array_declarator", "reference_declarator",
                                       "parenthesized_declarator", "attributed_declarator"):
        d = d.child_by_field_name("declarator") or (d.named_children[0] if d.named_children else None)
    return _text(d, src) if d is not None and d.type == "identifier" else None


def _field_name(init, src: bytes) -> str | None:
    """The member a constructor's initialiser ``data_(...)`` initialises."""
    field = next((ch for ch in init.named_children if ch.type in ("field_identifier", "identifier")), None)
    return _text(field, src) if field is not None else None


def _collect(node, row, types, out):
    if node.start_point[0] > row or node.end_point[0] < row:
        return
    if node.type in types and node.start_point[0] <= row <= node.end_point[0]:
        out.append(node)
    for ch in node.children:
        _collect(ch, row, types, out)


def _function_at(tree, row: int):
    """The innermost function definition holding ``row`` -- or, in C, the body of a
    K&R-style definition (``float *alloc_1d_dbl(n) int n; { ... }``, legacy numerical
    codes), which tree-sitter-c does not parse as one: a block at the file's top level,
    where only a function body can be -- or None."""
    funcs: list = []
    _collect(tree.root_node, row, ("function_definition",), funcs)
    if funcs:
        return funcs[-1]
    for node in tree.root_node.children:
        if node.type == "ERROR":
            found = next((ch for ch in node.children if ch.type == "compound_statement"
                          and ch.start_point[0] <= row <= ch.end_point[0]), None)
            if found is not None:
                return found
        elif node.type == "compound_statement" and node.start_point[0] <= row <= node.end_point[0]:
            return node
    return None


def _text(node, src: bytes) -> str:
    return src[node.start_byte : node.end_byte].decode("utf-8", "replace")


def _c_target(call, src: bytes) -> str | None:
    out_arg = _out_argument(call, src)
    if out_arg is not None:
        return out_arg
    receiver = _method_receiver(call, _GROWING_METHODS, src)
    if receiver is not None:
        return receiver  # v.resize(n): the vector grows its own storage
    node = call
    while node.parent is not None:
        parent = node.parent
        t = parent.type
        if t in ("cast_expression", "parenthesized_expression", "conditional_expression"):
            node = parent
            continue
        if t == "init_declarator" and parent.child_by_field_name("value") == node:
            return _declared_name(parent.child_by_field_name("declarator"), src)
        if t in ("argument_list", "initializer_list") and parent.parent is not None:
            holder = parent.parent
            if holder.type == "field_initializer":
                return _field_name(holder, src)
            if holder.type == "init_declarator":  # std::unique_ptr<T[]> p(new T[n])
                return _declared_name(holder.child_by_field_name("declarator"), src)
            if holder.type == "call_expression" and _passes_through(holder, src):
                node = holder  # static_cast<T *>(malloc(n)), std::unique_ptr<T[]>(new T[n])
                continue
            if holder.type == "call_expression":
                return _method_receiver(holder, _TAKING_METHODS, src)  # p.reset(new T[n])
            return None
        if t == "assignment_expression" and parent.child_by_field_name("right") == node:
            return _lvalue(parent.child_by_field_name("left"), src)
        return None
    return None


def _lvalue(left, src: bytes) -> str | None:
    while left is not None and left.type == "parenthesized_expression" and left.named_children:
        left = left.named_children[0]  # `(p) = malloc(n)`, as macros write it
    return " ".join(_text(left, src).split()) if left is not None else None


def _macro_target(call, src: bytes, root, root_src: bytes, lang: str, depth: int = 0) -> str | None:
    """What a call of a function-like macro defined in the file (``root``, its text
    ``root_src``) assigns its allocation to: the macro's body with the call's arguments
    for its parameters, named like source (``#define ALLOC(p, n) do { (p) = malloc(n);
    ... } while (0)`` and ``ALLOC(g->energy, n);`` → ``g->energy``).  GCC gives code
    expanded from a macro the line and column of the macro's use.  Macros using ``#`` or
    ``##``, variadic ones and ones defined in other files are not expanded."""
    if depth > 2 or call.type != "call_expression" or lang == "fortran":
        return None
    fn = call.child_by_field_name("function")
    args = call.child_by_field_name("arguments")
    if fn is None or fn.type != "identifier" or args is None:
        return None
    macro = _macro_definition(root, root_src, _text(fn, src))
    value = macro.child_by_field_name("value") if macro is not None else None
    params = macro.child_by_field_name("parameters") if macro is not None else None
    if value is None or params is None:
        return None
    body = _text(value, root_src).replace("\\\n", " ")
    formals = [_text(p, root_src) for p in params.named_children]
    actuals = [" ".join(_text(a, src).split()) for a in args.named_children]
    if "#" in body or len(formals) != len(actuals) or not all(f.isidentifier() for f in formals):
        return None
    subst = dict(zip(formals, actuals, strict=True))
    expanded = re.sub(r"[A-Za-z_]\w*", lambda m: subst.get(m.group(), m.group()), body)
    parser = _parser(lang)
    if parser is None:
        return None
    code = f"void numaprof_macro(void) {{ {expanded}; }}".encode()
    calls: list = []
    _collect(parser.parse(code).root_node, 0, ("call_expression", "new_expression"), calls)
    for c in calls:
        got = _c_target(c, code) or _macro_target(c, code, root, root_src, lang, depth + 1)
        if got is not None:
            return got
    return None


def _macro_definition(root, src: bytes, name: str):
    """The last ``#define name(...)`` of a file (inside conditional blocks too)."""
    defs: list = []
    _find(root, "preproc_function_def", defs)
    for d in reversed(defs):
        n = d.child_by_field_name("name")
        if n is not None and _text(n, src) == name:
            return d
    return None


# container methods that allocate the container's own storage: the receiver is the array
_GROWING_METHODS = frozenset({"resize", "reserve", "assign", "push_back", "emplace_back", "insert", "emplace",
                              "push_front", "emplace_front", "append", "insert_or_assign", "try_emplace"})
# owning pointers' methods taking a block allocated in their argument: p.reset(new T[n])
_TAKING_METHODS = frozenset({"reset"})
# methods that release or hand out what the object holds: never where it allocates
_RELEASING_METHODS = frozenset({"reset", "release", "clear", "swap", "get", "data", "size", "begin", "end"})
# calls that hand their (first) argument back: casts, moves, owning pointers' constructors
_PASS_THROUGH = frozenset({"static_cast", "reinterpret_cast", "const_cast", "dynamic_cast", "move", "forward",
                           "unique_ptr", "shared_ptr", "launder", "assume_aligned", "__builtin_assume_aligned"})


def _callee(call, src: bytes) -> str | None:
    """The last name of what a call_expression calls: ``static_cast`` of
    ``static_cast<T *>(p)``, ``unique_ptr`` of ``std::unique_ptr<T[]>(q)``."""
    fn = call.child_by_field_name("function")
    while fn is not None and fn.type in ("qualified_identifier", "template_function", "template_type"):
        fn = fn.child_by_field_name("name")
    if fn is None or fn.type not in ("identifier", "type_identifier"):
        return None
    return _text(fn, src)


def _passes_through(call, src: bytes) -> bool:
    """A cast-like call (``static_cast<T *>(p)``, ``std::move(p)``, ``std::unique_ptr<T[]>(p)``)."""
    args = call.child_by_field_name("arguments")
    return args is not None and len(args.named_children) >= 1 and _callee(call, src) in _PASS_THROUGH


def _method_receiver(call, methods: frozenset[str] | None, src: bytes) -> str | None:
    """``v`` of ``v.resize(n)`` (``this->v``, ``s->v``, ``a.b.v`` alike) when the method is
    one of ``methods`` (None: any method)."""
    if call.type != "call_expression":
        return None
    fn = call.child_by_field_name("function")
    if fn is None or fn.type != "field_expression":
        return None
    method = fn.child_by_field_name("field")
    if method is None or (methods is not None and _text(method, src) not in methods):
        return None
    return _lvalue(fn.child_by_field_name("argument"), src)


# allocators that return the block through their first argument: posix_memalign(&p, ...)
_OUT_ARG_ALLOCATORS = {"posix_memalign", "cudaMallocHost", "hipHostMalloc"}


def _strip(node, src: bytes):
    """The expression under casts and parentheses, C's and C++'s (``static_cast<T *>(p)``,
    ``reinterpret_cast``, ``std::move(p)``, ``std::unique_ptr<T[]>(p)``)."""
    while node is not None:
        if node.type in ("cast_expression", "parenthesized_expression"):
            node = node.child_by_field_name("value") or (node.named_children[-1] if node.named_children else None)
        elif node.type == "call_expression" and _passes_through(node, src):
            node = node.child_by_field_name("arguments").named_children[0]
        else:
            return node
    return node


def _out_argument(call, src: bytes) -> str | None:
    """``posix_memalign(&field, 64, n)`` → ``field`` (also through a ``(void **)`` cast)."""
    if call.type != "call_expression":
        return None
    fn = call.child_by_field_name("function")
    args = call.child_by_field_name("arguments")
    if fn is None or args is None or _text(fn, src).split("::")[-1] not in _OUT_ARG_ALLOCATORS:
        return None
    first = _strip(args.named_children[0], src) if args.named_children else None
    if first is None or first.type != "pointer_expression" or _text(first, src)[:1] != "&":
        return None
    target = first.child_by_field_name("argument")
    return " ".join(_text(target, src).split()) if target is not None else None


def returns_allocation(path: str, line: int, name: str | None, lang: str | None = None,
                       archive: Archive = EMPTY) -> bool:
    """Whether the function holding ``path:line`` hands the allocation made there back to
    its caller: the call is in a ``return`` statement, or ``name`` (the variable it was
    assigned to) is what the function returns.  Such a function is an allocation
    wrapper (``xmalloc``, ``new_grid``), and the caller's variable names the array."""
    lang = lang or source_language(path)
    if lang == "fortran" or line <= 0:
        return False
    parsed = _parse(path, lang, archive)
    if parsed is None:
        return False
    tree, src = parsed
    row = line - 1
    body = _function_at(tree, row)  # the innermost (a lambda or local class method in C++)
    if body is None:
        return False
    returns: list = []
    _find(body, "return_statement", returns)
    for r in returns:
        if r.start_point[0] <= row <= r.end_point[0]:
            return True  # return malloc(n);
        value = _strip(r.named_children[0], src) if r.named_children else None
        if name and value is not None and " ".join(_text(value, src).split()) == name:
            return True
    return False


_SUBSCRIPTED = re.compile(r"^(\w+)((?:\[[^\[\]]*\])+)$")


def returned_part(path: str, line: int, name: str | None, lang: str | None = None,
                  archive: Archive = EMPTY) -> str | None:
    """What of the array built by the function holding ``path:line`` its caller gets:
    "" when the allocation there is what it returns (``returns_allocation``), the
    subscripts when it fills the rows of what it returns (``g[i][j] = calloc(...)`` in a
    function returning ``g``: "[][]"), None when it is not a wrapper."""
    if returns_allocation(path, line, name, lang, archive):
        return ""
    m = _SUBSCRIPTED.match(name or "")
    if m and returns_allocation(path, line, m.group(1), lang, archive):
        return "[]" * m.group(2).count("[")
    return None


_THROUGH = re.compile(r"^(\*?)\s*([A-Za-z_]\w*)((?:\.|->|\[).*)?$", re.S)


def through_parameter(path: str, line: int, name: str | None, lang: str | None = None,
                      archive: Archive = EMPTY) -> tuple[int, str, str] | None:
    """When ``name``, what the allocation on ``path:line`` is assigned to, is reached
    through a parameter of the C or C++ function holding the line (an out-parameter:
    ``v.values = new double[n]`` in ``void InitializeVector(Vector &v, int n)``,
    ``g->cells = malloc(...)`` with ``struct grid *g``, ``*out = malloc(n)``): (index of
    the parameter, ``*`` when the name dereferences it or "", the rest of the name after
    it: ``.values``).  The caller's argument names the array (:func:`through_argument`).
    Fortran: a dummy argument (``allocate(f(n))``, ``allocate(g%u(n))``).
    None otherwise, and for a parameter the function assigns to itself (``p = ...``:
    the caller's variable is not changed)."""
    lang = lang or source_language(path)
    if lang == "fortran":
        return _fortran_dummy(path, line, name, archive)
    m = _THROUGH.match(name or "")
    if lang not in ("c", "cpp") or m is None or line <= 0:
        return None
    parsed = _parse(path, lang, archive)
    if parsed is None:
        return None
    tree, src = parsed
    funcs: list = []
    _collect(tree.root_node, line - 1, ("function_definition",), funcs)
    if not funcs:
        return None
    decl = funcs[-1].child_by_field_name("declarator")
    while decl is not None and decl.type != "function_declarator":
        decl = decl.child_by_field_name("declarator")
    params = decl.child_by_field_name("parameters") if decl is not None else None
    if params is None:
        return None
    plist = [p for p in params.named_children
             if p.type in ("parameter_declaration", "optional_parameter_declaration")]
    names = [_parameter_name(p, src) for p in plist]
    if m.group(2) not in names:
        return None
    index = names.index(m.group(2))
    if not (m.group(1) or m.group(3)) and not _by_reference(plist[index]):
        return None  # `p = malloc(n)` changes the function's own copy
    if m.group(2) in _locals_of(funcs[-1], src):
        return None  # a local of the same name hides the parameter
    return index, m.group(1), m.group(3) or ""


_FORTRAN_THROUGH = re.compile(r"^([A-Za-z_]\w*)((?:%|\().*)?$", re.S)


def _fortran_dummy(path: str, line: int, name: str | None, archive: Archive) -> tuple[int, str, str] | None:
    """Fortran: an array allocated through a dummy argument of the subroutine or
    function holding the line (``allocate(f(n))`` with ``f`` a dummy, ``allocate(g%u(n))``
    with ``type(grid) :: g``): Fortran passes it by reference, so the caller's actual
    argument is the array."""
    m = _FORTRAN_THROUGH.match(name or "")
    parsed = _parse(path, "fortran", archive) if m is not None and line > 0 else None
    if parsed is None:
        return None
    tree, src = parsed
    procs = [p for p in _nodes_at(tree, line, "subroutine", "function") if p.is_named]
    if not procs:
        return None
    stmt = next((c for c in procs[-1].children if c.type in ("subroutine_statement", "function_statement")), None)
    params = next((c for c in stmt.children if c.type == "parameters"), None) if stmt is not None else None
    if params is None:
        return None
    names = [_text(c, src).lower() for c in params.named_children if c.type == "identifier"]
    head = m.group(1).lower()
    return (names.index(head), "", m.group(2) or "") if head in names else None


def _fortran_argument(tree, src: bytes, line: int, callee: str, via: tuple[int, str, str],
                      call: tuple[int, int] | None) -> str | None:
    want = plain_function(callee).lower()

    def to_callee(nodes):
        return [c for c in nodes if c.child_by_field_name("subroutine") is not None
                and _text(c.child_by_field_name("subroutine"), src).lower() == want]

    calls = to_callee(_nodes_at(tree, line, "subroutine_call"))
    if not calls and call is not None:
        # gfortran -O2 gives a call passing an intent(out) allocatable the line of the
        # procedure's `end` or its first line: the n-th of the procedure's `count` calls
        # to the callee in code order is its n-th in source
        procs = [p for p in _nodes_at(tree, line, "subroutine", "function", "program")
                 if p.is_named]  # not the keyword `program` of its statement
        found: list = []
        if procs:
            _find(procs[-1], "subroutine_call", found)
        found = to_callee(found)
        calls = [found[call[0]]] if len(found) == call[1] else []
    if len(calls) != 1:
        return None
    args = next((c for c in calls[0].children if c.type == "argument_list"), None)
    index, _, rest = via
    if args is None or index >= len(args.named_children):
        return None
    arg = args.named_children[index]
    if arg.type not in ("identifier", "call_expression", "derived_type_member_expression"):
        return None  # a keyword argument, an expression
    return " ".join(_text(arg, src).split()) + rest


def _nodes_at(tree, line: int, *types: str) -> list:
    out: list = []
    _collect(tree.root_node, line - 1, types, out)
    return out


def _by_reference(p) -> bool:
    """A C++ reference parameter (``double *&p``, ``std::vector<double> &v``)."""
    d = p.child_by_field_name("declarator")
    while d is not None:
        if d.type == "reference_declarator":
            return True
        d = d.child_by_field_name("declarator")
    return False


def _parameter_name(p, src: bytes) -> str | None:
    d = p.child_by_field_name("declarator")
    while d is not None and d.type != "identifier":
        nxt = d.child_by_field_name("declarator")
        if nxt is None:  # `Vector &v`: the reference declarator holds the name unfielded
            nxt = next((c for c in d.named_children if c.type.endswith(("declarator", "identifier"))), None)
        d = nxt
    return _text(d, src) if d is not None else None


def _locals_of(func, src: bytes) -> set[str]:
    body = func.child_by_field_name("body")
    decls: list = []
    if body is not None:
        _find(body, "declaration", decls)
    out = set()
    for d in decls:
        for declarator in d.children_by_field_name("declarator"):
            if declarator.type == "init_declarator":
                declarator = declarator.child_by_field_name("declarator")
            while declarator is not None and declarator.type in ("pointer_declarator", "reference_declarator"):
                declarator = declarator.child_by_field_name("declarator") or next(
                    (c for c in declarator.named_children if c.type.endswith("declarator") or c.type == "identifier"),
                    None)
            if declarator is not None and declarator.type == "identifier":
                out.add(_text(declarator, src))
    return out


_SIMPLE_ARGUMENT = re.compile(r"^[&*]?\s*[A-Za-z_][\w.\[\]>:\s-]*$")
_TEMPLATE_ARGS = re.compile(r"<[^<>]*>")


_FORTRAN_MODULE = re.compile(r"^__\w+?_MOD_")  # gfortran's module procedure symbols


def plain_function(name: str) -> str:
    """A function's own name from the one DWARF or a call gives: ``ns::Grid::init(int)``,
    ``alloc<double>``, ``obj.init``, ``__grids_MOD_init`` → ``init``, ``alloc``."""
    name = _FORTRAN_MODULE.sub("", name.split("(", 1)[0])
    while _TEMPLATE_ARGS.search(name):
        name = _TEMPLATE_ARGS.sub("", name)
    return re.split(r"::|\.|->", name)[-1].strip()


def through_argument(path: str, line: int, column: int, callee: str, via: tuple[int, str, str],
                     lang: str | None = None, archive: Archive = EMPTY,
                     call: tuple[int, int] | None = None) -> str | None:
    """The name of what the call to ``callee`` on ``path:line`` passes for the parameter
    ``via`` (:func:`through_parameter`) went through: ``InitializeVector(b, n)`` with
    ``v.values`` → ``b.values``; ``init(&g)`` with ``g->cells`` → ``g.cells``;
    ``make(&a)`` with ``*out`` → ``a``.  None when no such call is on the line or its
    argument is not a plain variable, member or element.  ``call`` (Fortran, ``n, count``:
    the caller's n-th of its ``count`` calls to the callee, :meth:`ElfInfo.call_rank`)
    finds the call when the line table put it on another line."""
    lang = lang or source_language(path)
    if lang not in ("c", "cpp", "fortran") or line <= 0:
        return None
    parsed = _parse(path, lang, archive)
    if parsed is None:
        return None
    tree, src = parsed
    if lang == "fortran":
        return _fortran_argument(tree, src, line, callee, via, call)
    calls: list = []
    _collect(tree.root_node, line - 1, ("call_expression",), calls)
    want = plain_function(callee)
    calls = [c for c in calls if c.child_by_field_name("function") is not None
             and plain_function(_text(c.child_by_field_name("function"), src)) == want]
    if column > 0 and len(calls) > 1:
        held = [c for c in calls if c.start_point[0] == line - 1 and c.start_point[1] <= column - 1 < c.end_point[1]]
        calls = held[-1:] or calls
    if len(calls) != 1:
        return None
    args = calls[0].child_by_field_name("arguments")
    index, deref, rest = via
    if args is None or index >= len(args.named_children):
        return None
    arg = " ".join(_text(_strip(args.named_children[index], src), src).split())
    if not _SIMPLE_ARGUMENT.match(arg):
        return None
    address_of = arg.startswith("&")
    base = arg[1:].strip() if address_of else arg
    if deref:  # *out: what out points to
        return base + rest if address_of else f"*{base}{rest}"
    if rest.startswith("->") and address_of:
        return f"{base}.{rest[2:]}"
    if rest.startswith(".") and base.startswith("*"):
        return f"{base[1:].strip()}->{rest[1:]}"
    return base + rest


def _find(node, type_: str, out: list) -> None:
    if node.type == type_:
        out.append(node)
    for ch in node.children:
        _find(ch, type_, out)


_HEAD = re.compile(r"[A-Za-z_]\w*")


def member_name(path: str, site: SourceLine, name: str, lang: str | None = None,
                archive: Archive = EMPTY) -> str:
    """``name`` as a member of the object a C++ member function works on, qualified by its
    class: ``m_pos`` or ``this->m_pos`` assigned in ``Mesh::allocate`` → ``Mesh::m_pos``
    (``m_pos.data``… keeps its tail: ``Mesh::m_pos.data``).  A name is such a member when
    the DWARF class of the function (``site.scope``) has a data member of that name and
    the function (parameters and locals of the source at ``path``) declares none that
    hides it.  Other names are returned as they are: locals, globals, ``s->buf``,
    ``obj.m_pos``, and every name outside C++ member functions."""
    scope = site.scope
    if scope is None or (lang or source_language(path)) != "cpp":
        return name
    explicit = name.startswith("this->")
    rest = name[len("this->"):] if explicit else name
    head = _HEAD.match(rest)
    if head is None or head.group() not in scope.members:
        return name
    if not explicit and head.group() in _declared_in_function(path, site.line, archive):
        return name
    return f"{scope.name}::{rest}"


def _declared_in_function(path: str, line: int, archive: Archive) -> set[str]:
    """Names the C++ function holding ``path:line`` declares: its parameters and locals."""
    parsed = _parse(path, "cpp", archive)
    if parsed is None or line <= 0:
        return set()
    tree, src = parsed
    funcs: list = []
    _collect(tree.root_node, line - 1, ("function_definition", "lambda_expression"), funcs)
    if not funcs:
        return set()
    names: set[str] = set()
    decls: list = []
    for t in ("parameter_declaration", "optional_parameter_declaration", "declaration", "for_range_loop"):
        for f in funcs:  # a lambda sees its enclosing function's locals too
            _find(f, t, decls)
    for d in decls:
        for declarator in d.children_by_field_name("declarator"):
            # `std::vector<double> v(n);` in a body reads as a function declarator
            if declarator.type in ("init_declarator", "function_declarator"):
                declarator = declarator.child_by_field_name("declarator")
            got = _declared_name(declarator, src)
            if got:
                names.add(got)
    return names
