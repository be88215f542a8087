"""`numaprof suggest`: a placement policy per array, with the what-if table and the lines to run."""

from __future__ import annotations

import sys

import click

from numaprof.cli.options import (
    SuggestConfig,
    object_option,
    profile_argument,
    target_option,
    top_option,
)
from numaprof.cli.render import progress_callback


@click.command()
@profile_argument
@target_option
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="Output format (json: the numaprof.suggest/1 schema).")
@top_option
@object_option
def command(profile, target, fmt, top, object_name):
    """Suggest a placement policy for each hot array of PROFILE (default ./numaprof.data).

    Every candidate policy is simulated on the measured accesses (which thread touched
    which page, where the threads ran) and scored with the NUMA factor and the per-node
    load; the cheapest wins, ties going to the simplest change.  --target evaluates the
    same profile for another machine (a preset or an hwloc XML file).
    """
    from numaprof.analyzer import analyze
    from numaprof.cli.render import json_suggest, text_suggest
    from numaprof.recommender import suggest
    from numaprof.recommender.targets import resolve_target

    cfg = SuggestConfig(profile=profile, target=target, format=fmt, top=top,
                        object_name=object_name)
    with progress_callback(enabled=cfg.format == "text") as progress:
        analysis = analyze(cfg.profile, object_name=cfg.object_name, progress=progress)
    topo = resolve_target(cfg.target, analysis.topology)
    result = suggest(analysis, topo)
    if cfg.format == "json":
        sys.stdout.write(json_suggest.dumps(json_suggest.suggestion(result, analysis,
                                                                   top=cfg.top)))
    else:
        text_suggest.render(result, analysis, top=cfg.top)
