"""The user's sources as the patch makers see them: one file parsed with tree-sitter
(C, C++ or free-form Fortran), and the tree queries they share."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

from numaprof.analyzer.profile_io import read_bytes
from numaprof.analyzer.sourcelang import fortran_free_form, parser, source_language
from numaprof.errors import ProfileError
from numaprof.recommender.patch.edits import Refusal

#: A source file larger than this is not parsed for a patch.
SOURCE_LIMIT = 64 << 20

#: Languages patched by the C code path (tree-sitter-cpp's grammar extends tree-sitter-c's).
C_FAMILY = ("c", "cpp")


def language(path: str) -> str | None:
    """The language a file is patched as: ``c``, ``cpp``, ``fortran`` (free-form only:
    the loop rules do not read fixed-form source), else None."""
    lang = source_language(path)
    if lang == "fortran" and not fortran_free_form(path):
        return None
    return lang


#: ``new T*[n]``, an array of pointers (``new double*[nrow]``): tree-sitter-cpp 0.23 reads
#: its ``[n]`` as a lambda capture and the next statement as part of the expression, so the
#: whole function around it had an ERROR (tree-sitter/tree-sitter-cpp issue 289, open).
_NEW_POINTER_ARRAY = re.compile(rb"\bnew\b[\w\s:<>,]*?(\*+)\s*\[")


class Source:
    """One parsed file: bytes, tree, newline convention.

    A C++ file is parsed from a copy with the ``*`` of each ``new T*[n]`` blanked (same
    offsets, so edits still apply to the file as it is): the tree is right everywhere but
    in the element type of those expressions, and a patch on such a line is refused
    (``masked_rows``, parse_refusal)."""

    def __init__(self, path: str, data: bytes, lang: str):
        self.path = path
        self.data = data
        self.lang = lang
        self.masked_rows: set[int] = set()
        parsed = data
        if lang == "cpp" and b"new" in data:
            stars = [m.span(1) for m in _NEW_POINTER_ARRAY.finditer(data)]
            if stars:
                buf = bytearray(data)
                for a, b in stars:
                    buf[a:b] = b" " * (b - a)
                    self.masked_rows.add(data.count(b"\n", 0, a))
                parsed = bytes(buf)
        self.tree = parser(lang).parse(parsed)
        self.root = self.tree.root_node
        self.nl = "\r\n" if b"\r\n" in data else "\n"

    def text(self, node) -> str:
        return self.data[node.start_byte:node.end_byte].decode("utf-8", "surrogateescape")

    def line_start(self, offset: int) -> int:
        return self.data.rfind(b"\n", 0, offset) + 1

    def line_end(self, offset: int) -> int:
        """Offset just past the newline ending the line that contains `offset`."""
        i = self.data.find(b"\n", offset)
        return len(self.data) if i < 0 else i + 1

    def indent(self, node) -> str:
        start = self.line_start(node.start_byte)
        prefix = self.data[start:node.start_byte]
        return prefix.decode("utf-8", "surrogateescape") if not prefix.strip() else ""

    def starts_line(self, node) -> bool:
        return not self.data[self.line_start(node.start_byte):node.start_byte].strip()


def load(path: str, want: tuple[str, ...] | None = None) -> Source | Refusal:
    lang = language(path)
    if lang is None:
        return Refusal(path, 0, f"{os.path.basename(path)} is neither C, C++ nor free-form "
                                "Fortran; numaprof only patches those")
    if want is not None and lang not in want:
        return Refusal(path, 0, f"placement calls are only inserted into C and C++ sources, "
                                f"not into {os.path.basename(path)}")
    try:
        data = read_bytes(path, SOURCE_LIMIT, follow=True)
    except FileNotFoundError as e:
        return Refusal(path, 0, f"cannot read {path}: {e.strerror or e}")
    except ProfileError as e:  # not a regular file (a FIFO would block), too large, ...
        return Refusal(path, 0, str(e))
    src = Source(path, data, lang)
    if src.root.has_error and path.lower().endswith((".h", ".inc")):
        # `.h` is shared by C and C++: a header only the C++ grammar parses is C++.
        cxx = Source(path, data, "cpp")
        if not cxx.root.has_error:
            return cxx
    return src


def parse_refusal(src: Source, node, line: int) -> Refusal | None:
    """Refuse when the code around the patch did not parse cleanly.

    Only the function (or, outside functions, the file) being patched must parse:
    an unknown macro elsewhere in the file does not stop a patch here.
    """
    n = node if node is not None else src.root
    if line - 1 in src.masked_rows:
        return Refusal(src.path, line, f"{os.path.basename(src.path)} line {line} allocates an "
                                       "array of pointers (new T*[n]), which the C++ parser "
                                       "does not read; not patching it")
    if not n.has_error:
        return None
    return Refusal(src.path, line, f"{os.path.basename(src.path)} does not parse cleanly "
                                   f"around line {line} (macros or extensions the parser "
                                   "does not know); not patching it")


def function_at(src: Source, row: int):
    return next((f for f in walk(src.root)
                 if f.type == "function_definition" and contains_row(f, row)), None)


def walk(node) -> Iterator:
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def contains_row(node, row: int) -> bool:
    return node.start_point[0] <= row <= node.end_point[0]


def subscript_index(node):
    """The index of ``a[i]``: C has an `index` field, C++ a `subscript_argument_list`."""
    idx = node.child_by_field_name("index")
    if idx is not None:
        return idx
    args = node.child_by_field_name("indices")
    items = [c for c in args.named_children if c.type != "comment"] if args is not None else []
    return items[0] if len(items) == 1 else None


def strip_parens(node):
    while node is not None and node.type in ("parenthesized_expression", "cast_expression"):
        node = node.child_by_field_name("value") if node.type == "cast_expression" \
            else node.named_children[0] if node.named_children else None
    return node


def block_statement(node):
    """The statement holding `node` that is a direct child of a block, or None."""
    n = node
    while n is not None:
        if n.parent is not None and n.parent.type in ("compound_statement", "case_statement") \
                and n.type not in ("comment", "{", "}"):
            return n
        if n.type == "function_definition":
            return None
        n = n.parent
    return None


def own_statement(node):
    """The innermost statement (or declaration) containing `node`."""
    n = node.parent
    while n is not None and not (n.type.endswith("_statement") or n.type == "declaration"):
        n = n.parent
    return n


def declarator_name(node) -> str | None:
    while node is not None and node.type not in ("identifier",):
        if node.type in ("pointer_declarator", "array_declarator", "init_declarator",
                         "parenthesized_declarator", "attributed_declarator",
                         "reference_declarator"):
            node = node.child_by_field_name("declarator") or (
                node.named_children[0] if node.named_children else None)
        else:
            return None
    return node.text.decode() if node is not None else None


def has_side_effects(node) -> bool:
    return any(n.type in ("assignment_expression", "update_expression", "call_expression",
                          "comma_expression", "new_expression", "delete_expression")
               for n in walk(node))


def is_cxx_cast(src: Source, node) -> bool:
    """``static_cast<T>(x)`` / ``reinterpret_cast<T>(x)``: a cast, not a call."""
    if node is None or node.type != "call_expression" or src.lang != "cpp":
        return False
    fn = node.child_by_field_name("function")
    name = fn.child_by_field_name("name") if fn is not None and \
        fn.type == "template_function" else None
    return name is not None and src.text(name) in ("static_cast", "reinterpret_cast",
                                                   "const_cast")


def enclosing(node, type_: str):
    n = node.parent
    while n is not None and n.type != type_:
        n = n.parent
    return n


#: Built-in type names and the standard integer typedefs (also as ``std::size_t``).
PLAIN_TYPEDEFS = frozenset({
    "size_t", "ssize_t", "ptrdiff_t", "intptr_t", "uintptr_t", "int8_t", "int16_t", "int32_t",
    "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t", "intmax_t", "uintmax_t",
    "off_t", "wchar_t", "char16_t", "char32_t", "char8_t",
})


def cxx_plain_type(src: Source, typ) -> bool:
    """Whether a type node names a built-in arithmetic type: no constructor, no operators."""
    if typ is None:
        return False
    if typ.type in ("primitive_type", "sized_type_specifier"):
        return True
    if typ.type == "type_descriptor":
        inner = typ.child_by_field_name("type")
        abstract = typ.child_by_field_name("declarator")
        return abstract is None and cxx_plain_type(src, inner)
    if typ.type == "type_identifier":
        return src.text(typ) in PLAIN_TYPEDEFS
    if typ.type == "qualified_identifier":
        scope, name = typ.child_by_field_name("scope"), typ.child_by_field_name("name")
        return scope is not None and src.text(scope) == "std" and name is not None and \
            name.type == "type_identifier" and src.text(name) in PLAIN_TYPEDEFS
    return False


def cxx_vector_element(src: Source, typ):
    """The element type node of ``std::vector<T>`` (or ``vector<T>``), else None."""
    if typ is None:
        return None
    if typ.type == "qualified_identifier":
        scope = typ.child_by_field_name("scope")
        if scope is None or src.text(scope) != "std":
            return None
        typ = typ.child_by_field_name("name")
    if typ is None or typ.type != "template_type":
        return None
    name = typ.child_by_field_name("name")
    args = typ.child_by_field_name("arguments")
    if name is None or src.text(name) != "vector" or args is None:
        return None
    items = [a for a in args.named_children if a.type != "comment"]
    return items[0] if items else None


def function_name(func) -> str | None:
    d = func.child_by_field_name("declarator")
    while d is not None and d.type != "function_declarator":
        d = d.child_by_field_name("declarator")
    if d is None:
        return None
    return declarator_name(d.child_by_field_name("declarator"))


# ------------------------------------------------------------------ OpenMP directives

#: The words of OpenMP directive names (what follows is clauses).
_OMP_DIRECTIVE_WORDS = frozenset({
    "parallel", "for", "do", "simd", "atomic", "update", "read", "write", "capture",
    "compare", "critical", "single", "master", "masked", "task", "taskloop", "taskgroup",
    "sections", "section", "target", "teams", "distribute", "loop", "ordered", "barrier",
    "flush", "taskwait", "taskyield", "threadprivate", "declare", "scope", "workshare",
    "data", "enter", "exit"})
#: Directives that govern no statement.
OMP_STANDALONE = ("barrier", "flush", "taskwait", "taskyield", "threadprivate", "declare")


def omp_words(src: Source, node) -> list[str] | None:
    """The directive words of ``#pragma omp ...`` (``["parallel", "for"]``), else None."""
    if node is None or node.type != "preproc_call":
        return None
    d = node.child_by_field_name("directive")
    arg = node.child_by_field_name("argument")
    if d is None or arg is None or src.text(d) != "#pragma":
        return None
    words = re.findall(r"[A-Za-z_]+|[(,]", pragma_clauses(src.text(arg)))
    if words[:1] != ["omp"]:
        return None
    out = []
    for w in words[1:]:
        if w not in _OMP_DIRECTIVE_WORDS:
            break
        out.append(w)
    return out


def pragma_clauses(arg: str) -> str:
    """The pragma's text without a trailing comment."""
    for mark in ("//", "/*"):
        i = arg.find(mark)
        if i >= 0:
            arg = arg[:i]
    return arg.rstrip()


def pragma_before(node):
    prev = node.prev_named_sibling
    while prev is not None and prev.type == "comment":
        prev = prev.prev_named_sibling
    return prev if prev is not None and prev.type == "preproc_call" else None
