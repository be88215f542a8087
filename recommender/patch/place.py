"""Placement calls after a heap allocation: ``numaprof_place(ptr, bytes, NUMAPROF_<POLICY>);``
after ``malloc`` / ``calloc`` / ... (C and C++) and ``new T[n]`` (C++), with
``#include "numaprof_place.h"``.  For weighted_interleave the statement is a block
calling ``numaprof_place_weighted`` with the suggestion's nodes and weights.

The helpers every placement shares are here too: the statement's text, the #include,
where a statement goes after another, the size probe the compile check inserts, and the
search for a placement the source already has.  ``std::vector`` and constructor
placements are in place_cxx.py, static arrays in place_static.py.
"""

from __future__ import annotations

import os

from numaprof.recommender import emit
from numaprof.recommender.patch import scope
from numaprof.recommender.patch.edits import (
    AlreadyPlaced,
    Edit,
    Patch,
    PatchInfo,
    Refusal,
    make_patch,
)
from numaprof.recommender.patch.source import (
    C_FAMILY,
    Source,
    block_statement,
    contains_row,
    cxx_plain_type,
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

#: The runtime's placement functions: name -> index of the policy argument (None: the
#: policy is in the name).
PLACE_FUNCTIONS = {"numaprof_place": 2, "numaprof_place_nodes": 2, "numaprof_place_ex": 2,
                   "numaprof_place_weighted": None}


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


def size_probe(size: str, recorded: int) -> str:
    """A statement that compiles only where `size` is the constant `recorded`: a
    negative array size otherwise.  The compile check inserts it next to a placement
    (never into the patch), so the compiler, with the program's own flags and headers,
    confirms what ``sizeof(a)`` is at that very point."""
    return f"(void)sizeof(char[((unsigned long long)({size}) == {int(recorded)}ULL) ? 1 : -1]);"


def with_include(src: Source, edit: Edit, text: str, size: str, probe: bool,
                 recorded: int | None) -> tuple[list[Edit], Edit | None]:
    """The edits of a placement (its statement and the #include), and the size probe the
    compile check inserts next to the statement when `probe`."""
    edits = [edit]
    inc = include_edit(src)
    if inc is not None:
        edits.append(inc)
    if not probe or recorded is None:
        return edits, None
    return edits, Edit(edit.offset, edit.text.replace(text, size_probe(size, recorded)))


def by_hand_words(statement: str, where: str) -> str:
    """The line a refusal gives to add by hand."""
    return f'{statement} {where} (and #include "{PLACE_HEADER}"; build with `numaprof config --cflags`)'


def allocation_target(src: Source, call) -> str | None:
    """The variable an allocator call's (or new-expression's) result goes to (lvalue text)."""
    node = allocation_target_node(src, call)
    if node is None:
        return None
    if node.type in ("init_declarator",):
        return declarator_name(node)
    return src.text(node)


def allocation_target_node(src: Source, call):
    """The lvalue node (or the init_declarator) receiving an allocation's pointer."""
    name = allocator_name(src, call)
    if name == "posix_memalign":
        args = call.child_by_field_name("arguments").named_children
        if not args:
            return None
        first = strip_parens(args[0])
        if first is not None and first.type == "pointer_expression" and \
                src.text(first).startswith("&"):
            return first.child_by_field_name("argument")
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
        return parent
    if parent.type == "assignment_expression" and parent.child_by_field_name("right") == n \
            and src.text(parent.child_by_field_name("operator")) == "=":
        return parent.child_by_field_name("left")
    return None


def allocator_name(src: Source, node) -> str | None:
    """``malloc`` for a call to a C allocator (C++: also ``std::malloc``), else None."""
    if node.type != "call_expression":
        return None
    fn = node.child_by_field_name("function")
    if fn is None:
        return None
    if fn.type == "qualified_identifier" and src.lang == "cpp":
        scope_, name = fn.child_by_field_name("scope"), fn.child_by_field_name("name")
        if scope_ is None or src.text(scope_) != "std" or name is None:
            return None
        fn = name
    if fn.type != "identifier" or src.text(fn) not in _ALLOCATORS:
        return None
    return src.text(fn)


def new_size(src: Source, new, target: str | None, where: str) -> str:
    """Bytes of ``new T[n]`` as ``n * sizeof(*target)``, or ``!reason`` when there is none."""
    if new.child_by_field_name("placement") is not None:
        return (f"!the new-expression at {where} is a placement new: it constructs in memory "
                "allocated elsewhere, which is where a placement belongs")
    length = new_length(new)
    if length is None:
        return (f"!the new-expression at {where} allocates one object, not an array; "
                "numaprof places arrays")
    if has_side_effects(length):
        return (f"!the length of the new[] at {where} has side effects; it cannot be "
                "evaluated twice")
    # sizeof(*p) is the element size whatever T is (also for new T[n][4]).
    return f"{operand(src, length)} * sizeof(*{target})"


def new_length(new):
    decl = new.child_by_field_name("declarator")
    return decl.child_by_field_name("length") if decl is not None and \
        decl.type == "new_declarator" else None


def new_touch_words(src: Source, new) -> str:
    """What a new-expression already wrote, for a patch's description."""
    if new.child_by_field_name("arguments") is not None:
        return (" (the new-expression initialises the elements, so the call moves the "
                "pages it touched)")
    if not cxx_plain_type(src, new.child_by_field_name("type")):
        return (" (if the element constructors write the memory, the call moves the "
                "pages they touched)")
    return ""


def allocation_size_nodes(src: Source, call) -> list | None:
    """The argument nodes whose product is an allocator call's byte count (None: side
    effects, or not the expected arguments)."""
    name = allocator_name(src, call)
    args = [a for a in call.child_by_field_name("arguments").named_children
            if a.type != "comment"]
    if any(has_side_effects(a) for a in args):
        return None
    if name == "calloc":
        return args if len(args) == 2 else None
    idx = _ALLOCATORS[name]
    return [args[idx]] if idx < len(args) else None


def operand(src: Source, node) -> str:
    simple = ("identifier", "number_literal", "sizeof_expression", "parenthesized_expression",
              "subscript_expression", "field_expression", "call_expression")
    t = src.text(node)
    return t if node.type in simple else f"({t})"


def size_value(src: Source, nodes, at: int, element: int | None = 1) -> int | None:
    """The constant product of `nodes` (times `element`), or None when one is not constant."""
    if element is None:
        return None
    total = element
    for n in nodes:
        v = scope.const_value(src, n, at)
        if v is None:
            return None
        total *= v
    return total


def _changed_by(src: Source, stmt, names: set[str], allocation) -> str | None:
    """A name of `names` that `stmt` assigns, or declares after the allocation, other than
    through the allocation's own assignment: the size evaluated after the statement would
    then not be the allocated one."""
    for n in walk(stmt):
        if n.type == "assignment_expression" and n != allocation:
            left = strip_parens(n.child_by_field_name("left"))
            if left is not None and left.type == "identifier" and src.text(left) in names:
                return src.text(left)
        elif n.type == "update_expression":
            arg = strip_parens(n.child_by_field_name("argument"))
            if arg is not None and arg.type == "identifier" and src.text(arg) in names:
                return src.text(arg)
        elif n.type == "init_declarator" and n != allocation and \
                n.start_byte > allocation.start_byte:
            name = declarator_name(n)
            if name in names:
                return name
    return None


def identifiers(src: Source, nodes) -> set[str]:
    return {src.text(i) for n in nodes for i in walk(n) if i.type == "identifier"}


def place_after_allocation(path: str, line: int, var: str | None, policy_const: str,
                           size_expr: str | None = None, *,
                           root: str | None = None, weighted=None,
                           recorded_size: int | None = None,
                           sources=()) -> Patch | Refusal | AlreadyPlaced:
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

    The statement goes right after the allocating statement, in its block, so its names
    mean what they meant in the allocation — unless that statement itself changes one of
    them (``a = malloc(n * 8), n = 0;``), which is refused.  With `recorded_size` (the
    bytes the profile recorded for this one allocation), a size the file gives as
    constants must equal it.  C++: a ``std::vector`` constructed or sized on that line,
    and an allocation in a constructor's member initialiser list, are placed by
    place_cxx.py; `sources` are the other recorded files, where a class may be defined.
    An existing ``numaprof_place`` call on the same pointer after the allocation gives
    `AlreadyPlaced` instead of a second copy.
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
    for n in walk(src.root):
        if allocator_name(src, n) is None and not (
                n.type == "new_expression" and src.lang == "cpp"):
            continue
        own = own_statement(n)
        if own is None or not contains_row(own, row):
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
        from numaprof.recommender.patch import place_cxx

        found = place_cxx.place_cxx_container(src, row, var, const, root, weighted,
                                              recorded_size, sources)
        if found is not None:
            return found
    wrapped = None
    if not candidates:
        wrapped = _wrapper_call(src, row, var)
        if wrapped is not None:
            candidates = [wrapped[:3]]
    if not candidates:
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
    assigned = [c for c in candidates if c[2] is not None]
    if len(chosen) != 1 and len(assigned) == 1 and \
            _wrapper(src, assigned[0][1], assigned[0][2]) is not None:
        chosen = assigned  # the profile named it after the caller's variable
    if len(chosen) != 1:
        what = f"assigned to `{var}`" if var is not None else "assigned to a variable"
        many = "more than one allocation" if chosen else "no allocation"
        return Refusal(path, line, f"{many} {what} at {where}", "numactl")
    call, stmt, target = chosen[0]
    func = enclosing(stmt, "function_definition")
    fname = _wrapper(src, stmt, target)
    if fname is not None:
        # An allocation wrapper: a placement here would hit every caller's arrays.
        by_hand = ""
        if recorded_size:
            ptr = var if var is not None and var != target else "ptr"
            by_hand = by_hand_words(
                place_text(ptr, str(recorded_size), const, weighted),
                f"after the call of `{fname}` that allocates this array"
                + (" (ptr: the pointer it returns)" if ptr == "ptr" else "")
                + f", with the call's byte count ({recorded_size} bytes as recorded)")
        return Refusal(path, line, f"the allocation at {where} is in `{fname}`, which returns "
                                   "it: a wrapper shared by other allocations; not placing "
                                   "there", "numactl", by_hand)
    touched = ""
    target_node = allocation_target_node(src, call)
    if call.type == "new_expression":
        size = new_size(src, call, target, where)
        if isinstance(size, str) and size.startswith("!"):
            return Refusal(path, line, size[1:], "numactl")
        touched = new_touch_words(src, call)
        size_nodes = [new_length(call)]
        element = scope.PRIMITIVE_SIZES.get(
            " ".join(src.text(call.child_by_field_name("type")).split()))
        if any(c.type == "new_declarator" for c in new_length(call).parent.named_children):
            element = None  # new T[n][m]: not evaluated here
    elif wrapped is not None:
        # the wrapper's byte count with the call's arguments for its parameters: the
        # names are the call's, in scope right after it; no constant check (element None)
        size, size_nodes, element = wrapped[3], wrapped[4], None
        if size is None:
            return Refusal(path, line, f"the byte count of `{src.text(call.child_by_field_name('function'))}` "
                                       f"at {where} cannot be written with the call's arguments",
                           "numactl",
                           by_hand_words(place_text(target, str(recorded_size or "<bytes allocated>"),
                                                    const, weighted), f"after line {line} of "
                                         f"{os.path.basename(path)}") if recorded_size else "")
    else:
        size_nodes = allocation_size_nodes(src, call)
        size = " * ".join(operand(src, a) for a in size_nodes) if size_nodes and \
            len(size_nodes) > 1 else (src.text(size_nodes[0]) if size_nodes else None)
        element = 1
    if size_expr is not None:
        size, size_nodes = size_expr, None
    if size is None:
        return Refusal(path, line, f"the size argument of the allocation at {where} has "
                                   "side effects; it cannot be evaluated twice", "numactl")
    assignment = target_node.parent if target_node is not None and \
        target_node.type != "init_declarator" else target_node
    names = identifiers(src, size_nodes or []) | (
        identifiers(src, [target_node]) if target_node is not None and
        target_node.type != "init_declarator" else set())
    changed = _changed_by(src, stmt, names, assignment) if assignment is not None else None
    if changed is not None:
        return Refusal(path, line, f"the statement at {where} also changes `{changed}`, so "
                                   f"`{size}` evaluated after it would not be the size it "
                                   "allocated", "numactl",
                       by_hand_words(place_text(target, "<bytes allocated>", const, weighted),
                                     f"after line {line} of {os.path.basename(path)}"))
    existing = find_placement(src, target, start=stmt.end_byte,
                              end=func.end_byte if func is not None else None)
    if existing is not None:
        return existing
    text = place_text(target, size, const, weighted)
    at = stmt.end_byte
    size_bytes = size_value(src, size_nodes, at, element) if size_nodes else None
    if size_bytes is not None and recorded_size is not None and size_bytes != recorded_size:
        return Refusal(path, line, f"the allocation at {where} is of {size_bytes} bytes "
                                   f"(`{size}`), but the profile recorded {recorded_size} for "
                                   f"`{target}`: not the allocation it saw", "numactl")
    edits, probe = with_include(src, edit_after(src, stmt, text), text, size,
                                size_bytes is not None and recorded_size is not None,
                                recorded_size)
    shown = ", ".join(f"`{n}`" for n in sorted(names)) or f"`{target}`"
    info = PatchInfo(
        kind="place_after_allocation", statement=text, where=where, target=target,
        size=size, size_bytes=size_bytes, recorded_bytes=recorded_size,
        scope=(f"inserted right after the allocation, in its block: {shown} mean there what "
               "they meant in the allocation"),
        probe=probe)
    return make_patch(path, src.data, edits, root,
                      f"place `{target}` with {placement_words(const, weighted)} after its "
                      f"allocation at {where}{touched}", info)


def _included_definitions(src: Source) -> dict:
    """name -> (source, function definition) of the functions defined in the headers this
    file includes with quotes, found beside it (``#include "memUtils.h"``, where CoMD's
    ``static void *comdMalloc(size_t)`` is).  One level: not the headers' own includes."""
    out: dict = {}
    here = os.path.dirname(os.path.abspath(src.path))
    for n in walk(src.root):
        path = n.child_by_field_name("path") if n.type == "preproc_include" else None
        if path is None or path.type != "string_literal":
            continue
        header = os.path.normpath(os.path.join(here, src.text(path).strip('"')))
        if not os.path.isfile(header):
            continue
        h = load(header)
        if isinstance(h, Refusal):
            continue
        for f in walk(h.root):
            if f.type == "function_definition" and not f.has_error:
                out.setdefault(function_name(f), (h, f))
    return out


def _wrapper_call(src: Source, row: int, var: str | None):
    """(call, statement, target, size, argument nodes) of the call on `row` whose result is
    assigned to `var` (any assigned one without `var`) when the callee is an allocation
    wrapper defined in this file or in a header it includes (``g->u = alloc_field(nx, ny);``
    with ``alloc_field`` returning a malloc's block); size is the wrapper's byte count
    written with the call's arguments, or None when it cannot be.  None when there is no
    such call."""
    defs = {}
    for f in walk(src.root):
        if f.type == "function_definition":
            defs.setdefault(function_name(f), (src, f))
    headers = None
    found = []
    for n in walk(src.root):
        if n.type != "call_expression":
            continue
        own = own_statement(n)
        fn = n.child_by_field_name("function")
        if own is None or not contains_row(own, row) or fn is None or fn.type != "identifier":
            continue
        name = src.text(fn)
        if name not in defs:
            if headers is None:
                headers = _included_definitions(src)
            if name in headers:
                defs[name] = headers[name]
        fsrc, func = defs.get(name, (src, None))
        target = allocation_target(src, n)
        if func is None or target is None or (var is not None and target != var):
            continue
        allocs = [a for a in walk(func) if allocator_name(fsrc, a) is not None]
        if len(allocs) != 1 or not _returns_block(fsrc, func, allocs[0]):
            continue
        args = [a for a in n.child_by_field_name("arguments").named_children if a.type != "comment"]
        found.append((n, block_statement(n), target,
                      _size_through(fsrc, func, allocs[0], [src.text(a) for a in args]
                                    if not any(has_side_effects(a) for a in args) else None),
                      args))
    return found[0] if len(found) == 1 else None


def _returns_block(src: Source, func, alloc) -> bool:
    """Whether `func` returns the block `alloc` allocates: ``return malloc(n);`` or the
    variable it is assigned to."""
    inside = enclosing(alloc, "return_statement")
    if inside is not None and enclosing(inside, "function_definition") == func:
        return True
    return _wrapper(src, block_statement(alloc), allocation_target(src, alloc)) is not None


def _size_through(src: Source, func, alloc, args: list[str] | None) -> str | None:
    """The byte count of `alloc` in wrapper `func` (of `src`) with its parameters replaced
    by the texts of the call's `args` (each parenthesised), or None: arguments with side
    effects (None), a parameter count that does not match, or a name of the wrapper's own
    (a local) in the size."""
    nodes = allocation_size_nodes(src, alloc)
    decl = func.child_by_field_name("declarator")
    while decl is not None and decl.type != "function_declarator":
        decl = decl.child_by_field_name("declarator")
    params = decl.child_by_field_name("parameters") if decl is not None else None
    if not nodes or params is None or args is None:
        return None
    names = [scope.declarator_identifier(p.child_by_field_name("declarator"))
             for p in params.named_children if p.type == "parameter_declaration"]
    names = [src.text(i) if i is not None else None for i in names]
    if len(names) != len(args):
        return None
    by_name = dict(zip(names, args, strict=True))
    body = func.child_by_field_name("body")
    local = {declarator_name(d) for d in walk(body) if d.type == "init_declarator"} | {
        src.text(i) for d in walk(body) if d.type == "declaration"
        for i in [scope.declarator_identifier(x) for x in d.children_by_field_name("declarator")]
        if i is not None}
    parts = []
    for node in nodes:
        text, at = [], node.start_byte
        for i in walk(node):
            if i.type != "identifier":
                continue
            name = src.text(i)
            if name in local:
                return None
            if name in by_name:
                text.append(src.data[at:i.start_byte].decode())
                text.append(f"({by_name[name]})")
                at = i.end_byte
        text.append(src.data[at:node.end_byte].decode())
        t = "".join(text)
        parts.append(t if len(nodes) == 1 or node.type in ("identifier", "number_literal",
                                                              "sizeof_expression") else f"({t})")
    return " * ".join(parts)


def _wrapper(src: Source, stmt, target: str | None) -> str | None:
    """The name of the function holding `stmt` when it returns `target` (an allocation
    wrapper such as ``xmalloc``), else None."""
    func = enclosing(stmt, "function_definition")
    if func is None or target is None:
        return None
    if any(n.type == "return_statement" and n.named_children
           and src.text(strip_parens(n.named_children[0]) or n) == target
           for n in walk(func)):
        return function_name(func) or "?"
    return None


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


# ------------------------------------------------------------- placements in the source

def pointer_key(src: Source, node) -> str:
    """The object a placement call's first argument points into, as comparable text:
    casts and parentheses dropped, ``&a[0]`` and ``a.data()`` read as ``a``,
    ``this->a`` as ``a``, whitespace removed."""
    node = strip_parens(node)
    while node is not None:
        if node.type == "pointer_expression" and src.text(node).startswith("&"):
            inner = strip_parens(node.child_by_field_name("argument"))
            if inner is not None and inner.type == "subscript_expression":
                node = strip_parens(inner.child_by_field_name("argument"))
                continue
            break
        if node.type == "call_expression" and src.lang == "cpp":
            fn = node.child_by_field_name("function")
            if is_cxx_cast(src, node):
                args = node.child_by_field_name("arguments").named_children
                node = strip_parens(args[0]) if len(args) == 1 else None
                continue
            if fn is not None and fn.type == "field_expression" and \
                    src.text(fn.child_by_field_name("field")) == "data":
                node = strip_parens(fn.child_by_field_name("argument"))
                continue
        break
    if node is None:
        return ""
    text = "".join(src.text(node).split())
    return text[len("this->"):] if text.startswith("this->") else text


def placement_calls(src: Source, start: int = 0, end: int | None = None):
    """(call, function name, first argument, policy constant) of every numaprof_place*
    call between byte offsets `start` and `end`."""
    end = len(src.data) if end is None else end
    for n in walk(src.root):
        if n.type != "call_expression" or not (start <= n.start_byte < end):
            continue
        fn = n.child_by_field_name("function")
        name = src.text(fn) if fn is not None else ""
        if name not in PLACE_FUNCTIONS:
            continue
        args = [a for a in n.child_by_field_name("arguments").named_children
                if a.type != "comment"]
        if not args:
            continue
        idx = PLACE_FUNCTIONS[name]
        const = "NUMAPROF_WEIGHTED_INTERLEAVE" if idx is None else (
            src.text(args[idx]).strip() if idx < len(args) else "")
        yield n, name, args[0], const


def find_placement(src: Source, target: str, start: int = 0, end: int | None = None,
                   accept=None) -> AlreadyPlaced | None:
    """A numaprof_place* call between `start` and `end` whose pointer is `target`
    (`pointer_key` equality; `accept(call, first argument)` may refuse a match, e.g.
    one whose name denotes another object there)."""
    key = "".join(target.split())
    key = key[len("this->"):] if key.startswith("this->") else key
    for call, _name, first, const in placement_calls(src, start, end):
        if pointer_key(src, first) != key or (accept is not None and not accept(call, first)):
            continue
        stmt = own_statement(call) or call
        return AlreadyPlaced(src.path, call.start_point[0] + 1,
                             " ".join(src.text(stmt).split()), const)
    return None
