"""One answer for a job of several processes (MPI ranks, each with its own profile
`prof.%r`): `numaprof suggest prof.*`.

Every rank is analysed and advised on its own (one at a time, so that memory holds one
rank's samples, not the job's); then, per object name, the policy most ranks chose is
the job's, ties going to the policy whose ranks hold more of the object's samples, then
to the name; the ranks that chose another are named with theirs, and the ranks where the
object is not hot are listed apart.  The representative rank is the one whose own
suggestion agrees with the job's answer on most of the samples (the first on a tie):
its lines to run and patches are the job's.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from numaprof.recommender.model import Suggestions


@dataclass
class JobObject:
    name: str
    policy: str  # the job's answer
    ranks: list[str]  # the ranks that chose it
    differ: list[tuple[str, str]] = field(default_factory=list)  # (rank, its policy)
    absent: list[str] = field(default_factory=list)  # ranks where the object is not hot
    share: float = 0.0  # mean share of the samples over the ranks where it is hot


@dataclass
class JobAnswer:
    ranks: list[str]
    objects: list[JobObject]
    representative: str
    agreement: float  # of the representative's hot samples, the share under the job's answer


def job_answer(per_rank: list[tuple[str, Suggestions]]) -> JobAnswer:
    """The job's answer from each rank's suggestions (``(rank label, suggestions)``, in
    rank order)."""
    ranks = [r for r, _ in per_rank]
    chosen: dict[str, dict[str, tuple[str, float]]] = {}  # object -> rank -> (policy, share)
    for rank, sug in per_rank:
        for o in sug.objects:
            chosen.setdefault(o.name, {})[rank] = (o.policy, float(o.share))
    objects = []
    for name, by_rank in chosen.items():
        votes = Counter(p for p, _ in by_rank.values())
        weight = Counter()
        for p, s in by_rank.values():
            weight[p] += s
        policy = min(votes, key=lambda p: (-votes[p], -weight[p], p))
        objects.append(JobObject(
            name, policy, [r for r in ranks if r in by_rank and by_rank[r][0] == policy],
            [(r, by_rank[r][0]) for r in ranks if r in by_rank and by_rank[r][0] != policy],
            [r for r in ranks if r not in by_rank],
            sum(s for _, s in by_rank.values()) / len(by_rank)))
    objects.sort(key=lambda o: (-len(o.ranks) - len(o.differ), -o.share, o.name))
    answer = {o.name: o.policy for o in objects}
    best, best_agree = ranks[0] if ranks else "", -1.0
    for rank, sug in per_rank:
        hot = sum(o.share for o in sug.objects)
        agree = sum(o.share for o in sug.objects if answer.get(o.name) == o.policy)
        frac = agree / hot if hot > 0 else 1.0
        if frac > best_agree:
            best, best_agree = rank, frac
    return JobAnswer(ranks, objects, best, max(best_agree, 0.0))


def render_lines(job: JobAnswer) -> list[str]:
    """The job's answer in words, one line per object."""
    n = len(job.ranks)
    out = [f"one answer for the job of {n} ranks (per object, the policy most ranks chose; "
           "the ranks that differ named):"]
    for o in job.objects:
        line = f"  {o.name}: {o.policy} ({len(o.ranks)} of {n} ranks"
        if o.differ:
            shown = ", ".join(f"{r}: {p}" for r, p in o.differ[:8])
            more = f" and {len(o.differ) - 8} more" if len(o.differ) > 8 else ""
            line += f"; {shown}{more}"
        if o.absent:
            line += f"; not hot in {len(o.absent)}: {', '.join(o.absent[:8])}" + (
                " …" if len(o.absent) > 8 else "")
        out.append(line + ")")
    out.append(f"representative rank: {job.representative} ({job.agreement:.0%} of its hot "
               "samples are on objects where it chose the job's policy): its suggestion "
               "follows, with the lines to run and the patches")
    return out


def to_json(job: JobAnswer) -> dict:
    return {"ranks": job.ranks, "representative": job.representative,
            "agreement": job.agreement,
            "objects": [{"name": o.name, "policy": o.policy, "ranks": o.ranks,
                         "differ": [{"rank": r, "policy": p} for r, p in o.differ],
                         "absent": o.absent, "share": o.share} for o in job.objects]}
