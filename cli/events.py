"""`numaprof events`: the hardware events numaprof would use on this CPU."""

from __future__ import annotations

import json
import os
import subprocess

import click

from numaprof import paths
from numaprof.errors import NumaprofError

SECTIONS = (
    ("sampling", "memory sampling (perf_event_open attrs)"),
    ("counting", "local/remote DRAM counting (core PMU)"),
    ("node_counters", "node-level counters (uncore, CPU-wide)"),
)


def list_events(pmu: str | None = None) -> dict:
    """Runs ``numaprof-collect --list-events --json`` (with LIBPFM_FORCE_PMU=pmu if given)
    and returns its parsed output."""
    env = dict(os.environ)
    if pmu:
        env["LIBPFM_FORCE_PMU"] = pmu
    exe = paths.collector()
    try:
        proc = subprocess.run([str(exe), "--list-events", "--json"], env=env,
                              capture_output=True, text=True, timeout=60)
    except OSError as e:
        raise NumaprofError(f"cannot run {exe}: {e.strerror}") from e
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        last = lines[-1] if lines else f"exit status {proc.returncode}"
        raise NumaprofError(f"numaprof-collect --list-events failed: {last}")
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        raise NumaprofError(f"numaprof-collect --list-events printed invalid JSON: {e}") from e
    if not isinstance(data, dict) or "sampling" not in data:
        raise NumaprofError("numaprof-collect --list-events printed an unexpected document")
    return data


def render_text(data: dict) -> str:
    """The listing as text: the core PMU, whether each backend is usable, then one table
    per kind of event with its perf_event_attr encoding."""
    core = data.get("core_pmu") or "none known to libpfm4"
    forced = " (forced by LIBPFM_FORCE_PMU)" if data.get("forced") else ""
    out = [f"core PMU: {core}{forced}"]
    for name, b in data.get("backends", {}).items():
        state = "usable" if b.get("usable") else f"not usable: {b.get('why', '')}"
        out.append(f"{name + ':':6s}{state}")
    for key, title in SECTIONS:
        rows = data.get(key, [])
        out.append("")
        out.append(f"{title}:")
        if not rows:
            out.append("  (none)")
            continue
        head = ("ROLE", "EVENT", "TYPE", "CONFIG", "CONFIG1", "PRECISE", "SOURCE")
        table = [head] + [
            (r["role"], r["name"], str(r["type"]), r["config"], r["config1"],
             str(r["precise"]), r["source"])
            for r in rows
        ]
        widths = [max(len(row[i]) for row in table) for i in range(len(head) - 1)]
        for row in table:
            cells = [c.ljust(w) for c, w in zip(row[:-1], widths, strict=True)]
            out.append("  " + "  ".join(cells) + "  " + row[-1])
    return "\n".join(out) + "\n"


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the listing as JSON.")
@click.option("--pmu", default=None, metavar="NAME",
              help="List for the libpfm4 PMU model NAME instead of this CPU (e.g. skx, icx, "
                   "spr, amd64_fam19h_zen4); same as LIBPFM_FORCE_PMU=NAME.")
def command(as_json: bool, pmu: str | None) -> None:
    """List the memory-sampling and node-counter events numaprof would use.

    For this CPU, or for the libpfm4 PMU model named by --pmu or LIBPFM_FORCE_PMU: the
    PEBS load-latency / store events (with the Sapphire Rapids mem-loads-aux leader) or
    the IBS op event, the local/remote DRAM counting events, and the uncore IMC / AMD
    DF / UMC counters found in sysfs, each with its perf_event_attr encoding (type,
    config, config1, precise_ip), and whether the pebs and ibs backends are usable here
    and if not, why.
    """
    data = list_events(pmu)
    if as_json:
        click.echo(json.dumps(data, indent=2))
    else:
        click.echo(render_text(data), nl=False)
