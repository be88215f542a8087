"""The `numaprof` command's click group: it only registers the subcommands."""

from __future__ import annotations

import importlib

import click

from numaprof import __version__

#: subcommand → the module of numaprof.cli whose `command` it is, imported when used, so
#: that `numaprof record` does not pay for the analysis commands' imports before the
#: program starts (click's documented lazy group: list_commands / get_command)
SUBCOMMANDS = {
    "record": "record",
    "report": "report",
    "suggest": "suggest",
    "topology": "topology",
    "lab": "lab",
    "events": "events",
    "config": "config",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = SUBCOMMANDS.get(cmd_name)
        if module is None:
            return None
        return importlib.import_module(f"numaprof.cli.{module}").command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", is_flag=True, help="Show tracebacks and debug detail.")
@click.version_option(__version__, prog_name="numaprof")
@click.pass_context
def group(ctx: click.Context, verbose: bool) -> None:
    """numaprof: find out how a program uses memory on a NUMA machine, and what to change.

    \b
      numaprof record ./app args...   sample memory accesses, arrays, first touches
      numaprof report                 arrays, access patterns, R/W mix, node traffic
      numaprof suggest                placement policy per array, numactl / OpenMP lines
    """
    ctx.ensure_object(dict)
    ctx.obj["verbose"] = verbose
