"""From analyzer results to patches: the file and line a site names, and the patch that
applies a policy to an analyzed object."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from numaprof.recommender.patch.edits import AlreadyPlaced, Patch, Refusal
from numaprof.recommender.patch.loops_c import parallelize_c
from numaprof.recommender.patch.loops_fortran import (
    first_whole_assignment,
    fortran_name,
    parallelize_fortran,
)
from numaprof.recommender.patch.place import (
    allocation_target,
    by_hand_words,
    place_after_allocation,
    place_text,
    policy_constant,
)
from numaprof.recommender.patch.place_cxx import serial_construction
from numaprof.recommender.patch.place_static import (
    existing_static_placement,
    file_scope_arrays,
    function_static_arrays,
    place_function_static,
    place_static,
)
from numaprof.recommender.patch.source import (
    C_FAMILY,
    Source,
    contains_row,
    function_name,
    language,
    load,
    walk,
)


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
    src = load(path)
    if isinstance(src, Refusal):
        return Refusal(path, line, src.reason)
    if src.lang in C_FAMILY:
        return parallelize_c(src, path, line, root)
    return parallelize_fortran(src, path, line, root)


def source_variable(name: str, func: str | None) -> str | None:
    """The name an object has in the source at its allocation site, or None.

    A plain variable is itself.  A data member the analyzer names ``Class::member``
    (docs/analyzer.md, "Names") is ``member`` inside a member function of ``Class`` (the
    site's function), where the source writes it unqualified or as ``this->member``.
    Anything else (``g->energy``, a site name) names no variable.
    """
    if name.isidentifier():
        return name
    cls, sep, member = name.rpartition("::")
    if sep and member.isidentifier() and func and site_function(func).startswith(cls + "::"):
        return member
    return None


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


def _function_qualname(src: Source, func) -> str | None:
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
    src = load(path)
    if isinstance(src, Refusal):
        return False
    func = site_function(func)
    if src.lang == "c":
        return any(n.type == "function_definition" and function_name(n) == func
                   for n in walk(src.root))
    if src.lang == "cpp":
        for n in walk(src.root):
            if n.type != "function_definition":
                continue
            q = _function_qualname(src, n)
            if q is not None and (q == func or func.endswith("::" + q)):
                return True
        return False
    stmts = ("program_statement", "subroutine_statement", "function_statement")
    wanted = fortran_symbol_names(func)
    for n in walk(src.root):
        if n.type in stmts:
            if n.type == "program_statement" and "main__" in wanted:
                return True  # gfortran's symbol of the main program, whatever its name
            name = next((c for c in n.named_children if c.type == "name"), None)
            if name is not None and fortran_name(src, name) in wanted:
                return True
    return False


def fortran_symbol_names(symbol: str) -> set[str]:
    """The source names a Fortran procedure's symbol can stand for: gfortran spells a
    module procedure ``__<module>_MOD_<name>``, an external one ``<name>_``, the main
    program ``MAIN__``; Intel Fortran ``<module>_mp_<name>_``."""
    low = symbol.lower()
    names = {low, low.rstrip("_")}
    # gfortran writes names in lower case and _MOD_ in upper: the separator, whatever the
    # module's name ends with (``__mesh_mod_MOD_field_alloc`` is field_alloc of mesh_mod)
    m = re.fullmatch(r"__\w+?_MOD_(\w+)", symbol)
    if m:
        names.add(m.group(1).lower())
    m = re.fullmatch(r"\w+?_mp_(\w+?)_?", low)
    if m:
        names.add(m.group(1))
    return names


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
    if obj.kind != "heap" or getattr(obj, "attribution", "address") != "address":
        return None
    parsed = parse_site(obj.site)
    if parsed is None:
        return None
    func, file, line = parsed
    path = _resolve(file, paths, func, line, "bind_block", hashes)
    if isinstance(path, Refusal) or language(path) != "cpp":
        return None  # the placement path then gives the reason
    src = load(path)
    if isinstance(src, Refusal) or src.root.has_error:
        return None
    row, where = line - 1, f"{os.path.basename(path)}:{line}"
    var = source_variable(obj.name, func)
    serial = serial_construction(src, row, var)
    if serial is not None:
        stmt, name, writer = serial
        if writer == "its constructor":
            return Refusal(path, line, f"the std::vector `{name}` constructed at {where} "
                                       f"(`{stmt}`) writes its elements in its constructor, "
                                       "serially in the constructing thread, so its pages are "
                                       "first-touched before any loop runs and no parallel loop "
                                       "can place them")
        return Refusal(path, line, f"`{stmt}` at {where} writes the elements of `{name}` in "
                                   f"{writer} as it allocates them, serially in the allocating "
                                   "thread, so the pages are first-touched before any loop "
                                   "runs and no parallel loop can place them")
    for n in walk(src.root):
        if n.type == "new_expression" and contains_row(n, row) and \
                n.child_by_field_name("arguments") is not None and \
                n.child_by_field_name("declarator") is not None:
            target = allocation_target(src, n)
            if var is None or target in (var, f"this->{var}"):
                return Refusal(path, line, f"`{' '.join(src.text(n).split())}` at {where} "
                                           "initialises the array as it allocates it, serially "
                                           "in the allocating thread, so its pages are "
                                           "first-touched before any loop runs and no parallel "
                                           "loop can place them")
    return None


def _fortran_whole_assignment(obj, paths: list[str], root: str | None,
                              hashes: dict[str, str] | None) -> Patch | Refusal | None:
    """A Fortran array first touched in a library call (memset, memcpy): the whole-array
    assignment that first uses it after its allocation, in the allocating procedure, is
    where that call came from; parallelised with WORKSHARE.  None when there is no such
    statement (or the object is no Fortran heap array)."""
    parsed = parse_site(obj.site) if obj.kind == "heap" else None
    if parsed is None or not re.fullmatch(r"[A-Za-z_]\w*(\([^()]*\))?(%[A-Za-z_]\w*(\([^()]*\))?)*", obj.name):
        return None
    func, file, line = parsed
    path = _resolve(file, paths, func, line, "bind_block", hashes)
    if isinstance(path, Refusal):
        return None
    src = load(path)
    if isinstance(src, Refusal) or src.lang != "fortran":
        return None
    at = first_whole_assignment(src, line, obj.name)
    return parallelize_first_touch(path, at, root=root) if at is not None else None


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


def _library_site(func: str) -> bool:
    """A first-touch site in the C++ standard library's code (``std::fill`` inlined from
    stl_algobase.h), which is never the user's to patch."""
    name = site_function(func)
    return name.startswith(("std::", "__gnu_cxx::", "__cxx")) or (
        name.startswith("__") and "::" not in name)


def patch_for_object(obj, policy: str, source_paths: Iterable[str], *,
                     root: str | None = None,
                     hashes: dict[str, str] | None = None,
                     weighted=None) -> Patch | Refusal | AlreadyPlaced | None:
    """The source patch that applies `policy` to an analyzed object (an ObjectResult).

    - ``parallel_init``: `parallelize_first_touch` on the object's first-touch sites,
      most pages first; the first site that can be made parallel wins.
    - a placement policy: `place_after_allocation` at a heap object's allocation site,
      or `place_static` for a static array before its first touch (at the start of
      main() where the name does not denote the array there).
    - ``first_touch`` (no change) and objects of other kinds: None.

    `source_paths` are the files recorded with the profile (`sources.read_sources_json`)
    — only those are ever patched; with `hashes` (that file's path -> sha256 map), a file
    whose content changed since is refused rather than patched at lines that moved.
    ``weighted_interleave`` needs `weighted` = (node ids, weights), the suggestion's; the
    statement is then a block calling ``numaprof_place_weighted`` with them.  The size
    the profile recorded for the object (one allocation, or the symbol) is what the
    patch's size must be.  A placement of the object already in the source gives
    `AlreadyPlaced`.
    """
    paths = list(source_paths)
    if policy == "first_touch":
        return None
    if obj.kind == "heap" and getattr(obj, "attribution", "address") == "allocation_sample":
        # a grid of rows: one call per row (and a first touch inside the allocator) is
        # not a fix a patch can make
        return Refusal("", 0, f"`{obj.name}` is about {int(obj.count)} small allocations from "
                              f"{obj.site or 'one call stack'} (found from a sample of them): "
                              "a placement per block is not a patch numaprof writes; allocate "
                              "it as one block (then it can be placed or initialised in "
                              "parallel), or run the program under numactl", "numactl")
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
                if _library_site(func) and "not among the recorded" in path.reason:
                    path = Refusal(file, line, f"`{obj.name}` was first touched inside the C++ "
                                               f"standard library (`{site_function(func)}` in "
                                               f"{file}), whose code numaprof does not patch")
                refusals.append(path)
                continue
            result = parallelize_first_touch(path, line, root=root)
            if isinstance(result, Patch):
                return result
            refusals.append(result)
        if refusals:
            return refusals[0]
        after = _fortran_whole_assignment(obj, paths, root, hashes)
        if after is not None:
            return after
        where = ", ".join(obj.first_touch.sites) or "no recorded site"
        return Refusal("", 0, f"`{obj.name}` was first touched at {where}, with no source "
                              "line to patch (a library call such as memset?)")
    const = policy_constant(policy)  # ValueError for a policy without a runtime constant
    if policy == "weighted_interleave" and (
            weighted is None or not weighted[0] or len(weighted[0]) != len(weighted[1])):
        return Refusal("", 0, f"weighted_interleave for `{obj.name}` has no per-node weights "
                              "to write", "numactl")
    recorded = int(obj.size) if getattr(obj, "size", 0) and getattr(obj, "count", 1) == 1 \
        else None
    if obj.kind == "heap" and getattr(obj, "attribution", "address") == "carved":
        return Refusal("", 0, f"`{obj.name}` is one of the arrays carved out of the allocation at "
                              f"{obj.site}, its bounds estimated from the sampled offsets: give it an "
                              "allocation of its own, or place its range where the code points "
                              "into the block", "numactl")
    if obj.kind == "heap" and getattr(obj, "attribution", "address") != "address":
        return Refusal("", 0, f"`{obj.name}` is named by the code that accesses it (its site is "
                              "the variable's declaration), not by an allocation numaprof saw: "
                              "place it where it is allocated", "numactl")
    if obj.kind == "heap":
        parsed = parse_site(obj.site)
        if parsed is None:
            return Refusal("", 0, f"the allocation site of `{obj.name}` has no source line",
                           "numactl")
        func, file, line = parsed
        path = _resolve(file, paths, func, line, "numactl", hashes)
        if isinstance(path, Refusal):
            return path
        var = source_variable(obj.name, func)
        return place_after_allocation(path, line, var, policy, root=root, weighted=weighted,
                                      recorded_size=recorded, sources=paths)
    if obj.kind == "static":
        return _place_static_object(obj, policy, const, paths, root, hashes, weighted,
                                    recorded)
    # a mapping numaprof saw but no allocation of (an mmap outside the allocator the shim
    # watches, the allocator's own arenas): no statement of the program makes it
    return Refusal("", 0, f"`{obj.name}` is memory numaprof saw mapped, not allocated: no "
                          "statement of the program to patch; place it where it is mapped "
                          "(mbind), or run the program under numactl", "numactl")


def _defining_source(obj, paths: list[str], hashes) -> str | Refusal:
    """The one recorded C or C++ source that defines the static array `obj` at file scope."""
    c_paths = [p for p in paths if language(p) in C_FAMILY]
    defining = []
    for path in c_paths:
        src = load(path, want=C_FAMILY)
        if not isinstance(src, Refusal) and file_scope_arrays(src, obj.name):
            defining.append(path)
    if len(defining) != 1:
        return Refusal("", 0, (f"`{obj.name}` is declared in {len(defining)} of the recorded "
                               "sources" if defining else
                               f"no recorded C or C++ source defines `{obj.name}`"), "")
    return _resolve(defining[0], paths, None, 0, "", hashes)


def _at_finding_lines(obj, sources: list[str], paths: list[str], hashes, make) -> Patch | Refusal:
    """``make(path, line)`` at each of a sharing finding's source lines (``func@file:line``,
    most samples first) until one gives a patch; else the first refusal."""
    first: Refusal | None = None
    for where in sources:
        parsed = parse_site(where)
        if parsed is None:
            continue
        func, file, line = parsed
        path = _resolve(file, paths, func, line, "", hashes)
        got = path if isinstance(path, Refusal) else make(path, line)
        if isinstance(got, Patch):
            return got
        first = first or got
    return first or Refusal("", 0, f"no source line of the accesses to `{obj.name}` is known",
                            "")


def _one_unit(paths: list[str]) -> bool:
    return sum(1 for p in paths if language(p) in C_FAMILY) == 1


def pad_for_object(obj, paths: list[str], root, hashes) -> Patch | Refusal:
    """The padding patch (recommender/patch/pad.py) of a falsely shared static array, in
    the recorded C or C++ source that defines it."""
    from numaprof.recommender.patch.pad import pad_slots

    path = _defining_source(obj, paths, hashes)
    if isinstance(path, Refusal):
        return path
    return pad_slots(path, obj.name, None, root=root, one_unit=_one_unit(paths))


def page_chunks_for_object(obj, sources: list[str], paths: list[str], root,
                           hashes) -> Patch | Refusal:
    """The page-chunk patch (recommender/patch/chunk.py) of an object whose pages several
    threads write, at the first of the finding's lines that writes it."""
    from numaprof.recommender.patch.chunk import page_chunk_patch

    var = source_variable(obj.name, None)
    if not var:
        return Refusal("", 0, f"`{obj.name}` is not named by a variable", "")
    return _at_finding_lines(obj, sources, paths, hashes,
                             lambda path, line: page_chunk_patch(path, var, line, root=root))


def _place_function_static_object(obj, function: str, policy: str, c_paths: list[str],
                                  paths: list[str], root, hashes, weighted,
                                  recorded) -> Patch | Refusal | AlreadyPlaced:
    """A static array declared in a function: placed in the recorded source whose
    definition of that function declares it."""
    for path in c_paths:
        src = load(path, want=C_FAMILY)
        if isinstance(src, Refusal):
            continue
        found = function_static_arrays(src, obj.name, function)
        if found is None or not found[1]:
            continue
        fresh = _resolve(path, paths, None, 0, "numactl", hashes)
        if isinstance(fresh, Refusal):
            return fresh
        return place_function_static(path, obj.name, function, policy, root=root,
                                     weighted=weighted, recorded_size=recorded)
    return Refusal("", 0, f"no recorded C or C++ source declares the static array `{obj.name}` in "
                          f"{function}()", "numactl")


def replicate_for_object(obj, paths: list[str], root, hashes) -> Patch | Refusal:
    """The replicate patch (recommender/patch/replicate.py) of a heap object, in the file
    of its allocation site, or of a static array, in the recorded source defining it."""
    from numaprof.recommender.patch.replicate import replicate_patch

    if obj.kind == "heap":
        parsed = parse_site(obj.site)
        if parsed is None:
            return Refusal("", 0, f"the allocation site of `{obj.name}` has no source line", "")
        func, file, line = parsed
        path = _resolve(file, paths, func, line, "", hashes)
        if isinstance(path, Refusal):
            return path
        var = source_variable(obj.name, func)
        if not var:
            return Refusal(path, line, f"`{obj.name}` is not named by a variable", "")
        return replicate_patch(path, var, line, root=root, one_unit=_one_unit(paths))
    path = _defining_source(obj, paths, hashes)
    if isinstance(path, Refusal):
        return path
    return replicate_patch(path, obj.name, None, root=root, one_unit=_one_unit(paths))


def reduce_for_object(obj, sources: list[str], paths: list[str], root, hashes) -> Patch | Refusal:
    """The reduction patch (recommender/patch/reduce.py) of a truly shared accumulator, at
    the first of the finding's source lines that updates it."""
    from numaprof.recommender.patch.reduce import reduction_patch

    one = _one_unit(paths)
    return _at_finding_lines(obj, sources, paths, hashes, lambda path, line: reduction_patch(
        path, obj.name, line, root=root, one_unit=one))


#: the site of a function's static array (docs/analyzer.md, "Names"): "in main .bss@ft"
_FUNCTION_STATIC_SITE = re.compile(r"in (\S+) \.[^@ ]*@\S+")


def _place_static_object(obj, policy: str, const: str, paths: list[str], root, hashes,
                         weighted, recorded) -> Patch | Refusal | AlreadyPlaced:
    c_paths = [p for p in paths if language(p) in C_FAMILY]
    local = _FUNCTION_STATIC_SITE.fullmatch(obj.site or "")
    if local is not None:
        return _place_function_static_object(obj, local.group(1), policy, c_paths, paths, root,
                                             hashes, weighted, recorded)
    defining = []
    for path in c_paths:
        src = load(path, want=C_FAMILY)
        if isinstance(src, Refusal) or not file_scope_arrays(src, obj.name):
            continue
        defining.append(path)
        placed = existing_static_placement(src, obj.name)
        if placed is not None:
            return placed
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
                              weighted=weighted, recorded_size=recorded)
        if isinstance(result, (Patch, AlreadyPlaced)):
            return result
        if "not an array defined" not in result.reason or first_refusal is None:
            first_refusal = first_refusal if first_refusal is not None and \
                "not an array defined" not in first_refusal.reason else result
    # Defined in another file than the one touching it: place at the start of main.
    for path in defining:
        if path in tried:
            continue
        fresh = _resolve(path, paths, None, 0, "numactl", hashes)
        if isinstance(fresh, Refusal):
            return fresh
        result = place_static(path, obj.name, policy, root=root, weighted=weighted,
                              recorded_size=recorded)
        if isinstance(result, (Patch, AlreadyPlaced)):
            return result
        first_refusal = first_refusal or result
    if first_refusal is not None:
        return first_refusal
    if not c_paths:
        return Refusal("", 0, f"placement calls are only written into C and C++ sources, and "
                              f"the program's recorded sources are not (`{obj.name}`)",
                       "numactl")
    return Refusal(
        "", 0, f"no recorded C or C++ source defines the static array `{obj.name}`", "numactl",
        by_hand_words(place_text(obj.name, f"sizeof({obj.name})", const, weighted),
                      f"at the start of main(), where `{obj.name}` is the file-scope array"))
