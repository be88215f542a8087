"""`numaprof config`: what a build needs to use the placement runtime (pkg-config style)."""

from __future__ import annotations

import click

from numaprof import paths


@click.command()
@click.option("--cflags", is_flag=True, help="Compiler flags: -I for numaprof_place.h.")
@click.option("--libs", is_flag=True, help="Linker flags (none: the runtime is header-only).")
def command(cflags, libs):
    """Print the flags to build against numaprof_place.h, the header-only placement runtime.

    \b
      cc $(numaprof config --cflags) -fopenmp app.c -o app
    """
    out = []
    if cflags or not libs:
        out.append(f"-I{paths.include_dir()}")
    click.echo(" ".join(out))
