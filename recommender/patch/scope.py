"""What a name denotes at a point of a C or C++ file: the parser's scopes, not the name alone.

A statement inserted into a user's function must mean there what the profile saw.  The
classic failure is ``numaprof_place(idx, sizeof(idx), ...)`` in a function whose
parameter ``int idx[]`` hides the file-scope array ``idx``: the name is the same, the
object is a pointer, and ``sizeof`` gives 8 bytes.  `lookup` answers "which declaration
does NAME refer to at byte OFFSET": a macro defined before it (macros ignore scopes), the
nearest declaration before it in the enclosing blocks, ``for`` headers and conditions,
the parameters of the enclosing function (and lambda), the members of the enclosing
class (a member function's body sees every member, declared before or after), then the
declarations before it in the enclosing namespaces and the file.  Declarations inside
``#if``/``#ifdef`` branches and ``extern "C" { }`` count at the level they stand at.

`size_of` evaluates the constant byte counts a patch writes (``sizeof(a)``,
``N * sizeof(double)``) from the file's own macros, enumerators, typedefs and the
x86-64 sizes of the built-in types, so that the size a patch places can be compared with
the size the profile recorded.  What it cannot evaluate (a macro from a header it does
not see, a struct) is None, and the compile check (recommender/patch/compile.py) asks
the compiler instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from numaprof.recommender.patch.source import Source, function_name, walk

#: Node types that hold declarations but are no scope of their own.
_TRANSPARENT = ("preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif",
                "preproc_elifdef", "linkage_specification", "declaration_list")

#: Nodes whose declarations are ordinary identifiers.
_DECLS = ("declaration", "type_definition", "field_declaration", "alias_declaration",
          "function_definition", "using_declaration")

_NAMESPACE_LEVEL = ("translation_unit", "declaration_list")


@dataclass(frozen=True)
class Decl:
    """One declaration of a name, as `lookup` found it.

    scope: ``macro``, ``parameter``, ``local`` (a block, ``for`` header or condition),
    ``member`` (of the enclosing class), ``file`` (file or namespace scope), or
    ``unknown`` (a member function of a class with base classes, or defined in another
    file: the name may be an inherited or unseen member).
    """

    name: str
    scope: str
    node: object | None  # the declaration (a preproc_def for a macro)
    declarator: object | None  # the declarator naming it (None for macros, enumerators)

    @property
    def line(self) -> int:
        return self.node.start_point[0] + 1 if self.node is not None else 0

    @property
    def extern(self) -> bool:
        return _has_storage(self.node, "extern")

    @property
    def typedef(self) -> bool:
        return self.node is not None and (self.node.type in ("type_definition",
                                                             "alias_declaration")
                                          or _has_storage(self.node, "typedef"))


def _has_storage(node, word: str) -> bool:
    if node is None:
        return False
    return any(c.type == "storage_class_specifier" and c.text.decode() == word
               for c in node.children)


# ---------------------------------------------------------------------------- macros

def macro_at(src: Source, name: str, at: int):
    """The ``#define`` of `name` in effect at byte `at` (the last #define or #undef of it
    before `at` decides), or None.  Conditionals are not evaluated: a #define in any
    branch counts, as a reader of the file would have to assume."""
    found = None
    for n in walk(src.root):
        if n.start_byte >= at:
            continue
        if n.type in ("preproc_def", "preproc_function_def"):
            nm = n.child_by_field_name("name")
            if nm is not None and src.text(nm) == name and (
                    found is None or n.start_byte > found[0]):
                found = (n.start_byte, n)
        elif n.type == "preproc_call":
            d, arg = n.child_by_field_name("directive"), n.child_by_field_name("argument")
            if d is not None and src.text(d) == "#undef" and arg is not None and \
                    src.text(arg).strip() == name and (found is None or n.start_byte > found[0]):
                found = (n.start_byte, None)
    return found[1] if found else None


# ------------------------------------------------------------------------ declarators

_WRAPPERS = ("pointer_declarator", "array_declarator", "init_declarator",
             "parenthesized_declarator", "attributed_declarator", "reference_declarator",
             "function_declarator")


def declarator_chain(d):
    """The nodes from declarator ``d`` down to what it declares: every wrapper (pointer,
    array, initialiser, parentheses, attributes, reference, function), then the innermost
    node, whatever it is."""
    while d is not None:
        yield d
        if d.type not in _WRAPPERS:
            return
        d = d.child_by_field_name("declarator") or (d.named_children[0] if d.named_children else None)


def declarator_identifier(d, kinds=("identifier", "field_identifier", "type_identifier")):
    """The identifier a declarator declares (through pointers, arrays, initialisers), or
    None when the innermost node is not one of ``kinds``."""
    chain = list(declarator_chain(d))
    leaf = chain[-1] if chain else None
    return leaf if leaf is not None and leaf.type in kinds else None


def derivation(decl: Decl) -> str:
    """What the declared name itself is: ``array``, ``pointer``, ``reference``,
    ``function`` or ``value`` — the declarator closest to the identifier (``int *a[4]``
    is an array of pointers, ``int (*a)[4]`` a pointer)."""
    d = decl.declarator
    if d is None:
        return "value"
    ident = declarator_identifier(d)
    if ident is None:
        return "value"
    p = ident.parent
    while p is not None and p.type in ("parenthesized_declarator", "attributed_declarator"):
        p = p.parent
    if p is None or p == decl.node:
        return "value"
    return {"array_declarator": "array", "pointer_declarator": "pointer",
            "reference_declarator": "reference", "function_declarator": "function"
            }.get(p.type, "value")


def innermost_array(decl: Decl):
    """The array_declarator that makes the name an array (its first dimension), or None."""
    if derivation(decl) != "array":
        return None
    p = declarator_identifier(decl.declarator).parent
    while p.type in ("parenthesized_declarator", "attributed_declarator"):
        p = p.parent
    return p


def type_node(decl: Decl):
    return decl.node.child_by_field_name("type") if decl.node is not None else None


def _names_in(src: Source, node, name: str):
    """(declarator, declaration) pairs of `name` declared by a declaration-like node,
    including the enumerators of an enum it defines."""
    out = []
    if node.type in ("declaration", "type_definition", "field_declaration",
                     "parameter_declaration", "optional_parameter_declaration"):
        for d in node.children_by_field_name("declarator"):
            ident = declarator_identifier(d)
            if ident is not None and src.text(ident) == name:
                out.append((d, node))
    elif node.type == "function_definition":
        d = node.child_by_field_name("declarator")
        ident = declarator_identifier(d) if d is not None else None
        if ident is not None and src.text(ident) == name:
            out.append((d, node))
    elif node.type == "alias_declaration":
        nm = node.child_by_field_name("name")
        if nm is not None and src.text(nm) == name:
            out.append((None, node))
    typ = node.child_by_field_name("type") if node.type != "enum_specifier" else node
    if typ is not None and typ.type == "enum_specifier":
        body = typ.child_by_field_name("body")
        for e in body.named_children if body is not None else ():
            nm = e.child_by_field_name("name") if e.type == "enumerator" else None
            if nm is not None and src.text(nm) == name:
                out.append((None, e))
    return out


def _declared_before(src: Source, container, name: str, at: int | None):
    """Declarations of `name` among `container`'s children that end before `at` (None:
    all of them), looking through #if branches and extern "C" blocks."""
    found = []
    for c in container.named_children:
        if at is not None and c.end_byte > at:
            if c.type in _TRANSPARENT and c.start_byte < at:
                found += _declared_before(src, c, name, at)
            continue
        if c.type in _TRANSPARENT:
            found += _declared_before(src, c, name, at)
        elif c.type in _DECLS or c.type == "enum_specifier":
            found += _names_in(src, c, name)
        elif c.type == "linkage_specification":
            body = c.child_by_field_name("body")
            if body is not None:
                found += _names_in(src, body, name) if body.type in _DECLS else \
                    _declared_before(src, body, name, at)
    return found


def _parameters(func):
    d = func.child_by_field_name("declarator")
    while d is not None and d.type != "function_declarator":
        d = d.child_by_field_name("declarator")
    params = d.child_by_field_name("parameters") if d is not None else None
    return [c for c in params.named_children if c.type in (
        "parameter_declaration", "optional_parameter_declaration",
        "variadic_parameter_declaration")] if params is not None else []


def function_parameters(func) -> list:
    """The parameter declarations of a function definition (or lambda)."""
    if func.type == "lambda_expression":
        d = func.child_by_field_name("declarator")
        params = d.child_by_field_name("parameters") if d is not None else None
        return [c for c in params.named_children if "parameter" in c.type] \
            if params is not None else []
    return _parameters(func)


def class_of_function(src: Source, func):
    """The class_specifier a member function belongs to: its enclosing class body, or,
    for ``void Grid::run()`` defined outside, the class ``Grid`` defined in this file.
    Returns (class node or None, whether the function is a member at all)."""
    p = func.parent
    while p is not None and p.type in _TRANSPARENT + ("template_declaration",):
        p = p.parent
    if p is not None and p.type == "field_declaration_list":
        return p.parent, True
    d = func.child_by_field_name("declarator")
    while d is not None and d.type != "function_declarator":
        d = d.child_by_field_name("declarator")
    name = d.child_by_field_name("declarator") if d is not None else None
    if name is None or name.type != "qualified_identifier":
        return None, False
    scope = name.child_by_field_name("scope")
    cls = src.text(scope).split("<", 1)[0].rsplit("::", 1)[-1] if scope is not None else ""
    for n in walk(src.root):
        if n.type in ("class_specifier", "struct_specifier") and \
                n.child_by_field_name("body") is not None:
            nm = n.child_by_field_name("name")
            if nm is not None and src.text(nm).split("<", 1)[0] == cls:
                return n, True
    return None, True


def class_member(src: Source, cls, name: str):
    """(declarator, field_declaration) of data member `name` of a class node, or None."""
    body = cls.child_by_field_name("body")
    if body is None:
        return None
    found = _declared_before(src, body, name, None)
    return found[-1] if found else None


def enclosing_function(node):
    n = node
    while n is not None and n.type not in ("function_definition", "lambda_expression"):
        n = n.parent
    return n


def lookup(src: Source, name: str, at: int) -> Decl | None:
    """The declaration `name` (unqualified) refers to at byte offset `at`, or None when
    nothing in the file declares it there (a header's declaration, or an error)."""
    macro = macro_at(src, name, at)
    if macro is not None:
        return Decl(name, "macro", macro, None)
    node = src.root.descendant_for_byte_range(at, at)
    prev = None
    n = node
    while n is not None:
        if n.type in ("function_definition", "lambda_expression"):
            for param in function_parameters(n):
                hit = _names_in(src, param, name)
                if hit:
                    return Decl(name, "parameter", param, hit[-1][0])
            if n.type == "function_definition" and src.lang == "cpp":
                cls, member = class_of_function(src, n)
                if cls is not None:
                    hit = class_member(src, cls, name)
                    if hit is not None:
                        return Decl(name, "member", hit[1], hit[0])
                    if any(c.type == "base_class_clause" for c in cls.children):
                        return Decl(name, "unknown", None, None)
                elif member:
                    return Decl(name, "unknown", None, None)
        elif n.type == "field_declaration_list" and prev is not None:
            hit = _declared_before(src, n, name, None)
            if hit:
                return Decl(name, "member", hit[-1][1], hit[-1][0])
        elif n.type in ("for_statement", "for_range_loop"):
            init = n.child_by_field_name("initializer")
            hit = _names_in(src, init, name) if init is not None and \
                init.type == "declaration" and init.end_byte <= at else []
            d = n.child_by_field_name("declarator") if n.type == "for_range_loop" else None
            ident = declarator_identifier(d) if d is not None else None
            if ident is not None and src.text(ident) == name and d.end_byte <= at:
                hit = [(d, n)]
            if hit:
                return Decl(name, "local", hit[-1][1], hit[-1][0])
        elif n.type not in _TRANSPARENT or n.type == "declaration_list":
            hit = _declared_before(src, n, name, at)
            if hit:
                scope = "file" if n.type in _NAMESPACE_LEVEL else "local"
                return Decl(name, scope, hit[-1][1], hit[-1][0])
        prev = n
        n = n.parent
    return None


def describe(src: Source, decl: Decl) -> str:
    """How a reader would name a declaration: "the parameter `int idx[]` of fill()"."""
    if decl.scope == "macro":
        return f"the macro `{decl.name}` (#define at line {decl.line})"
    if decl.scope == "unknown":
        return f"`{decl.name}`, which may be a member this file does not show"
    node = decl.node
    text = " ".join(src.text(node).split()) if node is not None else decl.name
    if node is not None and node.type in ("declaration", "field_declaration") and \
            decl.declarator is not None:
        typ = node.child_by_field_name("type")
        text = f"{src.text(typ) if typ is not None else ''} {src.text(decl.declarator)}".strip()
        text = " ".join(text.split())
        if "=" in text:
            text = text.split("=", 1)[0].rstrip()
    if len(text) > 80:
        text = text[:77] + "..."
    where = f"line {decl.line}"
    if decl.scope == "parameter":
        func = enclosing_function(node)
        fname = function_name(func) if func is not None and \
            func.type == "function_definition" else None
        return f"the parameter `{text}`" + (f" of {fname}()" if fname else "") + f" ({where})"
    what = {"local": "the local", "member": "the member", "file": "the file-scope"}[decl.scope]
    return f"{what} `{text}` ({where})"


# ----------------------------------------------------------------------------- sizes

#: Bytes of the built-in types on x86-64 Linux (LP64), which is what numaprof profiles.
PRIMITIVE_SIZES = {
    "char": 1, "signed char": 1, "unsigned char": 1, "bool": 1, "_Bool": 1,
    "short": 2, "short int": 2, "unsigned short": 2, "signed short": 2,
    "unsigned short int": 2, "int": 4, "signed": 4, "unsigned": 4, "signed int": 4,
    "unsigned int": 4, "long": 8, "long int": 8, "unsigned long": 8, "signed long": 8,
    "unsigned long int": 8, "long long": 8, "long long int": 8, "unsigned long long": 8,
    "unsigned long long int": 8, "signed long long": 8, "float": 4, "double": 8,
    "long double": 16, "size_t": 8, "ssize_t": 8, "ptrdiff_t": 8, "intptr_t": 8,
    "uintptr_t": 8, "int8_t": 1, "uint8_t": 1, "int16_t": 2, "uint16_t": 2, "int32_t": 4,
    "uint32_t": 4, "int64_t": 8, "uint64_t": 8, "intmax_t": 8, "uintmax_t": 8,
    "wchar_t": 4, "char16_t": 2, "char32_t": 4, "char8_t": 1, "off_t": 8,
}
POINTER_SIZE = 8

_MAX_DEPTH = 16


def _type_size(src: Source, typ, at: int, depth: int) -> int | None:
    if typ is None or depth > _MAX_DEPTH:
        return None
    text = " ".join(src.text(typ).split())
    if typ.type in ("primitive_type", "sized_type_specifier"):
        return PRIMITIVE_SIZES.get(text)
    if typ.type == "qualified_identifier" and text.startswith("std::"):
        return PRIMITIVE_SIZES.get(text[len("std::"):])
    if typ.type == "type_identifier":
        decl = lookup(src, text, at)
        if decl is not None and decl.typedef and decl.node.type == "type_definition":
            return _declared_size(src, decl, depth + 1)
        if decl is None:
            return PRIMITIVE_SIZES.get(text)
        return None
    if typ.type == "type_descriptor":
        inner = typ.child_by_field_name("type")
        abstract = typ.child_by_field_name("declarator")
        if abstract is None:
            return _type_size(src, inner, at, depth + 1)
        if abstract.type == "abstract_pointer_declarator":
            return POINTER_SIZE
        return None
    return None


def _declared_size(src: Source, decl: Decl, depth: int = 0) -> int | None:
    """Bytes of the object (or typedef'd type) a declaration declares, or None."""
    if decl.node is None or depth > _MAX_DEPTH:
        return None
    at = decl.node.start_byte
    d = decl.declarator
    ident = declarator_identifier(d) if d is not None else None
    if ident is None:
        return None
    # Walk from the identifier outwards: each array multiplies, a pointer ends it.
    dims = []
    p = ident.parent
    while p is not None and p != decl.node:
        if p.type == "array_declarator":
            size = p.child_by_field_name("size")
            if size is None:
                return None
            dims.append(size)
        elif p.type in ("pointer_declarator", "function_declarator", "reference_declarator"):
            if p.type != "pointer_declarator":
                return None
            break
        p = p.parent
    if p is not None and p != decl.node and p.type == "pointer_declarator":
        elem = POINTER_SIZE
    else:
        elem = _type_size(src, decl.node.child_by_field_name("type"), at, depth + 1)
    if elem is None:
        return None
    total = elem
    for size in dims:
        v = const_value(src, size, at, depth + 1)
        if v is None or v < 0:
            return None
        total *= v
    return total


def object_size(src: Source, decl: Decl) -> int | None:
    """``sizeof`` of the object a (non-parameter) declaration declares, when the file
    gives every dimension and element size as constants; None otherwise.  An array
    declared without a size but with an initialiser list counts its elements."""
    if decl.scope in ("macro", "unknown", "parameter") or decl.declarator is None:
        return None
    size = _declared_size(src, decl)
    if size is not None:
        return size
    d = decl.declarator
    if d.type == "init_declarator":
        arr = d.child_by_field_name("declarator")
        value = d.child_by_field_name("value")
        if arr is not None and arr.type == "array_declarator" and \
                arr.child_by_field_name("size") is None and value is not None and \
                value.type == "initializer_list" and \
                declarator_identifier(arr) is not None and \
                arr.child_by_field_name("declarator").type == "identifier":
            elem = _type_size(src, decl.node.child_by_field_name("type"), decl.node.start_byte, 1)
            count = len([c for c in value.named_children if c.type != "comment"])
            return elem * count if elem is not None else None
    return None


_BINARY = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
           "/": lambda a, b: int(a / b), "%": lambda a, b: a % b,
           "<<": lambda a, b: a << b, ">>": lambda a, b: a >> b,
           "|": lambda a, b: a | b, "&": lambda a, b: a & b, "^": lambda a, b: a ^ b}


def const_value(src: Source, node, at: int, depth: int = 0,
                home: Source | None = None) -> int | None:
    """The value of a constant integer expression at byte `at`, or None.

    `node` belongs to `src`; its names are looked up in `home` (default `src`): a macro
    body is parsed on its own and evaluated with the names of the file it is in.
    """
    home = home or src
    if node is None or depth > _MAX_DEPTH:
        return None
    t = node.type
    if t == "number_literal":
        text = src.text(node).rstrip("uUlLzZ")
        try:
            return int(text, 8) if len(text) > 1 and text.startswith("0") and \
                text[1:].isdigit() else int(text, 0)
        except ValueError:
            return None
    if t == "parenthesized_expression":
        kids = [c for c in node.named_children if c.type != "comment"]
        return const_value(src, kids[0], at, depth + 1, home) if len(kids) == 1 else None
    if t == "identifier":
        decl = lookup(home, src.text(node), at)
        if decl is None:
            return None
        if decl.scope == "macro":
            return _macro_value(home, decl.node, depth + 1)
        if decl.node is not None and decl.node.type == "enumerator":
            return _enumerator_value(home, decl.node, depth + 1)
        return None
    if t == "binary_expression":
        a = const_value(src, node.child_by_field_name("left"), at, depth + 1, home)
        b = const_value(src, node.child_by_field_name("right"), at, depth + 1, home)
        op = _BINARY.get(src.text(node.child_by_field_name("operator")))
        if a is None or b is None or op is None:
            return None
        try:
            return op(a, b)
        except (ZeroDivisionError, ValueError):
            return None
    if t == "unary_expression":
        v = const_value(src, node.child_by_field_name("argument"), at, depth + 1, home)
        op = src.text(node.child_by_field_name("operator"))
        return None if v is None else {"-": -v, "+": v, "~": ~v}.get(op)
    if t == "cast_expression":
        return const_value(src, node.child_by_field_name("value"), at, depth + 1, home)
    if t == "sizeof_expression":
        typ = node.child_by_field_name("type")
        if typ is not None:
            if src is not home:  # a type in a macro body: built-in types only
                inner = typ.child_by_field_name("type")
                if inner is None or typ.child_by_field_name("declarator") is not None:
                    return None
                return PRIMITIVE_SIZES.get(" ".join(src.text(inner).split()))
            return _type_size(src, typ, at, depth + 1)
        value = _unparen(node.child_by_field_name("value"))
        if value is not None and value.type == "identifier":
            decl = lookup(home, src.text(value), at)
            return object_size(home, decl) if decl is not None else None
        if value is not None and (value.type == "subscript_expression" or (
                value.type == "pointer_expression" and src.text(value).startswith("*"))):
            base = _unparen(value.child_by_field_name("argument"))
            if base is not None and base.type == "identifier":
                decl = lookup(home, src.text(base), at)
                return element_size(home, decl) if decl is not None else None
        return None
    return None


def element_size(src: Source, decl: Decl) -> int | None:
    """``sizeof(*p)`` / ``sizeof(p[0])`` for a declared pointer or array ``p``."""
    if decl.scope in ("macro", "unknown") or decl.declarator is None:
        return None
    ident = declarator_identifier(decl.declarator)
    if ident is None:
        return None
    p = ident.parent
    while p is not None and p.type in ("parenthesized_declarator", "attributed_declarator"):
        p = p.parent
    if p is None or p.type not in ("pointer_declarator", "array_declarator"):
        return None
    outer = p.parent
    while outer is not None and outer != decl.node and outer.type in (
            "parenthesized_declarator", "attributed_declarator", "init_declarator"):
        outer = outer.parent
    if outer is not None and outer != decl.node:
        if outer.type == "pointer_declarator":
            return POINTER_SIZE
        return None  # an array of arrays: not evaluated here
    return _type_size(src, decl.node.child_by_field_name("type"), decl.node.start_byte, 1)


def _unparen(node):
    while node is not None and node.type == "parenthesized_expression" and \
            len(node.named_children) == 1:
        node = node.named_children[0]
    return node


def _macro_value(src: Source, define, depth: int) -> int | None:
    if define is None or define.type != "preproc_def":
        return None
    value = define.child_by_field_name("value")
    if value is None or depth > _MAX_DEPTH:
        return None
    body = Source(src.path, f"long long numaprof_m_ = ({src.text(value).strip()});\n".encode(),
                  src.lang)
    if body.root.has_error or not body.root.named_children:
        return None
    init = body.root.named_children[0].child_by_field_name("declarator")
    expr = init.child_by_field_name("value") if init is not None else None
    return const_value(body, expr, define.start_byte, depth + 1, home=src)


def _enumerator_value(src: Source, enumerator, depth: int) -> int | None:
    body = enumerator.parent
    value = 0
    for e in body.named_children:
        if e.type != "enumerator":
            continue
        v = e.child_by_field_name("value")
        if v is not None:
            got = const_value(src, v, e.start_byte, depth + 1)
            if got is None:
                return None
            value = got
        if e == enumerator:
            return value
        value += 1
    return None
