"""`numaprof record`: the click command (help, errors, every option).

The recording itself is cli/recording.py; the ordinary forms of this command reach it
without click (cli/main.py), so this module only parses and hands over.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from numaprof import defaults
from numaprof.cli.recording import BACKENDS, INT_OPTIONS, make_config, run_record
from numaprof.defaults import DEFAULT_PROFILE

SIGNAL_ONLY = "signal"


def _int_range(option: str) -> click.IntRange:
    _, least, most = INT_OPTIONS[option]
    return click.IntRange(min=least, max=most)


class _SwitchOutput(click.ParamType):
    """--switch-output: seconds (at least 1) or `signal` (slices on SIGUSR2 only, as
    perf record's --switch-output=signal)."""

    name = "seconds|signal"

    def convert(self, value, param, ctx):
        if isinstance(value, float) or value == SIGNAL_ONLY:
            return value
        try:
            seconds = float(value)
        except ValueError:
            self.fail(f"{value!r} is neither a number of seconds nor 'signal'", param, ctx)
        if not seconds >= 1.0:
            self.fail(f"{value!r}: at least 1 second", param, ctx)
        return seconds


@click.command(context_settings={"ignore_unknown_options": False,
                                 "allow_interspersed_args": False})
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help=f"Profile directory (default ./{DEFAULT_PROFILE}; an existing one is kept "
              "as .old).  %r expands to the MPI rank, %h to the host, %p to the pid.")
@click.option("--backend", type=click.Choice(BACKENDS), default="auto",
              show_default=True, help="Sampling backend.")
@click.option("--freq", type=_int_range("--freq"), default=None,
              help=f"Samples per second per thread (default {defaults.FREQ}).")
@click.option("--alloc-threshold", type=_int_range("--alloc-threshold"),
              default=defaults.ALLOC_THRESHOLD,
              show_default=True,
              help="Track heap allocations of at least this many bytes with their call stack.")
@click.option("--small-sample", type=_int_range("--small-sample"), default=None,
              metavar="BYTES",
              help="Record about one smaller allocation in every BYTES a thread allocates "
              f"below the threshold, with its call stack (default {defaults.SMALL_SAMPLE}, "
              "or $NUMAPROF_SMALL_SAMPLE; 0: none).")
@click.option("--short-lived", type=_int_range("--short-lived"), default=None,
              metavar="NS",
              help="Count a heap block released within NS nanoseconds in its site's summary "
              f"instead of recording it (default {defaults.SHORT_LIVED}, or "
              "$NUMAPROF_SHORT_LIVED; 0: record every block).")
@click.option("--fault-period", type=_int_range("--fault-period"), default=None,
              metavar="N",
              help="Record one page fault in N with its address; the first touches of the "
              f"pages between are inferred from their neighbours (default {defaults.FAULT_PERIOD}, "
              "or 1 where transparent huge pages are 'always' on; 1: every page exactly).")
@click.option("-p", "--pid", type=click.IntRange(min=1), default=None,
              help="Attach to a running process instead of starting one.")
@click.option("--duration", type=click.FloatRange(min=0.1), default=None,
              help="With -p: seconds to record (default 10).")
@click.option("--switch-output", type=_SwitchOutput(), default=None, metavar="SECONDS|signal",
              help="A new profile every SECONDS and whenever numaprof record gets SIGUSR2 "
              "(`signal`: on SIGUSR2 only; -o DIR gives DIR.0001, DIR.0002, ...) until the "
              "process ends, --duration passes, or Ctrl-C; `report DIR.*` merges them.  A "
              "COMMAND is started, then recorded as with -p.")
@click.option("--redact-args", is_flag=True,
              help="Keep the program name but not its arguments in the profile (passwords, "
              "paths; see docs/record.md for what a profile holds).")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def command(output, backend, freq, alloc_threshold, small_sample, short_lived, fault_period, pid,
            duration, switch_output, redact_args, command):
    """Run COMMAND with memory-access sampling and write a profile.

    Samples every thread and child process of COMMAND (software register sampling where
    there is no PMU), tracks its heap and static arrays and first touches, and returns
    COMMAND's exit status.  Then run `numaprof report` and `numaprof suggest`.

    \b
      numaprof record ./app args...
      numaprof record -o prof --freq 4000 -- ./app
    """
    if command and command[0] == "--":
        command = command[1:]
    if not command and not pid:
        raise click.UsageError("give a command to run (numaprof record ./app) or -p PID")
    cfg = make_config(command, output=output, backend=backend, freq=freq,
                      alloc_threshold=alloc_threshold, small_sample=small_sample,
                      short_lived=short_lived, fault_period=fault_period, pid=pid,
                      duration=duration, redact_args=redact_args)
    if switch_output is not None:
        from numaprof.cli import slices

        argv = ["numaprof", *sys.argv[1:]]
        sys.exit(slices.run_slices(cfg, switch_output, argv) if pid else
                 slices.run_launched(cfg, switch_output, argv))
    rc = run_record(cfg, ["numaprof", *sys.argv[1:]])
    sys.exit(rc)
