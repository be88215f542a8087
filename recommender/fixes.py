"""Attach source patches to the recommender's suggestions (docs/apply.md).

A suggestion whose policy needs a code change gets the unified diff that applies it; when
the patch cannot be made safely (a first-touch loop that is not provably parallel, an
allocation the parser cannot place after), the reason is added and `parallel_init`
falls back to `bind_block` placement, as docs/apply.md says.
"""

from __future__ import annotations

from numaprof.analyzer.model import Analysis
from numaprof.errors import ProfileError
from numaprof.recommender.choose import code_change_note, weighted_note
from numaprof.recommender.model import Suggestions
from numaprof.recommender.patch import Patch, Refusal, merge_patches, patch_for_object
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


def attach_patches(s: Suggestions, analysis: Analysis, source_paths, root: str) -> list[Patch]:
    """Fills `patch` on each suggestion that needs code; returns the merged patches.

    A recorded file whose content changed since the recording (edited, or already
    patched by --apply) gets no patch: the reason says so, since its line numbers moved.
    """
    objects = {o.name: o for o in analysis.objects}
    hashes = _recorded_hashes(analysis)
    note_before = code_change_note(s.objects)
    patches: list[Patch] = []
    for sug in s.objects:
        obj = objects.get(sug.name)
        if obj is None or sug.policy == "first_touch" or sug.change != "patch":
            continue
        weighted = (sug.weighted_nodes, sug.weights) if sug.weights else None
        result = patch_for_object(obj, sug.policy, source_paths, root=root, hashes=hashes,
                                  weighted=weighted)
        if isinstance(result, Refusal) and sug.policy == "parallel_init":
            fallback = patch_for_object(obj, "bind_block", source_paths, root=root,
                                        hashes=hashes)
            if isinstance(fallback, Patch):
                sug.reason += (f" A parallel first-touch loop cannot be added safely "
                               f"({result.reason}); placing it with bind_block instead.")
                sug.policy = "bind_block"
                sug.predicted = sug.alternative("bind_block") or sug.predicted
                result = fallback
        if isinstance(result, Patch):
            sug.patch = result.diff
            patches.append(result)
        elif isinstance(result, Refusal):
            sug.reason += f" No source patch: {result.reason}."
            if sug.policy == "weighted_interleave":
                # the note's call, with its weights, is then to be added by hand
                command = analysis.profile.command
                old = weighted_note(sug, command, obj)
                sug.change = "code"
                s.notes = [weighted_note(sug, command, obj) if n == old else n
                           for n in s.notes]
    note_after = code_change_note(s.objects)
    if note_before != note_after:  # a fallback changed a policy: the note must say so
        s.notes = [note_after if n == note_before else n for n in s.notes]
    merged = merge_patches(patches, root=root) if patches else []
    return merged
