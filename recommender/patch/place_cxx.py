"""C++ placements that follow a container or a constructor rather than an allocator call.

- ``std::vector``: after a construction with elements (``std::vector<T> v(n)``), the
  call places ``v.data()`` for ``v.size()`` elements; after a statement that sizes an
  existing vector (``v.resize(n)``, ``v.assign(n, x)``, ``v.reserve(n)``,
  ``v = std::vector<T>(n)`` — typically a member sized in a member function), it places
  ``v.capacity()`` elements, the whole buffer that statement allocated.  The vector's
  type is resolved in scope (a local, a parameter, a member of the enclosing class,
  also when the class is defined in another recorded file): a ``std::deque`` or a
  ``std::vector<bool>`` has no contiguous ``data()`` and is refused.
- a member initialised in a constructor's member initialiser list (``: data_(new
  double[n])``, ``: cells_(n)`` for a vector member): the call goes at the start of the
  constructor body, where every member is constructed; the member is named
  ``this->data_`` when a parameter of the same name hides it there.
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
    allocation_size_nodes,
    allocator_name,
    edit_after,
    find_placement,
    new_length,
    new_size,
    new_touch_words,
    operand,
    place_text,
    placement_words,
    size_value,
    with_include,
)
from numaprof.recommender.patch.source import (
    Source,
    block_statement,
    contains_row,
    cxx_vector_element,
    declarator_name,
    enclosing,
    load,
    strip_parens,
    walk,
)

#: std::vector members that (re)allocate the buffer to a size given as arguments.
SIZING_METHODS = ("resize", "assign", "reserve")


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


def vector_sizing(src: Source, row: int, var: str | None):
    """The statement on `row` that sizes an existing vector: (statement, object
    expression node, what it does) for ``X.resize(n)`` / ``X.assign(...)`` /
    ``X.reserve(n)`` / ``X = std::vector<T>(...)``; None when there is none."""
    found = []
    for n in walk(src.root):
        if n.type != "expression_statement" or not contains_row(n, row):
            continue
        expr = n.named_children[0] if n.named_children else None
        obj, how = None, ""
        if expr is not None and expr.type == "call_expression":
            fn = expr.child_by_field_name("function")
            if fn is not None and fn.type == "field_expression" and \
                    src.text(fn.child_by_field_name("operator")) == "." and \
                    src.text(fn.child_by_field_name("field")) in SIZING_METHODS:
                obj, how = fn.child_by_field_name("argument"), src.text(fn.child_by_field_name(
                    "field"))
        elif expr is not None and expr.type == "assignment_expression" and \
                src.text(expr.child_by_field_name("operator")) == "=":
            right = expr.child_by_field_name("right")
            fn = right.child_by_field_name("function") if right is not None and \
                right.type == "call_expression" else None
            if fn is not None and "vector" in src.text(fn).split("<", 1)[0]:
                obj, how = expr.child_by_field_name("left"), "assignment"
        if obj is None:
            continue
        if var is not None and _member_name(src, obj) != var:
            continue
        found.append((n, obj, how))
    return found[0] if len(found) == 1 else None


def _member_name(src: Source, obj) -> str:
    """``v`` for ``v``, ``this->v``, ``grid.v`` and ``p->v``."""
    obj = strip_parens(obj)
    if obj is not None and obj.type == "field_expression":
        return src.text(obj.child_by_field_name("field"))
    return src.text(obj) if obj is not None else ""


def _class_in(src: Source, name: str):
    for n in walk(src.root):
        if n.type in ("class_specifier", "struct_specifier") and \
                n.child_by_field_name("body") is not None:
            nm = n.child_by_field_name("name")
            if nm is not None and src.text(nm).split("<", 1)[0] == name:
                return n
    return None


def _member_type(src: Source, func, member: str, sources):
    """(Source, field_declaration) of data member `member` of the class whose member
    function `func` is: the class in this file, else in another recorded C++ file."""
    cls, is_member = scope.class_of_function(src, func)
    if cls is not None:
        hit = scope.class_member(src, cls, member)
        return (src, hit[1]) if hit is not None else None
    if not is_member:
        return None
    d = func.child_by_field_name("declarator")
    while d is not None and d.type != "function_declarator":
        d = d.child_by_field_name("declarator")
    name = d.child_by_field_name("declarator") if d is not None else None
    scope_node = name.child_by_field_name("scope") if name is not None else None
    cls_name = src.text(scope_node).split("<", 1)[0].rsplit("::", 1)[-1] \
        if scope_node is not None else ""
    for path in sources:
        if os.path.realpath(path) == os.path.realpath(src.path):
            continue
        other = load(path, want=("cpp",))
        if isinstance(other, Refusal):
            continue
        cls = _class_in(other, cls_name)
        if cls is not None:
            hit = scope.class_member(other, cls, member)
            return (other, hit[1]) if hit is not None else None
    return None


def resolve_vector(src: Source, obj, at: int, sources) -> tuple[str, str] | str:
    """What the object expression of a sizing statement is: ("vector", words saying how it
    was resolved), or the reason it is not a std::vector numaprof can place."""
    obj = strip_parens(obj)
    func = enclosing(obj, "function_definition")
    text = " ".join(src.text(obj).split())
    this_member = obj.type == "field_expression" and \
        src.text(obj.child_by_field_name("argument")) == "this"
    decl_src, typ, how = src, None, ""
    # a field_identifier is the member a constructor's initialiser names
    if obj.type in ("identifier", "field_identifier") or this_member:
        name = _member_name(src, obj)
        decl = scope.lookup(src, name, at) if obj.type == "identifier" else None
        if decl is not None and decl.scope not in ("unknown", "macro"):
            typ, how = decl.node.child_by_field_name("type"), scope.describe(src, decl)
        elif func is not None:
            found = _member_type(src, func, name, sources)
            if found is not None:
                decl_src, field = found
                typ = field.child_by_field_name("type")
                where = "" if decl_src is src else f" in {os.path.basename(decl_src.path)}"
                how = f"the member `{name}` (line {field.start_point[0] + 1}{where})"
    else:
        # grid.cells / p->cells: every member of that name in the file must be a vector
        name = _member_name(src, obj)
        fields = [f for f in walk(src.root) if f.type == "field_declaration" and any(
            scope.declarator_identifier(d) is not None and
            src.text(scope.declarator_identifier(d)) == name
            for d in f.children_by_field_name("declarator"))]
        types = {" ".join(src.text(f.child_by_field_name("type")).split()) for f in fields}
        if len(types) == 1:
            typ, how = fields[0].child_by_field_name("type"), \
                f"the member `{name}` (line {fields[0].start_point[0] + 1})"
    if typ is None:
        return (f"the type of `{text}` is not declared in the recorded sources, so numaprof "
                "cannot tell that it is a std::vector with a data() to place")
    elem = cxx_vector_element(decl_src, typ)
    shown = " ".join(decl_src.text(typ).split())
    if elem is None:
        return f"`{text}` is a `{shown}`, not a std::vector: no contiguous data() to place"
    if decl_src.text(elem).strip() == "bool":
        return f"`{text}` is a std::vector<bool>, which packs bits and has no data() to place"
    return "vector", how


def place_cxx_container(src: Source, row: int, var: str | None, const: str, root,
                        weighted, recorded_size: int | None, sources
                        ) -> Patch | Refusal | AlreadyPlaced | None:
    """A placement after a vector construction or sizing on `row`, or at the start of the
    constructor whose member initialiser on `row` allocates; None when `row` has none."""
    where = f"{os.path.basename(src.path)}:{row + 1}"
    vec = cxx_vector_construction(src, row, var)
    if vec is not None:
        if isinstance(vec, Refusal):
            return vec
        stmt, name, _elem = vec
        return _place_after(src, stmt, name, f"{name}.size()", const, root, weighted, where,
                            f"the std::vector `{name}` declared by that statement",
                            "place_vector",
                            f"after its construction at {where} (the constructor already "
                            "wrote the elements: the call moves those pages)")
    sizing = vector_sizing(src, row, var)
    if sizing is not None:
        stmt, obj, how = sizing
        what = resolve_vector(src, obj, stmt.end_byte, sources)
        name = " ".join(src.text(obj).split())
        if isinstance(what, str):
            return Refusal(src.path, row + 1, what, "numactl")
        words = ("(the elements are written as it sizes the vector: the call moves those "
                 "pages)" if how in ("resize", "assign", "assignment") else
                 "(reserve leaves the elements unwritten)")
        verb = "sizing" if how != "assignment" else "assignment"
        return _place_after(src, stmt, name, f"{name}.capacity()", const, root, weighted,
                            where, what[1], "place_vector",
                            f"after its {verb} at {where} {words}")
    return _place_in_constructor(src, row, var, const, root, weighted, recorded_size,
                                 sources, where)


def _place_after(src: Source, stmt, name: str, count: str, const: str, root, weighted,
                 where: str, resolved: str, kind: str, after: str
                 ) -> Patch | AlreadyPlaced:
    func = enclosing(stmt, "function_definition")
    existing = find_placement(src, name, start=stmt.end_byte,
                              end=func.end_byte if func is not None else None)
    if existing is not None:
        return existing
    size = f"{count} * sizeof(*{name}.data())"
    text = place_text(f"{name}.data()", size, const, weighted)
    edits, _ = with_include(src, edit_after(src, stmt, text), text, size, False, None)
    info = PatchInfo(kind=kind, statement=text, where=where, target=f"{name}.data()",
                     size=size, scope=f"inserted right after that statement: `{name}` is "
                                      f"{resolved}")
    return make_patch(src.path, src.data, edits, root,
                      f"place std::vector `{name}` with {placement_words(const, weighted)} "
                      f"{after}", info)


def member_initialiser(src: Source, row: int, var: str | None):
    """The member initialiser on `row` (of the member `var` if given), or None."""
    found = []
    for n in walk(src.root):
        if n.type == "field_initializer" and contains_row(n, row):
            name = n.named_children[0] if n.named_children else None
            if name is None or name.type != "field_identifier":
                continue
            if var is None or src.text(name) == var:
                found.append(n)
    return found[0] if len(found) == 1 else None


def _place_in_constructor(src: Source, row: int, var: str | None, const: str, root,
                          weighted, recorded_size: int | None, sources, where: str
                          ) -> Patch | Refusal | AlreadyPlaced | None:
    init = member_initialiser(src, row, var)
    if init is None:
        return None
    func = enclosing(init, "function_definition")
    body = func.child_by_field_name("body") if func is not None else None
    member = src.text(init.named_children[0])
    if body is None or body.type != "compound_statement":
        return Refusal(src.path, row + 1, f"the constructor initialising `{member}` at {where} "
                                          "has no plain body to put a placement in", "numactl")
    at = body.start_byte + 1
    decl = scope.lookup(src, member, at)
    # a parameter or local of the member's name hides it in the body: this-> reaches it
    hidden_by = decl if decl is not None and decl.scope in ("parameter", "local", "macro") \
        else None
    ptr = f"this->{member}" if hidden_by is not None else member
    args = init.named_children[1] if len(init.named_children) > 1 else None
    values = [strip_parens(a) for a in args.named_children] if args is not None else []
    alloc = values[0] if len(values) == 1 else None
    while alloc is not None and alloc.type == "cast_expression":
        alloc = strip_parens(alloc.child_by_field_name("value"))
    if alloc is not None and alloc.type == "call_expression" and src.lang == "cpp" and \
            alloc.child_by_field_name("function") is not None and \
            src.text(alloc.child_by_field_name("function")).startswith(
                ("static_cast", "reinterpret_cast")):
        inner = alloc.child_by_field_name("arguments").named_children
        alloc = strip_parens(inner[0]) if len(inner) == 1 else None
    touched, size_bytes, probe_ok = "", None, False
    if alloc is not None and alloc.type == "new_expression":
        size = new_size(src, alloc, ptr, where)
        if size.startswith("!"):
            return Refusal(src.path, row + 1, size[1:], "numactl")
        touched = new_touch_words(src, alloc)
        kind, target = "place_in_constructor", ptr
        element = scope.PRIMITIVE_SIZES.get(
            " ".join(src.text(alloc.child_by_field_name("type")).split()))
        if any(c.type == "new_declarator" for c in new_length(alloc).parent.named_children):
            element = None
        size_bytes = size_value(src, [new_length(alloc)], at, element)
        probe_ok = True
    elif alloc is not None and allocator_name(src, alloc) is not None:
        nodes = allocation_size_nodes(src, alloc)
        if nodes is None:
            return Refusal(src.path, row + 1, f"the size argument of the allocation at {where} "
                                              "has side effects; it cannot be evaluated twice",
                           "numactl")
        size = " * ".join(operand(src, a) for a in nodes) if len(nodes) > 1 else \
            src.text(nodes[0])
        kind, target = "place_in_constructor", ptr
        size_bytes = size_value(src, nodes, at)
        probe_ok = True
    else:
        what = resolve_vector(src, init.named_children[0], at, sources) if values else \
            "it constructs the member without elements"
        if isinstance(what, str) or not values:
            reason = what if isinstance(what, str) else "it constructs the member without elements"
            return Refusal(src.path, row + 1, f"the member initialiser of `{member}` at {where} "
                                              f"allocates no array numaprof can place: {reason}",
                           "numactl")
        kind, target = "place_in_constructor", f"{ptr}.data()"
        size = f"{ptr}.size() * sizeof(*{ptr}.data())"
        touched = " (the vector's constructor wrote the elements: the call moves those pages)"
    existing = find_placement(src, ptr, start=body.start_byte, end=body.end_byte)
    if existing is not None:
        return existing
    if size_bytes is not None and recorded_size is not None and size_bytes != recorded_size:
        return Refusal(src.path, row + 1, f"the allocation at {where} is of {size_bytes} bytes "
                                          f"(`{size}`), but the profile recorded "
                                          f"{recorded_size} for `{member}`", "numactl")
    text = place_text(target, size, const, weighted)
    edits, probe = with_include(src, _edit_at_body_start(src, body, text), text, size,
                                probe_ok and size_bytes is not None, recorded_size)
    hidden = "" if hidden_by is None else \
        f" ({scope.describe(src, hidden_by)} hides the member there)"
    info = PatchInfo(kind=kind, statement=text, where=where, target=target, size=size,
                     size_bytes=size_bytes, recorded_bytes=recorded_size, probe=probe,
                     scope=(f"at the start of the constructor body, where every member is "
                            f"constructed: `{ptr}` is the member `{member}`{hidden}, and the "
                            "size's names are the constructor's, as in the initialiser"))
    return make_patch(src.path, src.data, edits, root,
                      f"place `{member}` with {placement_words(const, weighted)} at the start "
                      f"of the constructor that allocates it at {where}{touched}", info)


def _edit_at_body_start(src: Source, body, text: str) -> Edit:
    brace_end = body.start_byte + 1
    rest = src.data[brace_end:src.line_end(brace_end)].strip()
    if body.start_point[0] == body.end_point[0] or (rest and not rest.startswith((b"//", b"/*"))):
        inner = src.data[brace_end:body.end_byte - 1].strip()
        return Edit(brace_end, f" {text}" + (" " if not inner else ""))
    first = next((c for c in body.named_children if c.type != "comment"), None)
    indent = src.indent(first) if first is not None and src.starts_line(first) else \
        src.indent(body) + "    "
    return Edit(src.line_end(brace_end), f"{indent}{text}{src.nl}")


def serial_construction(src: Source, row: int, var: str | None
                        ) -> tuple[str, str, str] | None:
    """A C++ statement on `row` that writes an array's elements as it allocates them:
    (the statement's text, the array's name, what writes the elements) for a vector
    constructed with elements, a vector resized or assigned, or a member initialised with
    ``new T[n]()`` or with elements; None otherwise."""
    vec = cxx_vector_construction(src, row, var)
    if isinstance(vec, tuple):
        return " ".join(src.text(vec[0]).split()), vec[1], "its constructor"
    sizing = vector_sizing(src, row, var)
    if sizing is not None and sizing[2] in ("resize", "assign", "assignment"):
        verb = {"resize": "resize()", "assign": "assign()", "assignment": "the constructor"}
        return (" ".join(src.text(sizing[0]).split()), " ".join(src.text(sizing[1]).split()),
                verb[sizing[2]])
    init = member_initialiser(src, row, var)
    if init is not None and len(init.named_children) > 1 and \
            init.named_children[1].named_children:
        name = src.text(init.named_children[0])
        value = strip_parens(init.named_children[1].named_children[0])
        if value is not None and value.type == "new_expression":
            if value.child_by_field_name("arguments") is not None:
                return " ".join(src.text(init).split()), name, "the new-expression"
            return None
        if value is not None and allocator_name(src, value) is None:
            return " ".join(src.text(init).split()), name, "the member's constructor"
    return None
