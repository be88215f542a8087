"""Source patches that apply a placement recommendation (docs/apply.md).

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

The modules: `edits` (Edit, Patch, Refusal, diffs, merging), `source` (the parsed file
and shared tree queries), `place` (placement calls), `loops_c` and `loops_fortran`
(parallel first touch), `sites` (from an analyzed object to the patch).
"""

from numaprof.recommender.patch.edits import (
    PATCH_KINDS,
    AlreadyPlaced,
    Edit,
    Patch,
    PatchInfo,
    Refusal,
    merge_patches,
    unified_diff,
)
from numaprof.recommender.patch.loops_c import C_PRAGMA
from numaprof.recommender.patch.loops_fortran import F_DIRECTIVE, F_END_DIRECTIVE
from numaprof.recommender.patch.place import (
    POLICY_CONSTANTS,
    place_after_allocation,
    policy_constant,
)
from numaprof.recommender.patch.place_static import place_static
from numaprof.recommender.patch.sites import (
    parallelize_first_touch,
    parse_site,
    patch_for_object,
    resolve_source,
    site_function,
)

__all__ = [
    "C_PRAGMA", "F_DIRECTIVE", "F_END_DIRECTIVE", "PATCH_KINDS", "POLICY_CONSTANTS",
    "AlreadyPlaced", "Edit", "Patch", "PatchInfo", "Refusal",
    "merge_patches", "parallelize_first_touch", "parse_site", "patch_for_object",
    "place_after_allocation", "place_static", "policy_constant", "resolve_source",
    "site_function", "unified_diff",
]
