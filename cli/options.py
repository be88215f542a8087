"""Options and frozen configurations shared by the subcommands."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import click

from numaprof.defaults import DEFAULT_PROFILE  # noqa: F401 - the subcommands' default profile

target_option = click.option(
    "--target",
    default=None,
    metavar="PRESET|XML",
    help="Evaluate for another machine: a preset (2s, 4s, 8n-opteron, itanium2, 2s-snc4, 2s-nps4, 4s-snc4) or an hwloc XML file.",
)
top_option = click.option("--top", type=click.IntRange(min=1), default=None,
                          help="Show only the N hottest objects.")
object_option = click.option("--object", "object_name", default=None, metavar="NAME",
                             help="Only the object with this name.")


@dataclass(frozen=True)
class ReportConfig:
    profile: Path
    format: str
    top: int | None
    object_name: str | None
    output: Path | None


@dataclass(frozen=True)
class SuggestConfig:
    profile: Path
    target: str | None
    format: str
    top: int | None
    object_name: str | None
