"""`numaprof topology`: NUMA nodes, cpus, memory, distances and the NUMA factor."""

from __future__ import annotations

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
        return load_hwloc_xml(xml)


@click.command()
@click.option("--profile", "profile", type=click.Path(path_type=Path), default=None,
              help="Show the topology recorded in this profile instead of this machine's.")
@target_option
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def command(profile, target, fmt):
    """Show NUMA nodes, their cpus and memory, the SLIT distances and the NUMA factor.

    Without options: this machine, read with hwloc.  --profile: the machine a profile was
    recorded on.  --target: a preset (2s, 4s, 8n-opteron, itanium2) or an hwloc XML file.
    """
    from numaprof.cli.render import text_topology

    if profile is not None:
        from numaprof.analyzer.profile import open_profile

        topo = open_profile(profile).topology()
    else:
        topo = machine_topology()
    if target is not None:
        from numaprof.recommender.targets import resolve_target

        topo = resolve_target(target, topo)
    if fmt == "json":
        from numaprof.cli.render import json_report

        sys.stdout.write(json_report.dumps(json_report.topology(topo)))
    else:
        text_topology.render(topo)
