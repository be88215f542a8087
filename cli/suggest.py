"""`numaprof suggest`: a placement policy per array, with the what-if table and the lines to run."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from numaprof.cli.options import (
    DEFAULT_PROFILE,
    SuggestConfig,
    object_option,
    target_option,
    top_option,
)
from numaprof.cli.render import clean, progress_callback


@click.command()
@click.argument("profiles", nargs=-1, type=click.Path(path_type=Path))
@target_option
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="Output format (json: the numaprof.suggest/1 schema).")
@top_option
@object_option
@click.option("--apply", "do_apply", is_flag=True,
              help="Apply the source patches (all or none; originals kept for --revert).")
@click.option("--dry-run", is_flag=True, help="Show the patches as one diff; change nothing.")
@click.option("--revert", is_flag=True, help="Restore the files the last --apply changed.")
@click.option("--verify", is_flag=True,
              help="Apply the patches to a scratch copy of this tree, rebuild it with --build, "
                   "run it in the NUMA lab with the target's nodes and the suggested binding, "
                   "and print per object the predicted against the measured placement.")
@click.option("--build", "build", default=None, metavar="CMD",
              help="--verify: the shell command that rebuilds the program in the copy "
                   "(CFLAGS etc. get `numaprof config --cflags`); default: the compile "
                   "lines the binary recorded.")
@click.option("--verify-timeout", type=float, default=1800.0, show_default=True, metavar="S",
              help="--verify: kill the lab guest after S seconds.")
def command(profiles, target, fmt, top, object_name, do_apply, dry_run, revert, verify, build,
            verify_timeout):
    """Suggest a placement policy for each hot array of PROFILE (default ./numaprof.data).

    Every candidate policy is simulated on the measured accesses (which thread touched
    which page, where the threads ran) and scored with the NUMA factor and the per-node
    load; the cheapest wins, ties going to the simplest change.  --target evaluates the
    same profile for another machine (a preset or an hwloc XML file).  Several profiles
    (MPI ranks: prof.*) give one answer for the job, the ranks that differ named.
    """
    from numaprof.cli.loading import analyze_path as analyze
    from numaprof.cli.render import json_suggest, text_suggest
    from numaprof.recommender.advice import advise

    if len(profiles) > 1:
        if do_apply or dry_run or revert or verify:
            from numaprof.errors import UsageError

            raise UsageError("--apply, --dry-run, --revert and --verify take one profile: give "
                             "the representative rank's (`numaprof suggest` over all of them "
                             "names it)")
        _job(list(profiles), target, fmt, top, object_name)
        return
    profile = profiles[0] if profiles else Path(DEFAULT_PROFILE)

    if revert:
        from numaprof.recommender.apply import revert_profile

        restored = revert_profile(profile)
        if restored:
            click.echo(f"numaprof: restored {len(restored)} file(s): "
                       + clean(", ".join(restored)), err=True)
        else:
            click.echo("numaprof: every file was already back to its original; numaprof's "
                       "apply state is removed", err=True)
        return
    cfg = SuggestConfig(profile=profile, target=target, format=fmt, top=top,
                        object_name=object_name)
    with progress_callback(enabled=cfg.format == "text") as progress:
        # every object, whatever --object shows: the thread binding, numactl's reach and
        # the choices depend on all the hot objects together
        analysis = analyze(cfg.profile, progress=progress)
    advice = advise(analysis, cfg.profile, cfg.target)
    result, patches = advice.suggestions, advice.patches
    if cfg.object_name is not None:
        result, patches = _only(result, patches, analysis, cfg.object_name)
    if dry_run or do_apply:
        _apply(cfg.profile, patches, result, dry_run=dry_run)
        return
    if verify:
        _verify(analysis, advice, cfg, build, verify_timeout)
        return
    if cfg.format == "json":
        sys.stdout.write(json_suggest.dumps(json_suggest.suggestion(result, analysis,
                                                                   top=cfg.top)))
    else:
        text_suggest.render(result, analysis, top=cfg.top)


def _job(profiles: list[Path], target, fmt: str, top, object_name) -> None:
    """Several ranks' profiles: each analysed and advised in turn (one rank's samples in
    memory at a time), one answer for the job (recommender/job.py), then the
    representative rank's own suggestion."""
    from numaprof.cli.loading import analyze_path as analyze
    from numaprof.cli.render import json_report, json_suggest, text_suggest
    from numaprof.recommender import job
    from numaprof.recommender.advice import advise

    per_rank = []
    labels = [str(p) for p in profiles]
    if len(set(labels)) != len(labels):
        from numaprof.errors import UsageError

        raise UsageError("a profile is given twice")
    for p, label in zip(profiles, labels, strict=True):
        per_rank.append((label, advise(analyze(p), p, target).suggestions))
    answer = job.job_answer(per_rank)
    rep = profiles[labels.index(answer.representative)]
    analysis = analyze(rep)
    advice = advise(analysis, rep, target)
    result = advice.suggestions
    if object_name is not None:
        result, _ = _only(result, advice.patches, analysis, object_name)
    if fmt == "json":
        doc = {"schema": "numaprof.suggest-job/1", "job": job.to_json(answer),
               "representative": json_suggest.suggestion(result, analysis, top=top)}
        sys.stdout.write(json_report.dumps(doc))
        return
    for line in job.render_lines(answer):
        click.echo(clean(line))
    click.echo()
    text_suggest.render(result, analysis, top=top)


def _verify(analysis, advice, cfg, build, timeout) -> None:
    from numaprof.cli import verify
    from numaprof.cli.render import json_report

    checks = verify.verify(analysis, advice, cfg.profile, build, timeout=timeout,
                           log=lambda line: click.echo(f"numaprof: verify: {clean(line)}",
                                                       err=True))
    if cfg.format == "json":
        sys.stdout.write(json_report.dumps(verify.to_json(checks)))
        return
    for line in verify.render(checks):
        click.echo(clean(line))
    bad = [c.name for c in checks if c.verdict != "as predicted"]
    if bad:
        click.echo(clean(f"numaprof: verify: {len(bad)} object(s) not as predicted: "
                         + ", ".join(bad)), err=True)


def _only(result, patches, analysis, name: str):
    """The suggestions (and patches) of the objects `--object NAME` names (by name or
    allocation site); the analysis and the choices were made with every object."""
    import dataclasses

    sites = {o.name: o.site for o in analysis.objects}
    shown = [o for o in result.objects if name in (o.name, sites.get(o.name))]
    diffs = {o.patch for o in shown if o.patch}
    return (dataclasses.replace(result, objects=shown),
            [p for p in patches if p.diff in diffs])


def _apply(profile, patches, suggestions, dry_run: bool) -> None:
    from numaprof.errors import NumaprofError
    from numaprof.recommender.apply import apply_to_profile

    if not patches:
        raise NumaprofError("no source patch to apply (nothing to change, or no source line "
                            "could be patched: see `numaprof suggest`)", exit_code=1)
    result = apply_to_profile(profile, patches, dry_run=dry_run)
    if dry_run:
        sys.stdout.write(result.diff)
    else:
        click.echo(f"numaprof: patched {len(result.files)} file(s): "
                   f"{clean(', '.join(result.files))}; originals kept in "
                   f"{clean(str(result.backup_dir))} (undo: numaprof suggest --revert, in this "
                   "tree); rebuild with the flags of `numaprof config --cflags`", err=True)
    for line in _fix_report(suggestions):
        # object names and statements come from the profile and the sources
        click.echo(f"numaprof: {clean(line)}", err=True)


def _fix_report(suggestions) -> list[str]:
    """Per object: the kind of patch and how it was checked (or why there is none)."""
    lines = []
    for o in suggestions.objects:
        fix = o.fix
        if fix is None:
            continue
        if fix.status == "offered":
            lines.append(f"{o.name}: {fix.kind} `{fix.statement}` at {fix.where}; checked: "
                         + "; ".join(fix.checks))
        elif fix.status == "already placed" and not fix.statement:
            lines.append(f"{o.name}: already placed: " + "; ".join(fix.checks))
        elif fix.status == "already placed":
            lines.append(f"{o.name}: already placed by `{fix.statement}` at {fix.where}"
                         + (f"; to change: {fix.by_hand}" if fix.by_hand else ""))
        else:
            lines.append(f"{o.name}: no patch (see `numaprof suggest`)"
                         + (f"; to add by hand: {fix.by_hand}" if fix.by_hand else ""))
    return lines
