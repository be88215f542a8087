"""The address rules of the samples table are numbered once, in collector/src/nmp_collect.h;
the collector names them (collector.json "rules", collector/src/sampler.c), the analyzer
names them (analyzer.core.RULE_NAMES) and docs/profile-format.md lists them: all agree."""

from __future__ import annotations

import re

from helpers import ROOT

from numaprof.analyzer.core import RULE_NAMES


def _c_numbers() -> dict[str, int]:
    text = (ROOT / "collector" / "src" / "nmp_collect.h").read_text()
    return {name: int(num) for name, num in re.findall(r"\bNMP_RULE_([A-Z_]+)\s*=\s*(\d+)", text)}


def _collector_names() -> dict[str, str]:
    text = (ROOT / "collector" / "src" / "sampler.c").read_text()
    block = re.search(r"rule_names\[NMP_RULE_COUNT\]\s*=\s*\{(.*?)\};", text, re.S)
    assert block, "rule_names[NMP_RULE_COUNT] not found in sampler.c"
    return dict(re.findall(r'\[NMP_RULE_([A-Z_]+)\]\s*=\s*"([a-z_]+)"', block.group(1)))


def test_collector_and_analyzer_name_the_same_rules():
    numbers = _c_numbers()
    count = numbers.pop("COUNT")
    names = _collector_names()
    assert set(names) == set(numbers)
    assert {numbers[k]: v for k, v in names.items()} == RULE_NAMES
    assert count == max(numbers.values()) + 1


def test_profile_format_lists_every_rule():
    doc = (ROOT / "docs" / "profile-format.md").read_text()
    missing = [f"{num} `{name}`" for num, name in RULE_NAMES.items() if f"{num} `{name}`" not in doc]
    assert not missing
