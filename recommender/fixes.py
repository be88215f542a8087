"""Attach source patches to the recommender's suggestions (SPEC §4.3).

A suggestion whose policy needs a code change gets the unified diff that applies it; when
the patch cannot be made safely (a first-touch loop that is not provably parallel, an
allocation the parser cannot place after), the reason is added and `parallel_init`
falls back to `bind_block` placement, as SPEC §4.3 (b) says.
"""

from __future__ import annotations

from numaprof.analyzer.model import Analysis
from numaprof.recommender.choose import code_change_note
from numaprof.recommender.model import Suggestions
from numaprof.recommender.patch import Patch, Refusal, merge_patches, patch_for_object


def attach_patches(s: Suggestions, analysis: Analysis, source_paths, root: str) -> list[Patch]:
    """Fills `patch` on each suggestion that needs code; returns the merged patches."""
    objects = {o.name: o for o in analysis.objects}
    note_before = code_change_note(s.objects)
    patches: list[Patch] = []
    for sug in s.objects:
        obj = objects.get(sug.name)
        if obj is None or sug.policy == "first_touch" or sug.change != "patch":
            continue
        result = patch_for_object(obj, sug.policy, source_paths, root=root)
        if isinstance(result, Refusal) and sug.policy == "parallel_init":
            fallback = patch_for_object(obj, "bind_block", source_paths, root=root)
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
    note_after = code_change_note(s.objects)
    if note_before != note_after:  # a fallback changed a policy: the note must say so
        s.notes = [note_after if n == note_before else n for n in s.notes]
    merged = merge_patches(patches, root=root) if patches else []
    return merged
