"""Unit tests of record's pieces that need no collector."""

import pytest

from numaprof.cli.record import expand_output
from numaprof.errors import NumaprofError


def test_rank_expansion_from_each_launcher():
    assert expand_output("prof.%r", {"OMPI_COMM_WORLD_RANK": "3"}) == "prof.3"
    assert expand_output("prof.%r", {"PMI_RANK": "1"}) == "prof.1"
    assert expand_output("prof.%r", {"SLURM_PROCID": "7"}) == "prof.7"
    assert expand_output("p%%r", {}) == "p%r"


def test_rank_without_launcher_is_an_error():
    with pytest.raises(NumaprofError):
        expand_output("prof.%r", {})
    with pytest.raises(NumaprofError):
        expand_output("prof.%x", {})


def test_host_and_pid():
    out = expand_output("p.%h.%p", {})
    host, pid = out.split(".")[1:]
    assert host and pid.isdigit()
