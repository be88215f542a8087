"""Attach source patches to the recommender's suggestions (docs/apply.md).

A suggestion whose policy needs a code change gets the unified diff that applies it, and
a `Fix` that says which kind of patch it is, what its names denote where it goes, what
size it places against the size the profile recorded, and how it compiled with the
program's own flags (recommender/patch/compile.py): a patch that does not compile
cleanly is not offered.  When no patch can be made safely (a first-touch loop that is
not provably parallel, an allocation the parser cannot place after), the reason is added
and `parallel_init` falls back to `bind_block` placement.  A placement the source
already has, or one the kernel reports already in effect on the object's pages (its
memory policy at release or exit), is reported as "already placed", never written twice.
"""

from __future__ import annotations

import os

from numaprof.analyzer.model import PAGES_SOURCES, PLACING_POLICIES, Analysis
from numaprof.errors import ProfileError
from numaprof.recommender.choose import code_change_note, replicate_words, weighted_note
from numaprof.recommender.model import Fix, SharingFix, Suggestions
from numaprof.recommender.patch import (
    AlreadyPlaced,
    Patch,
    Refusal,
    patch_for_object,
    policy_constant,
)
from numaprof.recommender.sources import read_sources_json


def _recorded_hashes(analysis: Analysis) -> dict[str, str] | None:
    """The profile's path -> sha256 map (sources.json), or None when it has none."""
    profile = getattr(getattr(analysis, "profile", None), "path", None)
    if not profile:
        return None
    try:
        return read_sources_json(profile)
    except ProfileError:
        return None


def _size_check(info) -> str:
    if not info.size:
        return ""
    if info.size_bytes is not None and info.recorded_bytes is not None:
        return (f"size `{info.size}` = {info.size_bytes} bytes, the {info.recorded_bytes} the "
                "profile recorded")
    if info.size_bytes is not None:
        return f"size `{info.size}` = {info.size_bytes} bytes"
    if info.kind in ("place_vector",) or ".data()" in info.target:
        return f"size `{info.size}`: the vector's own length at run time"
    return f"size `{info.size}`: the allocation's own byte count, evaluated at run time"


def _fix_of(name: str, patch: Patch, check) -> Fix:
    info = patch.info
    checks = [info.scope] if info is not None and info.scope else []
    size = _size_check(info) if info is not None else ""
    if size:
        if check is not None and check.size_confirmed and check.status == "clean":
            size += f", confirmed by {check.compiler} at that point"
        checks.append(size)
    if check is not None:
        checks.append(check.detail)
    return Fix(object=name, status="offered", kind=info.kind if info else "",
               statement=info.statement if info else "", where=info.where if info else "",
               target=info.target if info else "", size=info.size if info else "",
               size_bytes=info.size_bytes if info else None,
               recorded_bytes=info.recorded_bytes if info else None,
               compile=check.status if check is not None else "",
               compiler=check.compiler if check is not None else "", checks=checks)


def fix_words(fix: Fix) -> str:
    """One sentence: the patch kind and how it was checked."""
    if fix.status != "offered":
        return ""
    parts = []
    if fix.size_bytes is not None and fix.recorded_bytes is not None:
        parts.append(f"size {fix.size_bytes} bytes as recorded")
    if fix.compile == "clean":
        parts.append(f"compiled cleanly with {fix.compiler} and the program's flags")
    elif fix.compile == "not checked":
        why = next((c for c in fix.checks if c.startswith("not compile-checked")), "")
        parts.append(why or "not compile-checked")
    scope_ok = {"parallel_first_touch": "loop proved safe in its scope",
                "pad_slots": "every use an element, resolved in scope",
                "reduction": "every use in the construct an update, resolved in scope",
                "replicate": "every use in one function, none a write after the copy",
                "page_chunks": "the loop's literal chunk, element size resolved in scope"}.get(
        fix.kind, "names resolved in scope")
    return f"Patch: {fix.kind} ({'; '.join([scope_ok, *parts])})."


def attach_patches(s: Suggestions, analysis: Analysis, source_paths, root: str,
                   build=None) -> list[Patch]:
    """Fills `patch` and `fix` on each suggestion that needs code; returns the patches,
    one per object (apply.apply merges those of one file).

    A recorded file whose content changed since the recording (edited, or already
    patched by --apply) gets no patch: the reason says so, since its line numbers moved.
    `build` (recommender.patch.compile.BuildInfo) compiles every patch before it is
    offered; None skips that check (the fix then says it was not compile-checked).
    """
    objects: dict = {}
    for o in analysis.objects:  # by samples: a name's suggestion is its most sampled object's
        objects.setdefault(o.name, o)
    hashes = _recorded_hashes(analysis)
    source_paths = list(source_paths)
    note_before = code_change_note(s.objects)
    patches: list[Patch] = []
    offered: dict[str, tuple] = {}  # object name -> (suggestion, patch)
    for sug in s.objects:
        obj = objects.get(sug.name)
        if obj is not None and sug.replicate is not None and \
                _replicated(sug, obj, source_paths, root, hashes, build, patches, offered):
            continue
        if obj is None or sug.policy == "first_touch" or sug.change != "patch":
            continue
        weighted = (sug.weighted_nodes, sug.weights) if sug.weights else None
        result, check = _checked(obj, sug.policy, source_paths, root, hashes, weighted, build)
        if not isinstance(result, (Patch, AlreadyPlaced)) and sug.policy == "parallel_init":
            fallback, fcheck = _checked(obj, "bind_block", source_paths, root, hashes, None,
                                        build)
            if isinstance(fallback, (Patch, AlreadyPlaced)):
                sug.reason += (f" A parallel first-touch loop cannot be added safely "
                               f"({result.reason}); placing it with bind_block instead.")
                sug.ties = [p for p in ["parallel_init", *sug.ties] if p != "bind_block"] \
                    if "bind_block" in sug.ties else sug.ties
                sug.policy = "bind_block"
                sug.predicted = sug.alternative("bind_block") or sug.predicted
                sug.alternatives = _chosen_first(sug.alternatives, "bind_block")
                result, check = fallback, fcheck
            elif isinstance(fallback, Refusal) and fallback.reason != result.reason:
                sug.reason += (f" A parallel first-touch loop cannot be added safely "
                               f"({result.reason}).")
                result = fallback
        if not isinstance(result, AlreadyPlaced) and _in_effect(sug.policy, obj):
            _already_in_effect(sug, obj)
            continue
        if getattr(obj, "pages_policy", "") in PLACING_POLICIES:
            sug.reason += (f" Its pages have a {_policy_words(obj)} memory policy now "
                           f"({PAGES_SOURCES.get(obj.pages_source, obj.pages_source)}); "
                           f"the placement replaces it.")
        if isinstance(result, Patch):
            sug.patch = result.diff
            sug.fix = _fix_of(sug.name, result, check)
            sug.reason += " " + fix_words(sug.fix)
            patches.append(result)
            offered[sug.name] = (sug, result)
        elif isinstance(result, AlreadyPlaced):
            _already_placed(sug, result)
        elif isinstance(result, Refusal):
            sug.reason += f" No source patch: {result.reason}."
            sug.fix = Fix(object=sug.name, status="refused", by_hand=result.by_hand,
                          compile=check.status if check is not None else "",
                          compiler=check.compiler if check is not None else "",
                          checks=[check.detail] if check is not None else [])
            if result.by_hand:
                sug.reason += f" To add by hand: {result.by_hand}."
            if obj.kind not in ("heap", "static"):
                sug.change = "code"  # no source numaprof could patch: by hand or numactl
            if sug.policy == "weighted_interleave":
                # the note's call, with its weights, is then to be added by hand
                command = analysis.profile.command
                old = weighted_note(sug, command, obj)
                sug.change = "code"
                s.notes = [weighted_note(sug, command, obj) if n == old else n
                           for n in s.notes]
    _sharing_fixes(s, analysis, objects, source_paths, root, hashes, build, patches, offered)
    if build is not None:
        patches = _check_together(s, patches, offered, build)
    note_after = code_change_note(s.objects)
    if note_before != note_after:  # a fallback changed a policy: the note must say so
        s.notes = [note_after if n == note_before else n for n in s.notes]
    return patches


def _compiled(result, build):
    """(result, CheckResult or None): a patch compiled with the program's flags when
    `build` is known; one that fails becomes a Refusal with the compiler's reason."""
    if not isinstance(result, Patch) or build is None:
        return result, None
    from numaprof.recommender.patch.compile import check_patches

    check = check_patches(build, [result])
    if check.status == "failed":
        result = Refusal(result.path, 0, f"the patch was not offered: {check.detail}", "")
    return result, check


def _replicated(sug, obj, paths, root, hashes, build, patches: list, offered: dict) -> bool:
    """A copy per node (predicted better than any placement, choose.py) when the patch can
    be made (recommender/patch/replicate.py) and compiles: the suggestion becomes
    replicate, with that patch.  Otherwise False, and why is kept for the reason."""
    from numaprof.recommender.patch.sites import replicate_for_object

    result = replicate_for_object(obj, paths, root, hashes)
    result, check = _compiled(result, build)
    if not isinstance(result, Patch):
        sug.replicate_refused = result.reason
        return False
    rep = sug.replicate
    sug.reason += (f" Replicated instead: {replicate_words(sug.name, sug.size, rep, sug.predicted)}"
                   f"; the patch makes the copies and reads them ({result.info.scope}).")
    sug.policy, sug.predicted, sug.change = "replicate", rep, "patch"
    sug.weighted_nodes, sug.weights = [], []  # the weighted placement it replaces, if that was it
    sug.alternatives = _chosen_first(sug.alternatives, "replicate")
    sug.replicate = None
    sug.patch = result.diff
    sug.fix = _fix_of(sug.name, result, check)
    sug.reason += " " + fix_words(sug.fix)
    patches.append(result)
    offered[sug.name] = (sug, result)
    return True


def _sharing_fixes(s: Suggestions, analysis: Analysis, objects: dict, paths, root, hashes,
                   build, patches: list, offered: dict) -> None:
    """A patch for each falsely shared static array (per-thread slots on one line): a
    line per element (recommender/patch/pad.py); for each truly shared accumulator (a
    static or a local): a reduction clause (recommender/patch/reduce.py); for pages
    several threads write: whole pages per chunk of the loop (recommender/patch/chunk.py);
    compiled like the placements."""
    from numaprof.recommender.patch.sites import (
        pad_for_object,
        page_chunks_for_object,
        reduce_for_object,
    )

    for f in getattr(analysis, "sharing", []):
        obj = objects.get(f.object)
        if obj is None:
            continue
        if f.kind == "false" and obj.kind == "static":
            kind = "pad_slots"
            result = pad_for_object(obj, paths, root, hashes)
        elif f.kind == "true" and obj.kind in ("static", "stack"):
            kind = "reduction"
            result = reduce_for_object(obj, f.sources, paths, root, hashes)
        elif f.kind == "page":
            kind = "page_chunks"
            result = page_chunks_for_object(obj, f.sources, paths, root, hashes)
        else:
            continue
        result, check = _compiled(result, build)
        fix = SharingFix(f.object, f.kind, f"{f.object}: {f.fix}.")
        if isinstance(result, Patch):
            fix.patch = result.diff
            fix.fix = _fix_of(f.object, result, check)
            fix.reason += " " + fix_words(fix.fix)
            patches.append(result)
            offered[f"sharing:{f.object}"] = (fix, result)
        else:
            fix.fix = Fix(object=f.object, status="refused", kind=kind,
                          by_hand=getattr(result, "by_hand", ""))
            fix.reason += f" No source patch: {result.reason}."
        s.sharing_fixes.append(fix)


def _chosen_first(alternatives, policy: str):
    return sorted(alternatives, key=lambda a: a.policy != policy)


def _checked(obj, policy, paths, root, hashes, weighted, build):
    """patch_for_object, then the compile check of a patch: a patch that fails it becomes
    a Refusal with the compiler's reason.  Returns (result, CheckResult or None)."""
    result = patch_for_object(obj, policy, paths, root=root, hashes=hashes, weighted=weighted)
    if not isinstance(result, Patch) or build is None:
        return result, None
    from numaprof.recommender.patch.compile import check_patches

    check = check_patches(build, [result])
    if check.status == "failed":
        info = result.info
        by_hand = ""
        if info is not None and info.kind != "parallel_first_touch":
            by_hand = (f"{info.statement} next to {info.where}, once the reason is dealt with")
        return Refusal(result.path, 0, f"the patch was not offered: {check.detail}",
                       "numactl", by_hand), check
    return result, check


# Placements numaprof_place makes by preferring a node per range of pages: one node for
# the whole object (bind_all) or one per block or page (the others); a kernel interleave
# (numactl --interleave, mbind) is the same placement as cyclic.
_SPREAD = ("bind_block", "cyclic", "cyclic_block", "skew_mapp", "prime_mapp", "random",
           "random_block")


def _in_effect(policy: str, obj) -> bool:
    """Whether the memory policy the kernel reported on the object's pages is already the
    placement `policy` makes."""
    mode = getattr(obj, "pages_policy", "")
    mixed = getattr(obj, "pages_policy_mixed", False)
    if mode not in PLACING_POLICIES:
        return False
    if policy == "bind_all":
        return mode in ("preferred", "bind") and not mixed
    if policy == "weighted_interleave":
        return mode == "weighted_interleave" or (mode == "preferred" and mixed)
    if policy == "cyclic" and mode == "interleave":
        return True
    return policy in _SPREAD and mode == "preferred" and mixed


def _policy_words(obj) -> str:
    return obj.pages_policy + (" (not the same node throughout)" if obj.pages_policy_mixed else "")


def _already_in_effect(sug, obj) -> None:
    where = PAGES_SOURCES.get(obj.pages_source, obj.pages_source)
    seen = (f"the kernel reports a {_policy_words(obj)} memory policy on its pages "
            f"({where}), the placement {sug.policy} makes")
    sug.reason += (f" Already placed: {seen}; no patch is written (the placement is made "
                   f"outside the recorded sources, or by numactl).")
    sug.fix = Fix(object=sug.name, status="already placed", checks=[seen])


def _already_placed(sug, found: AlreadyPlaced) -> None:
    wanted = policy_constant(sug.policy)
    if not found.constant or found.constant == wanted:
        sug.reason += (f" Already placed: `{found.statement}` at {found.where} applies "
                       f"{sug.policy}; no second copy is written.")
        by_hand = ""
    else:
        sug.reason += (f" Already placed with {found.constant} by `{found.statement}` at "
                       f"{found.where}; no second call is written (the two would fight): to use "
                       f"{sug.policy}, change {found.constant} to {wanted} there.")
        by_hand = f"change {found.constant} to {wanted} in `{found.statement}` at {found.where}"
    sug.fix = Fix(object=sug.name, status="already placed", statement=found.statement,
                  where=found.where, by_hand=by_hand,
                  checks=[f"found `{found.statement}` at {found.where}"])


def _check_together(s: Suggestions, patches: list[Patch], offered: dict, build) -> list[Patch]:
    """A file with several objects' patches is compiled once more with all of them; if
    that fails (two insertions that clash), none of that file's patches is offered."""
    from numaprof.recommender.patch.compile import check_patches

    by_file: dict[str, list[Patch]] = {}
    for p in patches:
        by_file.setdefault(os.path.realpath(p.path), []).append(p)
    keep = []
    for group in by_file.values():
        if len(group) > 1:
            check = check_patches(build, group)
            if check.status == "failed":
                for sug, p in offered.values():
                    if p in group:
                        sug.patch = None
                        sug.fix.status = "refused"
                        sug.fix.compile = "failed"
                        sug.fix.checks.append(check.detail)
                        sug.reason += (f" The patches to {os.path.basename(p.path)} together "
                                       f"were not offered: {check.detail}.")
                continue
        keep += group
    return keep
