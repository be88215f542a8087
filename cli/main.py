"""The `numaprof` command: a click group that only registers the subcommands."""

from __future__ import annotations

import sys
import traceback

import click

from numaprof import __version__
from numaprof.cli import config, events, lab, record, report, suggest, topology
from numaprof.cli.render import clean
from numaprof.errors import NumaprofError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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


for _module, _name in (
    (record, "record"),
    (report, "report"),
    (suggest, "suggest"),
    (topology, "topology"),
    (lab, "lab"),
    (events, "events"),
    (config, "config"),
):
    group.add_command(_module.command, _name)


def main(argv: list[str] | None = None) -> None:
    """Entry point: runs the group, turning NumaprofError into one line and an exit code."""
    args = sys.argv[1:] if argv is None else argv
    verbose = any(a in ("-v", "--verbose") for a in args[:1])
    try:
        group.main(args=args, prog_name="numaprof", standalone_mode=False)
    except NumaprofError as e:
        if verbose:
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
            traceback.print_exc()
        print(f"numaprof: internal error: {type(e).__name__}: {clean(str(e))} "
              "(run with -v for details)", file=sys.stderr)
        sys.exit(70)
    sys.exit(0)


if __name__ == "__main__":
    main()
