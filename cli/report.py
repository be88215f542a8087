"""`numaprof report`: arrays, access patterns, R/W mix, first touch, node-to-node traffic."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from numaprof.cli.options import (
    ReportConfig,
    object_option,
    profile_argument,
    top_option,
)
from numaprof.cli.render import progress_callback


@click.command()
@profile_argument
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="Output format (json: the numaprof.report/1 schema).")
@top_option
@object_option
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="Write the report to FILE instead of standard output.")
def command(profile, fmt, top, object_name, output):
    """Report the profile in PROFILE (default ./numaprof.data).

    Prints the header (command, backend, samples, data-address coverage, lost samples,
    topology, NUMA factor), the hot objects table, the node-to-node traffic matrix and
    the thread placement findings.
    """
    from numaprof.analyzer import analyze
    from numaprof.cli.render import json_report, text_report

    cfg = ReportConfig(profile=profile, format=fmt, top=top, object_name=object_name,
                       output=output)
    with progress_callback(enabled=cfg.format == "text") as progress:
        analysis = analyze(cfg.profile, top=None, object_name=cfg.object_name,
                           progress=progress)
    if cfg.format == "json":
        text = json_report.dumps(json_report.report(analysis, top=cfg.top))
        _emit(text, cfg.output)
    else:
        text_report.render(analysis, top=cfg.top if cfg.top else 15, out=cfg.output)


def _emit(text: str, output: Path | None) -> None:
    if output is None:
        sys.stdout.write(text)
        return
    from numaprof.cli.render import write_atomic

    write_atomic(output, text)
