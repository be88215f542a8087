"""The address rules of the samples table are listed once (NMP_SAMPLE_RULES in
collector/include/numaprof_format.h; tests/e2e/test_format.py checks that the built
collector and the analyzer read the same list): docs/profile-format.md documents each."""

from __future__ import annotations

from helpers import ROOT

from numaprof.analyzer.core import RULE_NAMES


def test_profile_format_lists_every_rule():
    doc = (ROOT / "docs" / "profile-format.md").read_text()
    missing = [f"{num} `{name}`" for num, name in RULE_NAMES.items() if f"{num} `{name}`" not in doc]
    assert not missing
    assert {17: "skid_path", 18: "skid_loop"}.items() <= RULE_NAMES.items()
