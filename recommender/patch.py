"""Source patches that apply a placement recommendation (SPEC §4.3).

Three kinds, all found from DWARF line information and written against the user's
sources with a real parser (tree-sitter), never with regular expressions:

- `place_after_allocation`: ``numaprof_place(ptr, bytes, NUMAPROF_<POLICY>);`` right
  after a heap allocation, plus ``#include "numaprof_place.h"`` (weighted_interleave:
  ``{ static const int nmp_nodes[] = {...}; static const unsigned nmp_weights[] = {...};
  numaprof_place_weighted(ptr, bytes, nmp_nodes, nmp_weights, M); }``, the suggestion's
  nodes and weights);
- `place_static`: the same call for a static array, before its first touch;
- `parallelize_first_touch`: ``#pragma omp parallel for schedule(static)`` (Fortran:
  ``!$omp parallel do`` ... ``!$omp end parallel do``) on the serial loop that first
  touched an array, only when the loop is provably safe to run in parallel.  Otherwise a
  `Refusal` says why in plain words and the recommender falls back to bind_block.

Every patch is a set of pure insertions into the text the profile saw, so several
patches to one file combine without conflict (`merge_patches`); `apply.apply` writes
them.  Functions return a `Refusal` instead of raising when a patch cannot be made: not
being able to patch is an answer, not an error.
"""

from __future__ import annotations

import difflib
import hashlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache

from numaprof.recommender import emit

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
C_PRAGMA = "#pragma omp parallel for schedule(static)"
F_DIRECTIVE = "!$omp parallel do schedule(static)"
F_END_DIRECTIVE = "!$omp end parallel do"

#: Functions a parallelised C loop may call: pure, no side effects, no shared state.
PURE_C_FUNCTIONS = frozenset(
    name + suffix
    for name in ("sqrt", "sin", "cos", "exp", "log", "fabs", "pow", "floor", "ceil")
    for suffix in ("", "f", "l")
)

#: Fortran elemental intrinsics a parallelised loop may call (pure by the standard).
PURE_F_FUNCTIONS = frozenset({
    "sqrt", "sin", "cos", "tan", "exp", "log", "log10", "abs", "floor", "ceiling", "mod",
    "modulo", "min", "max", "dble", "real", "int", "nint", "float", "sign", "dsqrt",
    "dsin", "dcos", "dexp", "dlog", "dabs", "cmplx", "aimag", "conjg", "iand", "ior",
    "ieor", "ishft", "atan", "atan2", "asin", "acos", "sinh", "cosh", "tanh",
    "size", "lbound", "ubound", "len", "huge", "tiny", "epsilon", "kind",
})

# Allocators: name -> index of the byte-count argument (calloc multiplies two).
_ALLOCATORS = {"malloc": 0, "calloc": None, "realloc": 1, "aligned_alloc": 1,
               "memalign": 1, "valloc": 0, "pvalloc": 0, "posix_memalign": 2}

_C_SUFFIXES = (".c", ".h")
_CXX_SUFFIXES = (".cpp", ".cc", ".cxx", ".c++", ".cp", ".hpp", ".hh", ".hxx", ".h++", ".ipp",
                 ".tpp")
_CXX_CASED_SUFFIXES = (".C", ".H")  # upper case is C++ by gcc's convention
_F_SUFFIXES = (".f90", ".f95", ".f03", ".f08", ".f18")
#: Languages patched by the C code path (tree-sitter-cpp's grammar extends tree-sitter-c's).
C_FAMILY = ("c", "cpp")


@dataclass(frozen=True)
class Edit:
    """Insert `text` at byte `offset` of the original file.

    `attach` edits must end up immediately before the code at `offset` (an OpenMP
    directive belongs to the statement that follows it), so they go after any other
    insertion at the same offset.
    """

    offset: int
    text: str
    attach: bool = False


@dataclass(frozen=True)
class Patch:
    """A change to one source file, as insertions into the text the profile saw."""

    path: str  # absolute
    original_hash: str  # sha256 of the original bytes
    diff: str  # unified diff, `--- a/<rel>` / `+++ b/<rel>` relative to `root`
    new_text: str
    edits: tuple[Edit, ...]
    root: str
    description: str = ""


@dataclass(frozen=True)
class Refusal:
    """Why a patch was not made; `fallback` is the policy to recommend instead."""

    path: str
    line: int
    reason: str
    fallback: str = "bind_block"

    def __str__(self) -> str:
        return self.reason


def _place_text(ptr: str, size: str, const: str, weighted) -> str:
    """The placement statement: ``numaprof_place(ptr, size, CONST);``, or for
    weighted_interleave with `weighted` = (node ids, weights) the block calling
    ``numaprof_place_weighted`` with them (emit.weighted_place_statement)."""
    if weighted is not None and const == POLICY_CONSTANTS["weighted_interleave"]:
        nodes, weights = weighted
        return emit.weighted_place_statement(ptr, size, nodes, weights)
    return f"numaprof_place({ptr}, {size}, {const});"


def _with(const: str, weighted) -> str:
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


# ---------------------------------------------------------------------------- parsing

@lru_cache(maxsize=3)
def _parser(lang: str):
    import tree_sitter

    if lang == "c":
        import tree_sitter_c as grammar
    elif lang == "cpp":
        import tree_sitter_cpp as grammar
    else:
        import tree_sitter_fortran as grammar
    return tree_sitter.Parser(tree_sitter.Language(grammar.language()))


def _language(path: str) -> str | None:
    low = path.lower()
    if path.endswith(_CXX_CASED_SUFFIXES) or low.endswith(_CXX_SUFFIXES):
        return "cpp"
    if low.endswith(_C_SUFFIXES):
        return "c"
    if low.endswith(_F_SUFFIXES):
        return "fortran"
    return None


class _Source:
    """One parsed file: bytes, tree, newline convention."""

    def __init__(self, path: str, data: bytes, lang: str):
        self.path = path
        self.data = data
        self.lang = lang
        self.tree = _parser(lang).parse(data)
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


def _load(path: str, want: tuple[str, ...] | None = None) -> _Source | Refusal:
    lang = _language(path)
    if lang is None:
        return Refusal(path, 0, f"{os.path.basename(path)} is neither C, C++ nor free-form "
                                "Fortran; numaprof only patches those")
    if want is not None and lang not in want:
        return Refusal(path, 0, f"placement calls are only inserted into C and C++ sources, "
                                f"not into {os.path.basename(path)}")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        return Refusal(path, 0, f"cannot read {path}: {e.strerror or e}")
    src = _Source(path, data, lang)
    if src.root.has_error and path.lower().endswith((".h", ".inc")):
        # `.h` is shared by C and C++: a header only the C++ grammar parses is C++.
        cxx = _Source(path, data, "cpp")
        if not cxx.root.has_error:
            return cxx
    return src


def _parse_refusal(src: _Source, node, line: int) -> Refusal | None:
    """Refuse when the code around the patch did not parse cleanly.

    Only the function (or, outside functions, the file) being patched must parse:
    an unknown macro elsewhere in the file does not stop a patch here.
    """
    n = node if node is not None else src.root
    if not n.has_error:
        return None
    return Refusal(src.path, line, f"{os.path.basename(src.path)} does not parse cleanly "
                                   f"around line {line} (macros or extensions the parser "
                                   "does not know); not patching it")


def _function_at(src: _Source, row: int):
    return next((f for f in _walk(src.root)
                 if f.type == "function_definition" and _contains_row(f, row)), None)


def _walk(node) -> Iterator:
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def _contains_row(node, row: int) -> bool:
    return node.start_point[0] <= row <= node.end_point[0]


def _subscript_index(node):
    """The index of ``a[i]``: C has an `index` field, C++ a `subscript_argument_list`."""
    idx = node.child_by_field_name("index")
    if idx is not None:
        return idx
    args = node.child_by_field_name("indices")
    items = [c for c in args.named_children if c.type != "comment"] if args is not None else []
    return items[0] if len(items) == 1 else None


def _strip_parens(node):
    while node is not None and node.type in ("parenthesized_expression", "cast_expression"):
        node = node.child_by_field_name("value") if node.type == "cast_expression" \
            else node.named_children[0] if node.named_children else None
    return node


# ----------------------------------------------------------------------------- diffs

def _relpath(path: str, root: str) -> str:
    rel = os.path.relpath(path, root)
    if rel.startswith(".."):
        rel = path.lstrip("/")
    return rel.replace(os.sep, "/")


def unified_diff(old: str, new: str, path: str, root: str) -> str:
    """A unified diff of one file with ``--- a/<rel>`` / ``+++ b/<rel>`` headers."""
    rel = _relpath(path, root)
    out = []
    for line in difflib.unified_diff(old.splitlines(keepends=True),
                                     new.splitlines(keepends=True),
                                     fromfile=f"a/{rel}", tofile=f"b/{rel}"):
        if not line.endswith("\n"):
            # The last line had no newline: say so the way diff(1) and patch(1) expect.
            line += "\n\\ No newline at end of file\n"
        out.append(line)
    return "".join(out)


def _apply_edits(data: bytes, edits: Iterable[Edit]) -> str:
    ordered = sorted(set(edits), key=lambda e: (e.offset, e.attach))
    parts, pos = [], 0
    for e in ordered:
        parts.append(data[pos:e.offset])
        parts.append(e.text.encode("utf-8", "surrogateescape"))
        pos = e.offset
    parts.append(data[pos:])
    return b"".join(parts).decode("utf-8", "surrogateescape")


def _make_patch(path: str, data: bytes, edits: Iterable[Edit], root: str | None,
                description: str) -> Patch:
    root = os.path.abspath(root or os.getcwd())
    edits = tuple(sorted(set(edits), key=lambda e: (e.offset, e.attach)))
    old = data.decode("utf-8", "surrogateescape")
    new = _apply_edits(data, edits)
    return Patch(path=path, original_hash=hashlib.sha256(data).hexdigest(),
                 diff=unified_diff(old, new, path, root), new_text=new, edits=edits,
                 root=root, description=description)


def merge_patches(patches: Iterable[Patch], root: str | None = None) -> list[Patch]:
    """Combine patches to the same file into one per file (insertions are unioned).

    All patches of one file must have been made from the same text (same hash);
    ValueError otherwise.  Identical insertions (the #include of several placements)
    appear once.
    """
    by_path: dict[str, list[Patch]] = {}
    for p in patches:
        # Two names of one file (a symbolic link) must become one patch, or the second
        # write would undo the first.
        by_path.setdefault(os.path.realpath(p.path), []).append(p)
    merged = []
    for path, group in by_path.items():
        hashes = {p.original_hash for p in group}
        if len(hashes) > 1:
            raise ValueError(f"patches to {path} were made from different versions of it")
        with open(path, "rb") as f:
            data = f.read()
        if hashlib.sha256(data).hexdigest() != group[0].original_hash:
            raise ValueError(f"{path} changed since its patches were made")
        edits = [e for p in group for e in p.edits]
        desc = "; ".join(dict.fromkeys(p.description for p in group if p.description))
        merged.append(_make_patch(path, data, edits, root or group[0].root, desc))
    return merged


# --------------------------------------------------------------- C: placement calls

def _include_edit(src: _Source) -> Edit | None:
    """Insert ``#include "numaprof_place.h"`` after the last top-level #include, once."""
    for n in _walk(src.root):
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


def _block_statement(node):
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


def _own_statement(node):
    """The innermost statement (or declaration) containing `node`."""
    n = node.parent
    while n is not None and not (n.type.endswith("_statement") or n.type == "declaration"):
        n = n.parent
    return n


def _declarator_name(node) -> str | None:
    while node is not None and node.type not in ("identifier",):
        if node.type in ("pointer_declarator", "array_declarator", "init_declarator",
                         "parenthesized_declarator", "attributed_declarator",
                         "reference_declarator"):
            node = node.child_by_field_name("declarator") or (
                node.named_children[0] if node.named_children else None)
        else:
            return None
    return node.text.decode() if node is not None else None


def _allocation_target(src: _Source, call) -> str | None:
    """The variable an allocator call's (or new-expression's) result goes to (lvalue text)."""
    name = _allocator_name(src, call)
    if name == "posix_memalign":
        args = call.child_by_field_name("arguments").named_children
        if not args:
            return None
        first = _strip_parens(args[0])
        if first is not None and first.type == "pointer_expression" and \
                src.text(first).startswith("&"):
            return src.text(first.child_by_field_name("argument"))
        return None
    n = call
    while n.parent is not None:
        if n.parent.type in ("cast_expression", "parenthesized_expression"):
            n = n.parent
        elif n.parent.type == "argument_list" and _is_cxx_cast(src, n.parent.parent) and \
                len(n.parent.named_children) == 1:
            n = n.parent.parent  # static_cast<double *>(malloc(...))
        else:
            break
    parent = n.parent
    if parent is None:
        return None
    if parent.type == "init_declarator" and parent.child_by_field_name("value") == n:
        return _declarator_name(parent.child_by_field_name("declarator"))
    if parent.type == "assignment_expression" and parent.child_by_field_name("right") == n \
            and src.text(parent.child_by_field_name("operator")) == "=":
        return src.text(parent.child_by_field_name("left"))
    return None


def _has_side_effects(node) -> bool:
    return any(n.type in ("assignment_expression", "update_expression", "call_expression",
                          "comma_expression", "new_expression", "delete_expression")
               for n in _walk(node))


def _allocator_name(src: _Source, node) -> str | None:
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


def _is_cxx_cast(src: _Source, node) -> bool:
    """``static_cast<T>(x)`` / ``reinterpret_cast<T>(x)``: a cast, not a call."""
    if node is None or node.type != "call_expression" or src.lang != "cpp":
        return False
    fn = node.child_by_field_name("function")
    name = fn.child_by_field_name("name") if fn is not None and \
        fn.type == "template_function" else None
    return name is not None and src.text(name) in ("static_cast", "reinterpret_cast",
                                                   "const_cast")


def _enclosing(node, type_: str):
    n = node.parent
    while n is not None and n.type != type_:
        n = n.parent
    return n


def _new_size(src: _Source, new, target: str | None, where: str) -> str:
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
    if _has_side_effects(length):
        return (f"!the length of the new[] at {where} has side effects; it cannot be "
                "evaluated twice")
    # sizeof(*p) is the element size whatever T is (also for new T[n][4]).
    return f"{_operand(src, length)} * sizeof(*{target})"


def _size_expression(src: _Source, call) -> str | None:
    name = _allocator_name(src, call)
    args = call.child_by_field_name("arguments").named_children
    args = [a for a in args if a.type != "comment"]
    if any(_has_side_effects(a) for a in args):
        return None
    if name == "calloc":
        if len(args) != 2:
            return None
        return " * ".join(_operand(src, a) for a in args)
    idx = _ALLOCATORS[name]
    return src.text(args[idx]) if idx < len(args) else None


def _operand(src: _Source, node) -> str:
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
    src = _load(path, want=C_FAMILY)
    if isinstance(src, Refusal):
        return Refusal(path, line, src.reason)
    row = line - 1
    bad = _parse_refusal(src, _function_at(src, row), line)
    if bad is not None:
        return bad
    candidates = []
    in_initialiser = False
    for n in _walk(src.root):
        if _allocator_name(src, n) is None and not (
                n.type == "new_expression" and src.lang == "cpp"):
            continue
        own = _own_statement(n)
        if own is None or not _contains_row(own, row):
            if _contains_row(n, row) and _enclosing(n, "field_initializer") is not None:
                in_initialiser = True
            continue
        stmt = _block_statement(n)
        if stmt != own:
            holder = own.parent.type.replace("_statement", "").replace("_clause", "")
            return Refusal(path, line, f"the allocation at {os.path.basename(path)}:{line} "
                                       f"is the body of an `{holder}` without braces",
                           "numactl")
        candidates.append((n, stmt, _allocation_target(src, n)))
    where = f"{os.path.basename(path)}:{line}"
    if not candidates and src.lang == "cpp":
        vec = _cxx_vector_construction(src, row, var)
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
            and src.text(_strip_parens(n.named_children[0]) or n) == target
            for n in _walk(func)):
        # An allocation wrapper: a placement here would hit every caller's arrays.
        fname = _declarator_name_of_function(func)
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
        elif not _cxx_plain_type(src, call.child_by_field_name("type")):
            touched = (" (if the element constructors write the memory, the call moves the "
                       "pages they touched)")
        size = size_expr or size
    else:
        size = size_expr or _size_expression(src, call)
    if size is None:
        return Refusal(path, line, f"the size argument of the allocation at {where} has "
                                   "side effects; it cannot be evaluated twice", "numactl")
    text = _place_text(target, size, const, weighted)
    edits = [_edit_after(src, stmt, text)]
    inc = _include_edit(src)
    if inc is not None:
        edits.append(inc)
    return _make_patch(path, src.data, edits, root,
                       f"place `{target}` with {_with(const, weighted)} after its allocation "
                       f"at {where}{touched}")


def _edit_after(src: _Source, stmt, text: str) -> Edit:
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


# --------------------------------------------------------------- C++: std::vector

#: Built-in type names and the standard integer typedefs (also as ``std::size_t``).
_PLAIN_TYPEDEFS = frozenset({
    "size_t", "ssize_t", "ptrdiff_t", "intptr_t", "uintptr_t", "int8_t", "int16_t", "int32_t",
    "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t", "intmax_t", "uintmax_t",
    "off_t", "wchar_t", "char16_t", "char32_t", "char8_t",
})


def _cxx_plain_type(src: _Source, typ) -> bool:
    """Whether a type node names a built-in arithmetic type: no constructor, no operators."""
    if typ is None:
        return False
    if typ.type in ("primitive_type", "sized_type_specifier"):
        return True
    if typ.type == "type_descriptor":
        inner = typ.child_by_field_name("type")
        abstract = typ.child_by_field_name("declarator")
        return abstract is None and _cxx_plain_type(src, inner)
    if typ.type == "type_identifier":
        return src.text(typ) in _PLAIN_TYPEDEFS
    if typ.type == "qualified_identifier":
        scope, name = typ.child_by_field_name("scope"), typ.child_by_field_name("name")
        return scope is not None and src.text(scope) == "std" and name is not None and \
            name.type == "type_identifier" and src.text(name) in _PLAIN_TYPEDEFS
    return False


def _cxx_vector_element(src: _Source, typ):
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


def _cxx_vector_construction(src: _Source, row: int, var: str | None):
    """The block-level declaration that constructs a `std::vector` with elements on `row`.

    Returns (statement, name, element type node), a Refusal, or None when there is none.
    ``std::vector<T> v(n)`` parses as a function declarator (C++'s most vexing parse);
    ``v(n, x)``, ``v{...}`` and ``v = std::vector<T>(n)`` are constructions too.
    """
    found = []
    for n in _walk(src.root):
        if n.type != "declaration" or not _contains_row(n, row):
            continue
        elem = _cxx_vector_element(src, n.child_by_field_name("type"))
        if elem is None:
            continue
        for d in n.children_by_field_name("declarator"):
            inner = d.child_by_field_name("declarator")
            if d.type == "function_declarator" or (
                    d.type == "init_declarator" and inner is not None and
                    inner.type == "identifier"):
                name = _declarator_name(inner if d.type == "function_declarator" else d)
                if name and (var is None or name == var):
                    found.append((n, name, elem))
    if len(found) != 1:
        return None
    stmt, name, elem = found[0]
    where = f"{os.path.basename(src.path)}:{row + 1}"
    if src.text(elem).strip() == "bool":
        return Refusal(src.path, row + 1, f"`{name}` at {where} is a std::vector<bool>, which "
                                          "packs bits and has no data() to place", "numactl")
    if _block_statement(stmt) != stmt:
        return Refusal(src.path, row + 1, f"the std::vector `{name}` at {where} is not "
                                          "constructed in a block of a function", "numactl")
    return stmt, name, elem


def _place_vector(src: _Source, found, const: str, where: str, root,
                  weighted=None) -> Patch | Refusal:
    if isinstance(found, Refusal):
        return found
    stmt, name, _elem = found
    text = _place_text(f"{name}.data()", f"{name}.size() * sizeof(*{name}.data())", const,
                       weighted)
    edits = [_edit_after(src, stmt, text)]
    inc = _include_edit(src)
    if inc is not None:
        edits.append(inc)
    return _make_patch(src.path, src.data, edits, root,
                       f"place std::vector `{name}` with {_with(const, weighted)} after its "
                       f"construction at "
                       f"{where} (the constructor already wrote the elements: the call "
                       "moves those pages)")


def _file_scope_array(src: _Source, symbol: str):
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
                        _declarator_name(inner) == name:
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
    src = _load(path, want=C_FAMILY)
    line = before_line or 0
    if isinstance(src, Refusal):
        return Refusal(path, line, src.reason)
    found = _file_scope_array(src, symbol)
    name = os.path.basename(path)
    if found is None:
        return Refusal(path, line, f"`{symbol}` is not an array defined at file scope in "
                                   f"{name}", "numactl")
    decl, arr, _ = found
    has_init = any(d.type == "init_declarator" for d in decl.children_by_field_name("declarator"))
    if arr.child_by_field_name("size") is None and not has_init:
        return Refusal(path, line, f"`{symbol}` is declared without a size in {name}; "
                                   "sizeof cannot give its length", "numactl")
    funcs = [n for n in _walk(src.root) if n.type == "function_definition"]
    if before_line is not None:
        func = next((f for f in funcs if _contains_row(f, before_line - 1)), None)
        if func is None:
            return Refusal(path, line, f"line {before_line} of {name} is not inside a "
                                       "function", "numactl")
        body = func.child_by_field_name("body")
        stmt = next((s for s in body.named_children
                     if s.type != "comment" and _contains_row(s, before_line - 1)), None)
        if stmt is None:
            return Refusal(path, line, f"no statement at line {before_line} of {name}",
                           "numactl")
        # A #pragma belongs to the statement after it: insert above the pragmas.
        while stmt.prev_named_sibling is not None and stmt.prev_named_sibling.type == \
                "preproc_call":
            stmt = stmt.prev_named_sibling
    else:
        func = next((f for f in funcs if _declarator_name_of_function(f) == "main"), None)
        if func is None:
            return Refusal(path, line, f"{name} has no main() to place `{symbol}` in",
                           "numactl")
        body = func.child_by_field_name("body")
        stmts = [s for s in body.named_children if s.type != "comment"]
        stmt = next((s for s in stmts if s.type != "declaration"
                     or symbol.rsplit("::", 1)[-1] in {
                         i.text.decode() for i in _walk(s) if i.type == "identifier"}),
                    None)
        if stmt is None:
            return Refusal(path, line, f"main() in {name} has no statement to place "
                                       f"`{symbol}` before", "numactl")
        while stmt.prev_named_sibling is not None and stmt.prev_named_sibling.type == \
                "preproc_call":
            stmt = stmt.prev_named_sibling
    bad = _parse_refusal(src, func, line)
    if bad is not None:
        return bad
    if stmt.start_byte < decl.end_byte:
        return Refusal(path, line, f"`{symbol}` is defined after the place it is first "
                                   f"touched in {name}", "numactl")
    text = _place_text(symbol, f"sizeof({symbol})", const, weighted)
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
    inc = _include_edit(src)
    if inc is not None:
        edits.append(inc)
    where = f"line {before_line}" if before_line else "the start of main()"
    return _make_patch(path, src.data, edits, root,
                       f"place static `{symbol}` with {_with(const, weighted)} before {where} "
                       f"of {name}")


def _declarator_name_of_function(func) -> str | None:
    d = func.child_by_field_name("declarator")
    while d is not None and d.type != "function_declarator":
        d = d.child_by_field_name("declarator")
    if d is None:
        return None
    return _declarator_name(d.child_by_field_name("declarator"))


# ------------------------------------------------------- C: parallel first touch

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


def _c_loop_header(src: _Source, loop) -> tuple[str, bool, object] | str:
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
        if _has_side_effects(init.child_by_field_name("right")):
            return "the loop start has side effects"
    else:
        return "the loop does not start with `i = start`"
    cond = _strip_parens(cond)
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
    for n in _walk(bound):
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


def _c_locals(src: _Source, body) -> dict[str, str]:
    """Variables declared inside the loop body -> ``array`` | ``pointer`` | ``scalar``.

    Local arrays and scalars are private to an iteration; a local pointer is not: it
    points into memory other iterations may share.
    """
    names: dict[str, str] = {}
    for n in _walk(body):
        if n.type == "declaration":
            for d in n.children_by_field_name("declarator"):
                name = _declarator_name(d)
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


def _c_macros(src: _Source) -> dict[str, str | None]:
    """Macros #defined in the file: name -> body text (None for function-like ones)."""
    macros: dict[str, str | None] = {}
    for n in _walk(src.root):
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
    tree = _parser("c").parse(f"long long numaprof_m_ = ({body});\n".encode())
    decl = tree.root_node.named_children[0] if tree.root_node.named_children else None
    if decl is None or tree.root_node.has_error:
        return False
    value = decl.child_by_field_name("declarator").child_by_field_name("value")
    for n in _walk(value):
        if not n.is_named or n.type in _CONSTANT_NODES:
            continue
        if n.type == "identifier" and n.text.decode() in macros and \
                _c_macro_is_constant(n.text.decode(), macros, depth + 1):
            continue
        return False
    return True


def _c_check_loop(src: _Source, loop, func) -> str | None:
    """None when `loop` is provably safe to run with ``omp parallel for``; else the reason."""
    header = _c_loop_header(src, loop)
    if isinstance(header, str):
        return header
    if src.lang == "cpp" and _enclosing(loop, "lambda_expression") is not None:
        return "the loop is inside a lambda, which the check does not follow to its callers"
    macros = _c_macros(src)
    for n in _walk(loop):
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
    for n in _walk(body):
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
            if _is_cxx_cast(src, n) and src.text(fn.child_by_field_name("name")) == \
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
            why = _c_check_write(src, _strip_parens(target), var, local, written)
            if why:
                return why
    for name in written:
        # C++: `grid::field` and a plain `field` may be one array: match the last name.
        last = name.rsplit("::", 1)[-1]
        for n in _walk(loop):
            if n.type != "identifier" or src.text(n) != last:
                continue
            ref = n
            if n.parent.type == "qualified_identifier" and \
                    n.parent.child_by_field_name("name") == n:
                ref = n.parent
            p = ref.parent
            ok = (p.type == "subscript_expression" and p.child_by_field_name("argument") == ref
                  and (idx := _strip_parens(_subscript_index(p))) is not None
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
    """(name, kind) of a C++ declarator; kind: pointer | array | reference | function | value."""
    kind = None
    while d is not None and d.type not in ("identifier", "field_identifier"):
        if d.type in ("pointer_declarator", "array_declarator", "reference_declarator",
                      "function_declarator") and kind is None:
            kind = d.type.replace("_declarator", "")
        if d.type in ("pointer_declarator", "array_declarator", "init_declarator",
                      "parenthesized_declarator", "attributed_declarator",
                      "reference_declarator", "function_declarator"):
            d = d.child_by_field_name("declarator") or (
                d.named_children[0] if d.named_children else None)
        else:
            return None, ""
    return (d.text.decode() if d is not None else None), kind or "value"


def _cxx_type_class(src: _Source, typ) -> str:
    """``plain`` (built-in arithmetic), ``vector`` (std::vector of those, not bool), or
    the type's text: the classes whose operators and constructors are known to be pure."""
    if _cxx_plain_type(src, typ):
        return "plain"
    elem = _cxx_vector_element(src, typ)
    if elem is not None and _cxx_plain_type(src, elem) and src.text(elem).strip() != "bool":
        return "vector"
    return " ".join(src.text(typ).split()) if typ is not None else "?"


@lru_cache(maxsize=8)
def _cxx_declared(src: _Source) -> dict[str, set[tuple[str, str]]]:
    """Every name declared in the file -> {(type class, declarator kind)}, by plain name and
    by namespace-qualified name.  Names, not scopes: a name declared twice with two
    types has both, and the check then needs both to be safe."""
    out: dict[str, set[tuple[str, str]]] = {}
    kinds = ("declaration", "field_declaration", "parameter_declaration",
             "optional_parameter_declaration")
    for n in _walk(src.root):
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


def _cxx_lookup(src: _Source, ref, name: str) -> set[tuple[str, str]]:
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


def _cxx_check_local_declaration(src: _Source, decl) -> str | None:
    typ = decl.child_by_field_name("type")
    names = ", ".join(f"`{_cxx_declarator(d)[0]}`"
                      for d in decl.children_by_field_name("declarator"))
    if typ is not None and typ.type == "placeholder_type_specifier":
        return f"the loop declares {names} as `auto`; the check does not deduce types"
    if not _cxx_plain_type(src, typ):
        return (f"the loop declares {names} of type `{src.text(typ) if typ else '?'}`, whose "
                "constructor and operators may run code the check cannot see")
    return None


def _cxx_check_types(src: _Source, loop, var: str) -> str | None:
    """C++: operators can be overloaded, so every variable the loop uses must have a type
    whose operators are known: a built-in arithmetic type (or pointer/array of one), or a
    std::vector of one used as ``v[...]``.  The member of a class object reached with
    ``.`` (or ``->`` on a plain pointer) must itself be of such a type."""
    declared = _cxx_declared(src)
    macros = _c_macros(src)
    file = os.path.basename(src.path)
    for n in _walk(loop):
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


def _c_check_write(src: _Source, target, var: str, local: dict[str, str],
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
        base = _strip_parens(target.child_by_field_name("argument"))
        idx = _strip_parens(_subscript_index(target))
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
        base = _strip_parens(target.child_by_field_name("argument"))
        op = target.child_by_field_name("operator")
        if base is not None and base.type == "identifier" and \
                local.get(src.text(base)) == "scalar" and op is not None and src.text(op) == ".":
            return None
        return f"the loop writes the member `{src.text(target)}`, shared by all iterations"
    if t == "pointer_expression":
        return f"the loop writes through the pointer `{src.text(target)}`"
    return f"the loop writes `{src.text(target)}`, which the check cannot follow"


def _c_counter_used_elsewhere(src: _Source, loop, func, var: str) -> str | None:
    """A counter declared outside the loop has no defined value after ``omp parallel
    for``: allow it only if every other use is as the counter of another ``for``."""
    if func is None:
        return None
    for n in _walk(func):
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


def _c_omp_context(src: _Source, node, func) -> str | None:
    """The OpenMP pragma already governing `node` (on it or an enclosing statement)."""
    n = node
    while n is not None and n != func:
        prev = n.prev_named_sibling
        while prev is not None and prev.type == "comment":
            prev = prev.prev_named_sibling
        if prev is not None and prev.type == "preproc_call":
            d = prev.child_by_field_name("directive")
            arg = prev.child_by_field_name("argument")
            if d is not None and src.text(d) == "#pragma" and arg is not None and \
                    src.text(arg).split()[:1] == ["omp"]:
                return f"#pragma {src.text(arg).strip()}"
        n = n.parent
    return None


def _c_parallelize(src: _Source, path: str, line: int, root: str | None) -> Patch | Refusal:
    row = line - 1
    func = _function_at(src, row)
    bad = _parse_refusal(src, func, line)
    if bad is not None:
        return bad
    loops = [n for n in _walk(func if func is not None else src.root)
             if n.type == "for_statement" and _contains_row(n, row)]
    where = f"{os.path.basename(path)}:{line}"
    if not loops and src.lang == "cpp" and any(
            n.type == "for_range_loop" and _contains_row(n, row) for n in _walk(src.root)):
        return Refusal(path, line, f"the loop at {where} is a range-based `for`; only counted "
                                   "`for (i = a; i < n; i++)` loops are parallelised")
    if not loops:
        return Refusal(path, line, f"{where} is not inside a `for` loop")
    omp = _c_omp_context(src, loops[-1], func)
    if omp is not None:
        return Refusal(path, line, f"the loop at {where} already runs under `{omp}`",
                       "bind_block")
    reasons = []
    for loop in loops:  # outermost first (_walk is pre-order)
        why = _c_check_loop(src, loop, func)
        if why is None:
            if not src.starts_line(loop):
                why = "the loop does not start its own line"
            else:
                edit = Edit(src.line_start(loop.start_byte),
                            f"{src.indent(loop)}{C_PRAGMA}{src.nl}", attach=True)
                lline = loop.start_point[0] + 1
                return _make_patch(path, src.data, [edit], root,
                                   f"parallel first touch: `{C_PRAGMA}` on the loop at "
                                   f"{os.path.basename(path)}:{lline}")
        reasons.append(why)
    return Refusal(path, line, f"not parallelising the loop at {where}: {reasons[-1]}")


# ------------------------------------------------- Fortran: parallel first touch

_F_ALLOWED = frozenset({
    "assignment_statement", "call_expression", "argument_list", "identifier",
    "number_literal", "math_expression", "relational_expression", "logical_expression",
    "unary_expression", "parenthesized_expression", "if_statement", "elseif_clause",
    "else_clause", "end_if_statement", "do_loop_statement", "loop_control_expression",
    "end_do_loop_statement", "comment", "keyword_statement", "string_literal",
    "boolean_literal", "complex_literal", "derived_type_member_expression", "type_member",
    "keyword_argument", "concatenation_expression",
})


def _f_name(src: _Source, node) -> str:
    return src.text(node).lower()


def _f_arrays(src: _Source) -> set[str]:
    """Names declared with a shape anywhere in the file (lower case)."""
    names = set()
    for decl in _walk(src.root):
        if decl.type != "variable_declaration":
            continue
        dims = any(a.type == "type_qualifier" and src.text(a).lower().startswith("dimension")
                   for a in decl.children)
        for d in decl.children_by_field_name("declarator"):
            if d.type == "sized_declarator":
                names.add(_f_name(src, d.named_children[0]))
            elif dims and d.type == "identifier":
                names.add(_f_name(src, d))
            elif dims and d.type == "init_declarator":
                names.add(_f_name(src, d.child_by_field_name("left")))
    return names


def _f_loop_header(src: _Source, loop) -> tuple[str, list] | str:
    ctl = next((c for c in loop.named_children if c.type == "loop_control_expression"), None)
    if ctl is None:
        return "the loop is not a counted `do i = a, b` loop"
    parts = [c for c in ctl.named_children if c.type != "comment"]
    if len(parts) not in (3, 4) or parts[0].type != "identifier":
        return "the loop is not a counted `do i = a, b` loop"
    var = _f_name(src, parts[0])
    if len(parts) == 4 and src.text(parts[3]).strip() != "1":
        return f"the loop steps `{var}` by {src.text(parts[3])}, not 1"
    return var, parts[1:3]


def _f_check_loop(src: _Source, loop, unit, arrays: set[str]) -> str | None:
    header = _f_loop_header(src, loop)
    if isinstance(header, str):
        return header
    var, bounds = header
    for b in bounds:
        for n in _walk(b):
            if n.type == "call_expression":
                name = _f_name(src, n.named_children[0])
                if name not in arrays and name not in PURE_F_FUNCTIONS:
                    return f"the loop bound calls `{name}`"
    body = [c for c in loop.named_children
            if c.type not in ("loop_control_expression", "end_do_loop_statement")]
    written: set[str] = set()
    for stmt in body:
        for n in _walk(stmt):
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
                name = _f_name(src, n.named_children[0])
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
        for n in _walk(loop):
            if n.type != "identifier" or _f_name(src, n) != name:
                continue
            p = n.parent
            if p.type == "call_expression" and p.named_children[0] == n and \
                    _f_is_var_index(src, p, var):
                continue
            shown = src.text(p) if p.type == "call_expression" else name
            return (f"the loop writes `{name}({var})` and also uses `{shown}`: one "
                    "iteration may depend on another")
    return _f_counter_used_elsewhere(src, loop, unit, var)


def _f_is_var_index(src: _Source, ref, var: str) -> bool:
    args = next((c for c in ref.named_children if c.type == "argument_list"), None)
    if args is None:
        return False
    items = [a for a in args.named_children if a.type != "comment"]
    return len(items) == 1 and items[0].type == "identifier" and _f_name(src, items[0]) == var


def _f_check_write(src: _Source, target, var: str, arrays: set[str],
                   written: set[str]) -> str | None:
    if target is None:
        return "the loop assigns to something the check cannot follow"
    if target.type == "identifier":
        name = _f_name(src, target)
        if name == var:
            return f"the loop changes its own counter `{var}`"
        return f"the loop writes the scalar `{name}` declared outside it"
    if target.type == "call_expression":
        name = _f_name(src, target.named_children[0])
        if name in arrays and _f_is_var_index(src, target, var):
            written.add(name)
            return None
        return (f"the loop writes `{src.text(target)}`, not exactly `{name}({var})`: "
                "iterations may write the same element")
    return f"the loop writes `{src.text(target)}`, which the check cannot follow"


def _f_counter_used_elsewhere(src: _Source, loop, unit, var: str) -> str | None:
    """The do variable has no defined value after ``!$omp parallel do``: allow it only
    when every other use is inside another do loop over it, or its declaration."""
    if unit is None:
        return None
    for n in _walk(unit):
        if n.type != "identifier" or _f_name(src, n) != var:
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


def _f_do_var(src: _Source, loop) -> str | None:
    ctl = next((c for c in loop.named_children if c.type == "loop_control_expression"), None)
    if ctl is None or not ctl.named_children or ctl.named_children[0].type != "identifier":
        return None
    return _f_name(src, ctl.named_children[0])


def _f_declares(src: _Source, unit, var: str) -> bool:
    for decl in unit.named_children:
        if decl.type == "variable_declaration":
            for d in decl.children_by_field_name("declarator"):
                name = d.named_children[0] if d.type == "sized_declarator" else \
                    d.child_by_field_name("left") if d.type == "init_declarator" else d
                if name is not None and _f_name(src, name) == var:
                    return True
    return False


def _f_omp_context(src: _Source, node, unit) -> str | None:
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


def _f_parallelize(src: _Source, path: str, line: int, root: str | None) -> Patch | Refusal:
    row = line - 1
    where = f"{os.path.basename(path)}:{line}"
    loops = [n for n in _walk(src.root) if n.type == "do_loop_statement"
             and _contains_row(n, row)]
    if not loops:
        return Refusal(path, line, f"{where} is not inside a `do` loop")
    unit = loops[0].parent
    while unit is not None and unit.type not in _F_UNITS:
        unit = unit.parent
    bad = _parse_refusal(src, unit, line)
    if bad is not None:
        return bad
    omp = _f_omp_context(src, loops[-1], unit)
    if omp is not None:
        return Refusal(path, line, f"the loop at {where} already runs under `{omp}`")
    arrays = _f_arrays(src)
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
                return _make_patch(path, src.data, edits, root,
                                   f"parallel first touch: `{F_DIRECTIVE}` on the loop at "
                                   f"{os.path.basename(path)}:{lline}")
        reasons.append(why)
    return Refusal(path, line, f"not parallelising the loop at {where}: {reasons[-1]}")


def parallelize_first_touch(path: str, line: int, *, root: str | None = None
                            ) -> Patch | Refusal:
    """Make the serial loop that first-touched an array run under OpenMP, if provably safe.

    `line` is a first-touch source line (`FirstTouch.sites`).  Among the loops that
    contain it, the outermost one that passes every rule gets
    ``#pragma omp parallel for schedule(static)`` (Fortran: ``!$omp parallel do
    schedule(static)`` / ``!$omp end parallel do``).  The rules: a counted loop
    (``i = a`` or a declaration; ``i < / <= / != bound`` with a bound free of calls and
    not written in the loop; ``i++`` / ``++i`` / ``i += 1``); writes only to variables
    declared inside the body or to array elements indexed exactly by the counter, and a
    written array used nowhere in the loop except at exactly that index; no calls but
    pure math functions; no break / return / goto / exit; not already under an OpenMP
    directive.  A counter declared outside the loop must not be used after it.
    Otherwise a `Refusal` with the reason, fallback ``bind_block``.
    """
    path = os.path.abspath(path)
    src = _load(path)
    if isinstance(src, Refusal):
        return Refusal(path, line, src.reason)
    if src.lang in C_FAMILY:
        return _c_parallelize(src, path, line, root)
    return _f_parallelize(src, path, line, root)


# ------------------------------------------------- from analyzer results to patches

def parse_site(site: str) -> tuple[str, str, int] | None:
    """``func@file.c:42`` -> (func, file, 42); None without a line number."""
    func, at, rest = site.partition("@")
    if not at:
        return None
    file, colon, line = rest.rpartition(":")
    if not colon or not line.isdigit() or not file:
        return None
    return func, file, int(line)


def _strip_balanced(text: str, open_: str, close: str) -> str:
    out, depth = [], 0
    for ch in text:
        if ch == open_:
            depth += 1
        elif ch == close and depth:
            depth -= 1
        elif not depth:
            out.append(ch)
    return "".join(out)


def site_function(func: str) -> str:
    """The source-level name of a site's function, as a definition spells it.

    ``main._omp_fn.0`` (an OpenMP region gcc outlined from main) -> ``main``;
    ``Matrix::Matrix(unsigned long)`` -> ``Matrix::Matrix``; ``f(int) [clone .cold]``
    -> ``f``; template arguments and a template's return type are dropped.
    """
    name = func.split(" [clone ", 1)[0].strip()
    if name.startswith("operator") or "::operator" in name:
        return name  # operator() and friends: left as they are
    if "(" in name:
        name = name[:name.index("(")]
    name = name.split(".", 1)[0]  # gcc clones: ._omp_fn.N, .part.N, .constprop.N, .cold
    name = _strip_balanced(name, "<", ">").strip()
    return name.rsplit(" ", 1)[-1]  # `void f<int>` (templates carry a return type)


def _function_qualname(src: _Source, func) -> str | None:
    """``ns::Class::method`` of a C++ function definition: its declarator's (possibly
    qualified) name inside the enclosing named namespaces and classes."""
    d = func.child_by_field_name("declarator")
    while d is not None and d.type != "function_declarator":
        d = d.child_by_field_name("declarator")
    name = d.child_by_field_name("declarator") if d is not None else None
    if name is None:
        return None
    parts = [_strip_balanced(src.text(name), "<", ">").replace(" ", "")]
    p = func.parent
    while p is not None:
        if p.type in ("namespace_definition", "class_specifier", "struct_specifier"):
            n = p.child_by_field_name("name")
            if n is not None:
                parts.append(_strip_balanced(src.text(n), "<", ">").replace(" ", ""))
        p = p.parent
    return "::".join(reversed(parts))


def _defines_function(path: str, func: str) -> bool:
    src = _load(path)
    if isinstance(src, Refusal):
        return False
    func = site_function(func)
    if src.lang == "c":
        return any(n.type == "function_definition" and _declarator_name_of_function(n) == func
                   for n in _walk(src.root))
    if src.lang == "cpp":
        for n in _walk(src.root):
            if n.type != "function_definition":
                continue
            q = _function_qualname(src, n)
            if q is not None and (q == func or func.endswith("::" + q)):
                return True
        return False
    stmts = ("program_statement", "subroutine_statement", "function_statement")
    for n in _walk(src.root):
        if n.type in stmts:
            name = next((c for c in n.named_children if c.type == "name"), None)
            if name is not None and _f_name(src, name) == func.lower():
                return True
    return False


def resolve_source(file: str, source_paths: Iterable[str], func: str | None = None) -> str | None:
    """The recorded source path a DWARF/site file name refers to, or None.

    Sites name files by basename; with `func`, only a file that defines that function
    qualifies, which also tells apart several recorded files of the same name.
    """
    paths = list(source_paths)
    if os.path.isabs(file):
        return file if file in paths else None
    suffix = "/" + file.lstrip("./")
    found = [p for p in paths if p.endswith(suffix)]
    if func:
        # Also with one candidate: a file of that name that does not define the
        # function is not the one the profile's line numbers refer to.
        found = [p for p in found if _defines_function(p, func)]
    return found[0] if len(found) == 1 else None


def _cxx_constructed_serially(obj, paths: list[str],
                              hashes: dict[str, str] | None = None) -> Refusal | None:
    """A C++ heap object whose allocation already writes its elements: a std::vector
    constructed with elements, or ``new T[n]()`` / ``new T[n]{...}``.  That first touch
    happens inside the allocating statement (libstdc++'s value-initialisation, in the
    allocating thread), before any loop of the program: no parallel loop can be its
    first touch, so ``parallel_init`` is refused with that reason."""
    if obj.kind != "heap":
        return None
    parsed = parse_site(obj.site)
    if parsed is None:
        return None
    func, file, line = parsed
    path = _resolve(file, paths, func, line, "bind_block", hashes)
    if isinstance(path, Refusal) or _language(path) != "cpp":
        return None  # the placement path then gives the reason
    src = _load(path)
    if isinstance(src, Refusal) or src.root.has_error:
        return None
    row, where = line - 1, f"{os.path.basename(path)}:{line}"
    var = obj.name if obj.name.isidentifier() else None
    vec = _cxx_vector_construction(src, row, var)
    if isinstance(vec, tuple):
        stmt, name, elem = vec
        return Refusal(path, line, f"the std::vector `{name}` constructed at {where} "
                                   f"(`{' '.join(src.text(stmt).split())}`) writes its elements in "
                                   "its constructor, serially in the constructing thread, so its "
                                   "pages are first-touched before any loop runs and no "
                                   "parallel loop can place them")
    for n in _walk(src.root):
        if n.type == "new_expression" and _contains_row(n, row) and \
                n.child_by_field_name("arguments") is not None and \
                n.child_by_field_name("declarator") is not None:
            target = _allocation_target(src, n)
            if var is None or target in (var, f"this->{var}"):
                return Refusal(path, line, f"`{' '.join(src.text(n).split())}` at {where} "
                                           "initialises the array as it allocates it, serially "
                                           "in the allocating thread, so its pages are "
                                           "first-touched before any loop runs and no parallel "
                                           "loop can place them")
    return None


def _resolve(file: str, paths: list[str], func: str | None, line: int, fallback: str,
             hashes: dict[str, str] | None) -> str | Refusal:
    """`resolve_source`, or a Refusal that says truly why there is no file to patch."""
    path = resolve_source(file, paths, func)
    if path is None:
        suffix = "/" + file.lstrip("./")
        named = [p for p in paths if p == file or p.endswith(suffix)]
        if not named:
            return Refusal(file, line, f"{file} is not among the recorded sources", fallback)
        shown = site_function(func) if func else "?"
        defining = [p for p in named if func and _defines_function(p, func)]
        if len(defining) > 1:
            return Refusal(file, line, f"several recorded files named {file} define `{shown}`; "
                                       "not guessing which one the profile means", fallback)
        return Refusal(file, line, f"the recorded {file} has no definition of `{shown}` that "
                                   "the parser finds, so the profile's line numbers cannot be "
                                   "matched to it", fallback)
    if hashes is not None and path in hashes:
        from numaprof.recommender.sources import sha256_file

        try:
            current = sha256_file(path)
        except OSError as e:
            return Refusal(path, line, f"cannot read {path}: {e.strerror or e}", fallback)
        if current != hashes[path]:
            return Refusal(path, line, f"{os.path.basename(path)} changed after the profile was "
                                       "recorded, so its line numbers no longer hold; patches "
                                       "are made only against the recorded text (undo the edits "
                                       "— `numaprof suggest --revert` after --apply — or record "
                                       "again)", fallback)
    return path


def patch_for_object(obj, policy: str, source_paths: Iterable[str], *,
                     root: str | None = None,
                     hashes: dict[str, str] | None = None,
                     weighted=None) -> Patch | Refusal | None:
    """The source patch that applies `policy` to an analyzed object (an ObjectResult).

    - ``parallel_init``: `parallelize_first_touch` on the object's first-touch sites,
      most pages first; the first site that can be made parallel wins.
    - a placement policy: `place_after_allocation` at a heap object's allocation site,
      or `place_static` for a static array before its first touch.
    - ``first_touch`` (no change) and objects of other kinds: None.

    `source_paths` are the files recorded with the profile (`sources.read_sources_json`)
    — only those are ever patched; with `hashes` (that file's path -> sha256 map), a file
    whose content changed since is refused rather than patched at lines that moved.
    ``weighted_interleave`` needs `weighted` = (node ids, weights), the suggestion's; the
    statement is then a block calling ``numaprof_place_weighted`` with them.
    """
    paths = list(source_paths)
    if policy == "first_touch":
        return None
    if policy == "parallel_init":
        serial = _cxx_constructed_serially(obj, paths, hashes)
        if serial is not None:
            return serial
        refusals = []
        for site in obj.first_touch.sites:
            parsed = parse_site(site)
            if parsed is None:
                continue
            func, file, line = parsed
            path = _resolve(file, paths, func, line, "bind_block", hashes)
            if isinstance(path, Refusal):
                refusals.append(path)
                continue
            result = parallelize_first_touch(path, line, root=root)
            if isinstance(result, Patch):
                return result
            refusals.append(result)
        if refusals:
            return refusals[0]
        where = ", ".join(obj.first_touch.sites) or "no recorded site"
        return Refusal("", 0, f"`{obj.name}` was first touched at {where}, with no source "
                              "line to patch (a library call such as memset?)")
    policy_constant(policy)  # ValueError for a policy without a runtime constant
    if policy == "weighted_interleave" and (
            weighted is None or not weighted[0] or len(weighted[0]) != len(weighted[1])):
        return Refusal("", 0, f"weighted_interleave for `{obj.name}` has no per-node weights "
                              "to write", "numactl")
    if obj.kind == "heap":
        parsed = parse_site(obj.site)
        if parsed is None:
            return Refusal("", 0, f"the allocation site of `{obj.name}` has no source line",
                           "numactl")
        func, file, line = parsed
        path = _resolve(file, paths, func, line, "numactl", hashes)
        if isinstance(path, Refusal):
            return path
        var = obj.name if obj.name.isidentifier() else None
        return place_after_allocation(path, line, var, policy, root=root, weighted=weighted)
    if obj.kind == "static":
        touches = [t for t in (parse_site(s) for s in obj.first_touch.sites) if t is not None]
        tried, first_refusal = [], None
        for func, file, line in touches:
            path = _resolve(file, paths, func, line, "numactl", hashes)
            if isinstance(path, Refusal):
                first_refusal = first_refusal or (path if "changed after" in path.reason
                                                  else None)
                continue
            if path in tried:
                continue
            tried.append(path)
            result = place_static(path, obj.name, policy, before_line=line, root=root,
                                  weighted=weighted)
            if isinstance(result, Patch):
                return result
            first_refusal = first_refusal or result
        # Defined in another file than the one touching it: place at the start of main.
        for path in paths:
            if path in tried or _language(path) not in C_FAMILY:
                continue
            src = _load(path, want=C_FAMILY)
            if not isinstance(src, Refusal) and _file_scope_array(src, obj.name) is not None:
                fresh = _resolve(path, paths, None, 0, "numactl", hashes)
                if isinstance(fresh, Refusal):
                    return fresh
                return place_static(path, obj.name, policy, root=root, weighted=weighted)
        return first_refusal or Refusal(
            "", 0, f"no recorded C source defines the static array `{obj.name}`", "numactl")
    return None
