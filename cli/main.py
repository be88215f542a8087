"""The `numaprof` command's entry point: one line and an exit code for every failure.

`numaprof record` with the ordinary options (a command to launch, -o, --freq, ...) is
parsed and run without click (cli/recording.py): the interpreter's start and the CLI's
imports come before the program's, and click, dataclasses and the analysis modules would
be two thirds of that.  Everything else goes through the click group (cli/group.py).
"""

from __future__ import annotations

import os
import sys

from numaprof.errors import NumaprofError


def __getattr__(name: str):
    if name == "group":  # the click group, imported only when asked for
        from numaprof.cli.group import group

        return group
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: list[str] | None = None) -> None:
    """Entry point: runs the command, turning NumaprofError into one line and an exit code."""
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


def _launched() -> tuple[int, int, int] | None:
    """The collector the native launcher started for this `record` (collector/launcher):
    its pid, control socket and error pipe, from NUMAPROF_LAUNCHED (removed, so that
    neither the manifest nor a later child sees it)."""
    value = os.environ.pop("NUMAPROF_LAUNCHED", None)
    if value is None:
        return None
    try:
        pid, ctl, err = (int(x) for x in value.split(":"))
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)  # ours, or not
    except (ValueError, OSError):  # (ChildProcessError: a variable from elsewhere)
        return None
    return pid, ctl, err


def _main(args: list[str]) -> None:
    verbose = any(a in ("-v", "--verbose") for a in args[:1])
    rest = args[1:] if verbose else args
    launched = _launched()
    if rest[:1] == ["record"]:
        from numaprof.cli import recording

        values = recording.parse_args(rest[1:])
        if values is not None:
            try:
                cfg = recording.make_config(**values)
                code = recording.run_record(cfg, ["numaprof", *args], launched=launched)
            except BaseException as e:  # noqa: BLE001 - each kind is one line below
                _fail(e, verbose)
            sys.exit(code)
    if launched is not None:  # a collector runs that nothing here will wait for
        print("numaprof: internal error: the launcher read record's arguments as an "
              "ordinary recording and the CLI did not (run with the CLI: numaprof-cli)",
              file=sys.stderr)
        sys.exit(70)
    import click

    from numaprof.cli.group import group

    try:
        group.main(args=args, prog_name="numaprof", standalone_mode=False)
    except click.exceptions.Abort:
        print("numaprof: interrupted", file=sys.stderr)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except BaseException as e:  # noqa: BLE001
        _fail(e, verbose)
    sys.exit(0)


def _fail(e: BaseException, verbose: bool) -> None:
    """Ends the command for exception `e`: one line (and the traceback with -v) and the
    exit code of its kind; SystemExit goes on as it is."""
    if isinstance(e, SystemExit):
        raise e
    from numaprof.cli.render import clean

    if isinstance(e, NumaprofError):
        if verbose:
            import traceback  # 4 ms of every start otherwise

            traceback.print_exception(e)
        # one line, shown and not obeyed: a message may quote a profile's content
        print(f"numaprof: {clean(str(e))}", file=sys.stderr)
        sys.exit(e.exit_code)
    if isinstance(e, KeyboardInterrupt):
        print("numaprof: interrupted", file=sys.stderr)
        sys.exit(130)
    if isinstance(e, BrokenPipeError):
        sys.exit(141)
    if not isinstance(e, Exception):
        raise e
    if verbose:  # a bug: one line unless -v
        import traceback

        traceback.print_exception(e)
    print(f"numaprof: internal error: {type(e).__name__}: {clean(str(e))} "
          "(run with -v for details)", file=sys.stderr)
    sys.exit(70)


if __name__ == "__main__":
    main()
