"""The Python layers import one way (docs/architecture.md):

    cli, lab  ->  recommender  ->  analyzer  ->  numaprof (core: errors, paths, defaults, ...)

Read from the source of every module (imports inside functions included), so an import
against the arrows fails here before it tangles the code.
"""

from __future__ import annotations

import ast

import pytest
from helpers import ROOT

PACKAGES = {"numaprof": ROOT / "numaprof", "analyzer": ROOT / "analyzer",
            "recommender": ROOT / "recommender", "lab": ROOT / "lab", "cli": ROOT / "cli"}
#: What each layer may import (besides itself and third-party code).
ALLOWED = {
    "numaprof": set(),
    "analyzer": {"numaprof"},
    "recommender": {"numaprof", "analyzer"},
    "lab": {"numaprof", "analyzer", "recommender"},
    "cli": {"numaprof", "analyzer", "recommender", "lab"},
}


def _layer_of(module: str) -> str | None:
    """numaprof.analyzer.core -> analyzer; numaprof.errors -> numaprof; other -> None."""
    parts = module.split(".")
    if parts[0] != "numaprof":
        return None
    if len(parts) > 1 and parts[1] in PACKAGES and parts[1] != "numaprof":
        return parts[1]
    return "numaprof"


def _imports(path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
            # `from numaprof import analyzer` imports a package too
            if node.module == "numaprof":
                out += [(node.lineno, f"numaprof.{a.name}") for a in node.names]
    return out


def _modules():
    for layer, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            yield layer, path


@pytest.mark.parametrize("layer, path", list(_modules()),
                         ids=lambda v: str(v.relative_to(ROOT)) if hasattr(v, "relative_to") else v)
def test_imports_follow_the_layers(layer, path):
    wrong = []
    for line, module in _imports(path):
        target = _layer_of(module)
        if target is not None and target != layer and target not in ALLOWED[layer]:
            wrong.append(f"{path.relative_to(ROOT)}:{line} imports {module} ({layer} -> {target})")
    assert not wrong, "\n".join(wrong)


def test_the_check_sees_a_wrong_import(tmp_path):
    """The checker itself: an analyzer module importing the CLI is reported."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from numaprof.cli.record import run_record\n")
    targets = {_layer_of(m) for _, m in _imports(bad)}
    assert "cli" in targets and "cli" not in ALLOWED["analyzer"]
