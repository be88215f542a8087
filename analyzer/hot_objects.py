"""The hot objects once the samples are attributed: names taken from the code that uses
them, blocks of one library object or one site told apart, the sites of one container
merged, samples named by code moved into the array of small blocks they fall among, file
data named (docs/analyzer.md, "Names")."""

from __future__ import annotations

import itertools
import os
import re

import numpy as np

from numaprof.analyzer import attribution as att
from numaprof.analyzer import srcnames, symbols, varattr
from numaprof.analyzer.archive import Archive
from numaprof.analyzer.objects import (
    NO_STACK,
    Obj,
    _assigned,
    _most_live,
    _source_line,
    _stack_frames,
    _summary_rows,
)
from numaprof.analyzer.profile import Profile
from numaprof.analyzer.sourcelang import site_language


def name_pointer_slots(objs: list[Obj], hot: list[int]) -> None:
    """A static pointer holding a heap array has the array's name (the allocation was
    assigned to it: `field = malloc(...)`): its own eight bytes are `field (pointer)`,
    as a pointer local's slot is, so that the variable and the array it points to never
    share a name (a suggestion for `field` is the array's)."""
    heap = {objs[oi].name for oi in hot if objs[oi].kind == "heap"}
    for oi in hot:
        o = objs[oi]
        if o.kind == "static" and o.size == 8 and o.name in heap:
            o.name += " (pointer)"


def tell_library_blocks_apart(objs: list[Obj], hot: list[int], resolver: symbols.CodeResolver,
                              prof: Profile) -> None:
    """The blocks a library allocates for one object of the user's (an Eigen
    ``SparseMatrix``'s values, inner indices and outer index) are all named after it
    (``Poisson::A``); each gets the library's own name for it: ``Poisson::A (newValues)``,
    ``Poisson::A (m_outerIndex)``.  That name is the innermost variable the library code
    on the allocation's call stack assigns the block to (srcnames.assigned_name on the
    header's line), passing over allocation helpers (a function that returns the block:
    ``aligned_malloc``'s ``result``), a constructor's member (the object constructed is
    named further out: ``scoped_array``'s ``m_ptr`` inside ``newValues(size)``) and lines
    that several of the program's names pass through (a dense vector's storage)."""
    frames = _stack_frames(prof)
    roots = [r for r in (str(prof.manifest.get("cwd") or ""), str(prof.path.parent)) if r]
    groups: dict[str, dict[int, Obj]] = {}
    for oi in hot:
        o = objs[oi]
        if o.kind == "heap" and o.name and o.stack != NO_STACK:
            groups.setdefault(o.name, {}).setdefault(o.stack, o)
    if not any(len(g) > 1 for g in groups.values()):
        return
    positions = {(name, st): _library_positions(resolver, o.pid, frames.get(st, []))
                 for name, g in groups.items() for st, o in g.items()}
    # a line that allocates for objects of different names is generic library code
    users: dict[tuple[str, int], set[str]] = {}
    for (name, _st), ps in positions.items():
        for p in ps:
            users.setdefault((p.file, p.line), set()).add(name)
    labels: dict[tuple[str, int], str] = {}
    for (name, st), ps in positions.items():
        if len(groups[name]) < 2:
            continue
        for p in ps:
            if len(users[(p.file, p.line)]) > 1:
                continue
            label = _library_variable(p, roots, resolver.archive)
            if label:
                labels[(name, st)] = label
                break
    for name, g in groups.items():
        mine = {st: labels.get((name, st)) for st in g}
        if len({v for v in mine.values() if v}) < 2:
            continue  # nothing told apart
        for oi in hot:
            o = objs[oi]
            if o.kind == "heap" and o.name == name and mine.get(o.stack):
                o.name = f"{name} ({mine[o.stack]})"


def tell_instances_apart(objs: list[Obj], hot: list[int], resolver: symbols.CodeResolver,
                         prof: Profile) -> None:
    """A member a constructor allocates is ``Class::member`` (``miniFE::Vector<…>::coefs``,
    set by ``coefs(local_size)``).  When several objects of the class are built in
    different places (miniFE's ``r``, ``p`` and ``Ap`` in cg_solve, ``x`` and ``b`` in
    the driver), they are several arrays of that one name: each is named after the object
    its constructor's caller constructs, ``r.coefs`` (``p->coefs`` for ``new``), its site
    that line.  Only when every one of them is told apart so, by different names; a class
    built in one place keeps ``Class::member``."""
    frames = _stack_frames(prof)
    roots = [r for r in (str(prof.manifest.get("cwd") or ""), str(prof.path.parent)) if r]
    groups: dict[str, list[Obj]] = {}
    for oi in hot:
        o = objs[oi]
        if o.kind == "heap" and "::" in o.name and o.stack != NO_STACK and not o.part:
            groups.setdefault(o.name, []).append(o)
    for name, group in groups.items():
        if len({o.stack for o in group}) < 2:
            continue
        member = name.rpartition("::")[2]
        owners = [_constructed_by_caller(o, frames.get(o.stack, []), resolver, roots) for o in group]
        if None in owners or len({owner[0] for owner in owners}) < len(group):
            continue  # not every one told apart
        for o, ((var, arrow), site) in zip(group, owners, strict=True):
            o.name, o.site = f"{var}{arrow}{member}", site


def merge_container_sites(objs: list[Obj], hot: list[int], counts: np.ndarray, a_obj: np.ndarray,
                          ivs: att.Intervals, resolver: symbols.CodeResolver, prof: Profile) -> list[int]:
    """One container filled from several lines of one function is one array: a
    ``std::set`` inserted into from three loops of a constructor (miniFE's ``bc_rows``),
    a ``std::vector`` grown by ``push_back`` in two branches.  Its small blocks, known from
    a sample of them, come from call stacks with the same callers and the same function
    at the allocation site, at different lines of it (what lies inside the call, the
    library's code, may differ: one insertion inlined, another not), and each site is
    named after the same variable; they were several objects of one name, each with a
    part of the samples and of the size.  Such sites become one object: their samples and
    blocks, the sum of their allocations, their size the most bytes they had live at once;
    the site is the one with the most samples.  Exactly recorded allocations keep their
    sites (a placement is patched at each).  ``counts``: samples per object; ``a_obj``
    and ``ivs.obj`` are updated in place; returns the objects that took others in."""
    frames = _stack_frames(prof)
    groups: dict[tuple, list[int]] = {}
    for oi in hot:
        o = objs[oi]
        if o.kind != "heap" or not o.sample_period or o.stack == NO_STACK or o.part or not o.name:
            continue
        at = _site_frame(resolver, o.pid, frames.get(o.stack, []))
        if at is not None:
            k, function = at
            # a local variable of the allocating function is one array whoever called it
            # (SNAP's dim3_sweep, whose automatic arrays the master thread and the others
            # allocate through different lines of their callers)
            callers = (o.site,) if o.site_local else tuple(frames[o.stack][k + 1:])
            groups.setdefault((o.pid, o.name, function, callers), []).append(oi)
    merged = []
    for members in groups.values():
        if len(members) < 2 or (len({objs[k].site for k in members}) < 2
                                and not all(objs[k].site_local for k in members)):
            continue
        members.sort(key=lambda k: (-int(counts[k]), k))
        rep = objs[members[0]]
        for k in members[1:]:
            o = objs[k]
            a_obj[a_obj == k] = members[0]
            ivs.obj[ivs.obj == k] = members[0]
            rep.count += o.count
            rep.alloc_rows = (rep.alloc_rows or []) + (o.alloc_rows or [])
            rep.sample_period = max(rep.sample_period, o.sample_period)
            if o.iv_instance:
                rep.iv_instance = {**(rep.iv_instance or {}), **o.iv_instance}
            if o.iv_border:
                rep.iv_border = {**(rep.iv_border or {}), **o.iv_border}
            o.count, o.alloc_rows, o.iv_instance, o.iv_border = 0, [], None, None
        rep.size = max(rep.size, _live_of_rows(prof.table("objects"), rep.alloc_rows))
        merged.append(members[0])
    return merged


def _site_frame(resolver: symbols.CodeResolver, pid: int, ips: list[int]) -> tuple[int, str] | None:
    """(position, function) of the allocation site's frame in a call stack (innermost
    first): the first return address at a line of the program's own sources."""
    for k, ip in enumerate(ips):
        sl = resolver.resolve(pid, ip, return_address=True)
        if sl is not None and sl.line > 0 and not symbols.is_system_source(sl.file):
            return k, sl.function
    return None


def _live_of_rows(ot: dict, rows: list[int]) -> int:
    """The most bytes the allocations ``rows`` of the objects table had live at once, a
    sampled one standing for a sampling period of bytes (_estimate_sampled_sites)."""
    rows = np.asarray(sorted(rows), dtype=np.int64)
    rows = rows[~_summary_rows(ot, len(ot["addr"]))[rows]]
    if not len(rows):
        return 0
    size = np.asarray(ot["size"]).astype(np.int64)[rows]
    period = np.asarray(ot["sample_period"]).astype(np.int64)[rows]
    t0 = np.asarray(ot["time"]).astype(np.uint64)[rows]
    ft = np.asarray(ot["free_time"]).astype(np.uint64)[rows]
    weight = np.where(period > 0, np.maximum(period, size), size)
    return _most_live(weight, t0, np.where(ft > 0, ft, att.NEVER))


def _constructed_by_caller(o: Obj, ips: list[int], resolver: symbols.CodeResolver,
                           roots: list[str]):
    """((variable, "." or "->"), site) of the object whose constructor allocated ``o``:
    the variable its caller's line declares or assigns (``VectorType r(b.startIndex,
    nrows);``, ``p = new Grid(n);``); None when the allocating frame is not a constructor
    or the caller's line names nothing."""
    frames = itertools.islice(resolver.user_frames(o.pid, ips), 0, 5)
    ctor, caller = next(frames, None), next(frames, None)
    while ctor is not None and caller is not None and _is_constructor(caller.function) \
            and _class_of(caller.function) == _class_of(ctor.function):
        # a delegating constructor (`pvector(n, v) : pvector(n)`) builds the same object
        ctor, caller = caller, next(frames, None)
    if ctor is None or caller is None or not _is_constructor(ctor.function) \
            or _is_constructor(caller.function):
        return None
    var, at = _assigned(caller, roots, resolver.archive)
    if not var or at is None or not _PLAIN_NAME.match(var):
        return None
    made_by_new = re.search(r"\bnew\b", _source_line(at[0], caller.line))
    return (var, "->" if made_by_new else "."), caller.site


_PLAIN_NAME = re.compile(r"^[A-Za-z_]\w*(?:(?:\.|->)[A-Za-z_]\w*)*$")


def _library_positions(resolver: symbols.CodeResolver, pid: int, ips: list[int]) -> list[symbols.SourceLine]:
    """The positions in system headers (library code compiled into the program: an Eigen
    container's, the C++ library's) an allocation call stack passes through before the
    user's first line, innermost first.  Frames without a line table (libc's malloc) have
    none."""
    out: list[symbols.SourceLine] = []
    for ip in ips:
        found = resolver.elf_address(pid, ip - 1)
        for p in found[0].inline_positions(found[1]) if found is not None else []:
            if p.line > 0 and not symbols.is_system_source(p.file):
                return out
            if p.line > 0:
                out.append(p)
    return out


def _library_variable(p: symbols.SourceLine, roots: list[str], archive: Archive) -> str | None:
    src = srcnames.find_source(p.file, roots, archive)
    if src is None:
        return None
    lang = site_language(p.file, p.function)  # a C++ header named .h (Eigen's)
    name = srcnames.assigned_name(str(src), p.line, p.column, lang, archive=archive)
    if not name or _is_constructor(p.function) and "." not in name and "->" not in name:
        return None
    if srcnames.returns_allocation(str(src), p.line, name, lang, archive):
        return None
    return name


def _is_constructor(function: str) -> bool:
    """``ns::X<T>::X(args)``: the last two components of the qualified name agree."""
    bare = _name_parts(function)
    return len(bare) >= 2 and bare[-1] == bare[-2] and bool(bare[-1])


def _class_of(function: str) -> tuple[str, ...]:
    """The class (and namespaces) of a member function, template arguments left out:
    ``pvector<int>::pvector(unsigned long)`` → ``("pvector",)``."""
    return tuple(_name_parts(function)[:-1])


def _name_parts(function: str) -> list[str]:
    """The components of a function's qualified name, template arguments left out."""
    head = function.split("(", 1)[0]
    depth, parts, cur = 0, [], ""
    for ch in head:
        depth += ch == "<"
        depth -= ch == ">"
        if depth == 0 and ch == ":" and cur.endswith(":"):
            parts.append(cur[:-1])
            cur = ""
            continue
        cur += ch
    parts.append(cur)
    return [x.split("<", 1)[0].strip() for x in parts]


#: A data mapping of an ELF file is named by the section holding this share of its samples.
SECTION_NAME_SHARE = 0.8


def name_file_data(objs: list[Obj], hot: list[int], a_obj: np.ndarray, a_pid: np.ndarray,
                   a_addr: np.ndarray, a_ip: np.ndarray, resolver: symbols.CodeResolver) -> None:
    """A writable mapping of an ELF file (the data segment of a library or of the program)
    whose samples fall at no symbol is named by the section most of them are in, its
    site the function that accessed it most: `libc.so.6 .data` read by
    `__libc_calloc@libc.so.6` (the allocator's own state), `prog .got.plt` by
    `PLT@prog` (calls into shared libraries), instead of `libc.so.6@0x7f…`.  The name
    has no address, so the same data of several processes or slices is one object."""
    for oi in hot:
        o = objs[oi]
        if o.kind != "mapping" or not o.path.startswith("/"):
            continue
        rows = np.flatnonzero(a_obj == oi)
        if not len(rows):
            continue
        pid = int(a_pid[rows[0]])
        places: dict[str, int] = {}
        for a, n in zip(*np.unique(a_addr[rows], return_counts=True), strict=True):
            found = resolver.elf_address(pid, int(a))
            sec = found[0].section_at(found[1]) if found is not None else None
            key = sec[0] if sec is not None else ""
            places[key] = places.get(key, 0) + int(n)
        section, n = max(places.items(), key=lambda kv: kv[1])
        if not section or n < SECTION_NAME_SHARE * len(rows):
            continue
        base = os.path.basename(o.path)
        o.name = f"{base} {section}"
        ips, counts = np.unique(a_ip[rows], return_counts=True)
        o.site = code_of(resolver, pid, int(ips[int(np.argmax(counts))])) or o.path


def code_of(resolver: symbols.CodeResolver, pid: int, ip: int) -> str | None:
    """`function@file` of a code address (`PLT@file` for a stub of the PLT), or None."""
    found = resolver.elf_address(pid, ip & 0xFFFFFFFFFFFFFFFF)
    m = resolver.mappings.find(pid, ip & 0xFFFFFFFFFFFFFFFF)
    if found is None or m is None:
        return None
    info, vaddr = found
    sec = info.section_at(vaddr)
    func = "PLT" if sec is not None and sec[0].startswith(".plt") else info.function_at(vaddr)
    return f"{func}@{os.path.basename(m[3])}" if func else None


def merge_into_sites(objs: list[Obj], hot: list[int], a_obj: np.ndarray, a_pid: np.ndarray,
                      a_addr: np.ndarray, ivs: att.Intervals) -> bool:
    """Samples named by code (a register's or a type's variable, analyzer/varattr.py) that
    fell between the sampled blocks of an array of small allocations go to that array:
    `u[][]` read in a loop is `lv->u[][]` allocated row by row, when exactly one such
    array has that name's leaf and depth; and a sample whose address lies in the stretch
    of heap where exactly one such array's blocks were laid out (its blocks and the gaps
    between them, SITE_STRETCH_GAP apart at most) goes to it (`Entry`, the element type
    of `m_rows[i].push_back(e)`), unless its name is such an array's at another depth
    (`lv->u[]`, the row pointers allocated between the rows), or the array has no
    variable's name (its site is its name).  Samples named after the call that returned
    their block (varattr: a compiler temporary) go to the sampled array of the same name
    and site.  Returns whether any moved."""
    sites: dict[tuple, list[int]] = {}
    named_sites: dict[tuple[str, str], list[int]] = {}  # (name, site) -> sampled arrays
    stretches = []  # (pid, lo, hi, object)
    for oi in hot:
        o = objs[oi]
        if o.kind != "heap" or not o.sample_period:
            continue
        key = varattr.alias_key(o.name)
        if key is not None:
            sites.setdefault(key, []).append(oi)
        named_sites.setdefault((o.name, o.site), []).append(oi)
        if o.name != o.site:
            # (a site the allocation's line names no variable for, a library's buffers
            # allocated from the program's I/O statement (gfortran's OPEN), takes in no
            # array the code names: the name is the better evidence)
            stretches += _stretches(o, oi, ivs)
    moved = False
    for oi in hot:
        o = objs[oi]
        if o.attribution not in (varattr.REGISTER, varattr.TYPE) or o.thread_private:
            continue
        key = varattr.alias_key(o.name)
        target = sites.get(key or ("", -1), [])
        if len(target) != 1:
            # the blocks a call returned, named as that call's sampled blocks are (a
            # compiler temporary's statement): the same site
            target = named_sites.get((o.name, o.site), [])
        if len(target) == 1:
            a_obj[a_obj == oi] = target[0]
            moved = True
            continue
        if key is not None and any(k[0] == key[0] for k in sites):
            continue  # another depth of such an array's name: its row pointers (`u[]`)
        mine = np.flatnonzero(a_obj == oi)
        to = np.full(len(mine), -1, dtype=np.int64)
        for pid, lo, hi, site in stretches:
            if objs[site].site_local and o.attribution == varattr.REGISTER and \
                    _function_of(o.site) == _function_of(objs[site].site):
                continue  # another local of the function allocating it: another array
            if o.name != objs[site].name and o.name in objs[site].line_names:
                continue  # another array of its allocation statement: `w` beside `flux`
            inside = (a_pid[mine] == pid) & (a_addr[mine] >= lo) & (a_addr[mine] < hi)
            to[inside] = np.where(to[inside] < 0, site, -2)  # -2: in two arrays' stretches
        keep = to >= 0
        if keep.any():
            a_obj[mine[keep]] = to[keep]
            moved = True
    return moved


#: Sampled blocks of an array of small allocations this far apart at most (in sampling
#: periods of bytes) are taken as one stretch of heap holding it, for samples that code
#: attribution names: wider than the fills' FILL_GAP_PERIODS, as a code-named sample
#: there is evidence of its own.  The address gap between two sampled blocks that stay
#: is a sum of countdowns when short-lived blocks were sampled in between (a std::vector
#: grown by push_back): 4 periods are passed a few times in a 66 MiB array.
SITE_STRETCH_GAP = 16
#: ... and reaching this many sampling periods past its first and last sampled blocks:
#: the blocks before the first one sampled (the countdown to it is about a period of
#: bytes, more than that in few runs) and after the last (a tree's first and last nodes).
SITE_STRETCH_ENDS = 4


def _function_of(site: str) -> str:
    return site.rpartition("@")[0]


def _stretches(o: Obj, oi: int, ivs: att.Intervals) -> list[tuple[int, int, int, int]]:
    """(pid, lo, hi, oi): the stretches of heap where the sampled site ``o`` laid out its
    blocks (its intervals in address order, merged across gaps of up to SITE_STRETCH_GAP
    sampling periods, SITE_STRETCH_ENDS more at each end)."""
    rows = np.fromiter((o.iv_instance or {}).keys(), dtype=np.int64)
    rows = rows[rows < len(ivs.start)]
    out = []
    for pid in np.unique(ivs.pid[rows]).tolist():
        r = rows[ivs.pid[rows] == pid]
        r = r[np.argsort(ivs.start[r], kind="stable")]
        st, en = ivs.start[r].astype(np.int64), ivs.end[r].astype(np.int64)
        reach = np.maximum.accumulate(en)
        breaks = np.flatnonzero(st[1:] - reach[:-1] > SITE_STRETCH_GAP * o.sample_period) + 1
        for a, b in zip(np.r_[0, breaks].tolist(), np.r_[breaks, len(r)].tolist(), strict=True):
            ends = SITE_STRETCH_ENDS * o.sample_period
            out.append((int(pid), max(int(st[a]) - ends, 0), int(reach[b - 1]) + ends, oi))
    return out
