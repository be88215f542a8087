"""`numaprof report`: arrays, access patterns, R/W mix, first touch, node-to-node traffic."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import click

from numaprof.cli.options import (
    DEFAULT_PROFILE,
    ReportConfig,
    object_option,
    target_option,
    top_option,
)
from numaprof.cli.render import clean, progress_callback


@click.command()
@click.argument("profiles", nargs=-1, type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "json", "html"]), default="text",
              show_default=True,
              help="text; json (the numaprof.report/1 schema); html (one self-contained file "
              "with plots, written to -o, default numaprof-report.html).")
@top_option
@object_option
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="Write the report to FILE instead of standard output.")
@target_option
@click.option("--diff", "diff", nargs=2, type=click.Path(path_type=Path), default=None,
              metavar="BEFORE AFTER",
              help="Compare two profiles per object: local fraction, imbalance, pages, pattern.")
def command(profiles, fmt, top, object_name, output, target, diff):
    """Report the profile in PROFILES (default ./numaprof.data; also a perf.data file).

    Several profiles (MPI ranks recorded with -o prof.%r) are reported per rank and
    combined, objects added up by name.

    Prints the header (command, backend, samples, data-address coverage, lost samples,
    topology, NUMA factor), the hot objects table, the node-to-node traffic matrix and
    the thread placement findings.
    """
    from numaprof.cli.loading import analyze_path as analyze
    from numaprof.cli.render import json_report, text_report

    if diff:
        _diff(diff, fmt, object_name)
        return
    if len(profiles) > 1:
        _ranks(profiles, fmt, top, object_name)
        return
    profile = profiles[0] if profiles else Path(DEFAULT_PROFILE)
    cfg = ReportConfig(profile=profile, format=fmt, top=top, object_name=object_name,
                       output=output)
    if cfg.format == "html":
        _html(cfg, target)
        return
    with progress_callback(enabled=cfg.format == "text") as progress:
        analysis = analyze(cfg.profile, top=None, object_name=cfg.object_name,
                           progress=progress)
    if cfg.format == "json":
        text = json_report.dumps(json_report.report(analysis, top=cfg.top))
        _emit(text, cfg.output)
    else:
        text_report.render(analysis, top=cfg.top if cfg.top else 15, out=cfg.output)


def _html(cfg: ReportConfig, target: str | None) -> None:
    """The HTML report, with the suggestions `numaprof suggest` gives for the same profile
    and target (recommender.advice: the same choices, patches and refusals)."""
    import dataclasses

    from numaprof.cli.loading import analyze_path as analyze
    from numaprof.cli.render import html_report
    from numaprof.recommender.advice import advise

    # the whole analysis: the suggestions depend on every hot object together;
    # --object only selects what is shown
    analysis = analyze(cfg.profile)
    advice = advise(analysis, cfg.profile, target)
    shown = analysis
    if cfg.object_name is not None:
        keep = [o for o in analysis.objects if cfg.object_name in (o.name, o.site)]
        shown = dataclasses.replace(analysis, objects=keep)
        names = {o.name for o in keep}
        advice.suggestions.objects = [o for o in advice.suggestions.objects if o.name in names]
    out = cfg.output or Path("numaprof-report.html")
    _emit(html_report.render(shown, advice.suggestions, top=cfg.top or 10), out)
    print(f"numaprof: HTML report in {clean(str(out))}", file=sys.stderr)


def _emit(text: str, output: Path | None) -> None:
    if output is None:
        sys.stdout.write(text)
        return
    from numaprof.cli.render import write_atomic

    write_atomic(output, text)


def _diff(paths, fmt: str, object_name: str | None) -> None:
    from numaprof.cli.loading import analyze_path as analyze
    from numaprof.cli.render import json_report, text_diff

    before, after = (analyze(p, object_name=object_name) for p in paths)
    if fmt == "json":
        sys.stdout.write(json_report.dumps(text_diff.to_json(before, after)))
    else:
        text_diff.render(before, after)


def _ranks(paths, fmt: str, top: int | None, object_name: str | None) -> None:
    from numaprof.analyzer.merge import merge
    from numaprof.cli.loading import analyze_path
    from numaprof.cli.render import json_report, text_report

    analyses, rank_docs = [], []
    for p in paths:
        a = analyze_path(p, object_name=object_name)
        if fmt == "json":
            rank_docs.append(json_report.report(a, top=top))
        # what the merge and the per-rank lines need stays; each object's per-sample
        # accesses go, so that memory holds one rank's samples at a time
        analyses.append(dataclasses.replace(
            a, objects=[dataclasses.replace(o, access=None) for o in a.objects]))
    combined = merge(analyses)
    if fmt == "json":
        doc = json_report.report(combined, top=top)
        doc["ranks"] = rank_docs
        sys.stdout.write(json_report.dumps(doc))
    else:
        text_report.render_ranks(analyses, combined, top=top or 15)
