"""`numaprof topology`: NUMA nodes, cpus, memory, distances and the NUMA factor."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import click

from numaprof.cli.options import target_option
from numaprof.errors import NumaprofError


def machine_topology():
    """This machine's topology, read with hwloc (`lstopo --of xml`)."""
    from numaprof.analyzer.topology import load_hwloc_xml

    lstopo = shutil.which("lstopo-no-graphics") or shutil.which("lstopo")
    if not lstopo:
        raise NumaprofError("hwloc's lstopo is not installed (Debian package hwloc)")
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "topology.xml"
        proc = subprocess.run([lstopo, "--of", "xml", "-f", str(xml)], capture_output=True,
                              text=True)
        if proc.returncode != 0:
            raise NumaprofError(f"lstopo failed: {proc.stderr.strip().splitlines()[-1:]}")
        return dataclasses.replace(load_hwloc_xml(xml), name="this machine")


@click.command()
@click.option("--profile", "profile", type=click.Path(path_type=Path), default=None,
              help="Show the topology recorded in this profile instead of this machine's.")
@target_option
@click.option("--measure", "do_measure", is_flag=True,
              help="Measure latency (pointer chase) and bandwidth (triad) for every pair of "
              "cpu node and memory node, and cache the result for this machine.")
@click.option("--size-mib", type=click.IntRange(min=1), default=256, show_default=True,
              help="With --measure: buffer size per pair.")
@click.option("--reps", type=click.IntRange(min=1), default=5, show_default=True,
              help="With --measure: repetitions per pair.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def command(profile, target, do_measure, size_mib, reps, fmt):
    """Show NUMA nodes, their cpus and memory, the SLIT distances and the NUMA factor.

    Without options: this machine, read with hwloc, with the measured NUMA factor when
    `--measure` has been run here before (cached per machine).  --profile: the machine a
    profile was recorded on.  --target: a preset (2s, 4s, 8n-opteron, itanium2, 2s-snc4, 2s-nps4, 4s-snc4)
    or an hwloc XML file.  --measure: measure latency and bandwidth per node pair now (the method of
    Pousa Ribeiro et al. 2010, §3.1 and Table 4); timings in a VM or the NUMA lab are not NUMA evidence.
    """
    from numaprof.cli.render import text_topology

    measurement = None
    if profile is not None:
        from numaprof.analyzer.profile import open_profile

        topo = open_profile(profile).topology()
    else:
        from numaprof.analyzer.measure import apply_measured, load_cached, measure

        topo = machine_topology()
        measurement = (measure(topo, size_mib=size_mib, reps=reps) if do_measure
                       else load_cached(topo))
        if measurement is not None:
            topo = apply_measured(topo, measurement)
    if target is not None:
        from numaprof.recommender.targets import resolve_target

        topo = resolve_target(target, topo)
    if fmt == "json":
        from numaprof.cli.render import json_report

        doc = json_report.topology(topo)
        if measurement is not None:
            doc["measured"] = measurement.to_json()
        sys.stdout.write(json_report.dumps(doc))
    else:
        text_topology.render(topo, measurement)
