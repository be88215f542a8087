"""The `numaprof` command: a click group that only registers the subcommands."""

from __future__ import annotations

import importlib
import os
import sys

import click

from numaprof import __version__
from numaprof.cli.render import clean
from numaprof.errors import NumaprofError

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



def main(argv: list[str] | None = None) -> None:
    """Entry point: runs the group, turning NumaprofError into one line and an exit code."""
    args = sys.argv[1:] if argv is None else argv
    try:
        _main(args)
    except SystemExit as e:
        if argv is None and [a for a in args if not a.startswith("-")][:1] == ["record"]:
            _leave(e.code)
        raise


def _leave(code) -> None:
    """Ends `numaprof record` without the interpreter's teardown (8 ms of its fixed
    cost here): by then every file of the profile is written, synced and closed, and its
    threads joined; only the standard streams are left to flush."""
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            if stream is sys.stdout:
                code = code or 141  # a closed pipe: as the BrokenPipeError path below
    os._exit(code)


def _main(args: list[str]) -> None:
    verbose = any(a in ("-v", "--verbose") for a in args[:1])
    try:
        group.main(args=args, prog_name="numaprof", standalone_mode=False)
    except NumaprofError as e:
        if verbose:
            import traceback  # 4 ms of every start otherwise

            traceback.print_exc()
        # one line, shown and not obeyed: a message may quote a profile's content
        print(f"numaprof: {clean(str(e))}", file=sys.stderr)
        sys.exit(e.exit_code)
    except click.exceptions.Abort:
        print("numaprof: interrupted", file=sys.stderr)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        print("numaprof: interrupted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(141)
    except Exception as e:  # a bug: one line unless -v
        if verbose:
            import traceback

            traceback.print_exc()
        print(f"numaprof: internal error: {type(e).__name__}: {clean(str(e))} "
              "(run with -v for details)", file=sys.stderr)
        sys.exit(70)
    sys.exit(0)


if __name__ == "__main__":
    main()
