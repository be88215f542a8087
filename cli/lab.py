"""`numaprof lab`: run a command on a throw-away virtual N-node NUMA machine."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from numaprof.errors import UsageError


def lab_config(nodes, cpus_per_node, mem_per_node, distances, preset, timeout, kernel,
               cmd, cwd: Path, numa_balancing: bool = False, thp: str = "host",
               rerun_stalled: bool = False):
    """The frozen LabConfig for these option values (validated; raises UsageError)."""
    from numaprof.lab.runner import LabConfig
    from numaprof.lab.topology import build_topology

    if not cmd:
        raise UsageError("lab: no command given (numaprof lab [OPTIONS] -- CMD ARGS)")
    if timeout is not None and timeout <= 0:
        raise UsageError(f"--timeout must be positive, not {timeout:g}")
    topo = build_topology(nodes=nodes, cpus_per_node=cpus_per_node, mem_per_node=mem_per_node,
                          distances=tuple(distances), preset=preset)
    return LabConfig(topology=topo, command=tuple(cmd), cwd=cwd, timeout=timeout,
                     kernel=kernel, numa_balancing=numa_balancing, thp=thp,
                     rerun_stalled=rerun_stalled)


@click.command(context_settings={"ignore_unknown_options": False,
                                 "allow_interspersed_args": False})
@click.option("--nodes", type=int, default=None,
              help="NUMA nodes of the guest (default: the preset's, else 2).")
@click.option("--cpus-per-node", type=int, default=1, show_default=True,
              help="Virtual cpus per node; node i owns cpus i*C .. i*C+C-1.")
@click.option("--mem-per-node", default="512M", show_default=True, metavar="SIZE",
              help="Memory per node (K/M/G suffix; a bare number is MiB).")
@click.option("--distance", "distances", multiple=True, metavar="I,J=D",
              help="SLIT distance from node I to node J (also J to I unless given too); "
                   "repeatable.  Unset pairs: the preset's, else 20.")
@click.option("--preset", default=None, metavar="NAME",
              help="Node count and distance matrix of a known machine: one of suggest "
                   "--target's presets (2s, 4s, 8n-opteron, itanium2, 2s-snc4, 2s-nps4, 4s-snc4).")
@click.option("--timeout", type=float, default=None, metavar="S",
              help="Kill the guest after S seconds (boot included) and exit 124.")
@click.option("--kernel", type=click.Path(path_type=Path), default=None,
              help="Kernel image to boot (default: $NUMAPROF_LAB_KERNEL, else the newest "
                   "/boot/vmlinuz-*).")
@click.option("--numa-balancing/--no-numa-balancing", default=False, show_default=True,
              help="Let the guest kernel migrate pages toward the threads using them "
                   "(AutoNUMA).  Off: pages stay where they were placed.")
@click.option("--thp", type=click.Choice(["host", "always", "madvise", "never"]),
              default="host", show_default=True,
              help="Transparent huge pages of the guest kernel: this machine's mode, or "
                   "the one given (a huge page is placed whole by its first toucher).")
@click.option("--rerun-stalled", is_flag=True, default=False,
              help="When the guest stops making progress while CMD runs (QEMU under TCG "
                   "does now and then), boot it again and run CMD once more, instead of "
                   "exiting 124.  Only for commands that may run twice.")
@click.argument("cmd", nargs=-1, type=click.UNPROCESSED)
def command(nodes, cpus_per_node, mem_per_node, distances, preset, timeout, kernel,
            numa_balancing, thp, rerun_stalled, cmd):
    """Run CMD on a throw-away virtual machine with N NUMA nodes.

    \b
      numaprof lab --preset 2s -- numactl -H
      numaprof lab --nodes 4 --distance 0,1=12 --distance 0,2=20 -- ./app

    The guest (virtme-ng + QEMU under TCG + this machine's kernel) sees this machine's
    files read-only, except the current directory, which is shared read-write: files CMD
    writes there are kept.  CMD's output is streamed and its exit status returned.
    Programs run about 20x slower than on the host and a boot takes about 30 s: lab
    timings are never performance evidence.  See docs/lab.md.
    """
    from numaprof.lab.runner import find_tools, run

    config = lab_config(nodes, cpus_per_node, mem_per_node, distances, preset, timeout,
                        kernel, cmd, Path.cwd().resolve(), numa_balancing, thp, rerun_stalled)
    tools = find_tools(config.kernel)
    topo = config.topology
    click.echo(f"numaprof lab: booting a {topo.nodes}-node guest ({topo.total_cpus} cpus, "
               f"{topo.total_mem >> 20} MiB, TCG; about 30 s)", err=True)
    sys.exit(run(config, tools))


if __name__ == "__main__":
    command()
