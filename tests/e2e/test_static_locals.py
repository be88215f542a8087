"""End-to-end: arrays declared `static` inside functions (tests/progs/static_locals.c), as
older C codes keep their large arrays.  gcc names them `u1.1` in the symbol table; the
report names them `u1`, with the function that declares them in the site."""

import re

import pytest
from helpers import recorded_report

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    return recorded_report(tmp_path_factory.mktemp("static_locals"), "static_locals", "200")


def test_static_locals_are_named_as_the_source_wrote_them(report):
    statics = {o["name"]: o for o in report["objects"] if o["kind"] == "static"}
    assert not [n for n in statics if re.fullmatch(r"(u0|u1|coef)\.\d+", n)], sorted(statics)
    for name, function in (("u0", "main"), ("u1", "main"), ("coef", "coefficients")):
        assert name in statics, sorted(statics)
        assert statics[name]["site"] == f"in {function} .bss@static_locals", statics[name]
    assert statics["grid"]["site"] == ".bss@static_locals", statics["grid"]
    # the loop's arrays carry the samples: u1 is read and written in every pass
    assert statics["u1"]["samples"] >= max((o["samples"] for o in report["objects"] if o["kind"] != "static"),
                                           default=0)
