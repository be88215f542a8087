"""`report --diff` pairs the same objects across a patch that shifted lines
(cli/diff_match.py): by name and site through the sources' line map, then by function
and allocation order; never by a line that now names another object."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

from numaprof.cli.diff_match import line_map, match
from numaprof.cli.render.text_diff import to_json

BEFORE = "".join(f"line {k}\n" for k in range(1, 21))
# two lines inserted after line 8 (a placement call and a blank line), as --apply does
AFTER = "".join(f"line {k}\n" for k in range(1, 9)) + "numaprof_place(...);\n\n" + \
    "".join(f"line {k}\n" for k in range(9, 21))
SRC = "/src/grid.c"


def _obj(name, site, t, kind="heap", address=0x1000):
    return SimpleNamespace(name=name, site=site, kind=kind, alloc_time=t, address=address,
                           local_fraction=0.5, imbalance=1.0, pages_by_node=[1, 1],
                           pattern="regular", samples=10)


def _profile(path: Path, sources: dict[str, str]) -> str:
    """A profile directory with an archive of `sources` (path -> text)."""
    (path / "archive").mkdir(parents=True)
    index = {}
    for p, text in sources.items():
        digest = hashlib.sha256(text.encode()).hexdigest()
        (path / "archive" / digest).write_text(text)
        index[p] = digest
    (path / "archive.json").write_text(json.dumps({"binaries": {}, "sources": index}))
    return str(path)


def _analysis(path, objects):
    return SimpleNamespace(objects=objects, profile=SimpleNamespace(path=path, local_fraction=0.5,
                                                                    imbalance=1.0),
                           local_fraction=0.5, imbalance=1.0)


def test_line_map_follows_an_insertion():
    m = line_map(BEFORE, AFTER)
    assert [m(k) for k in (1, 8, 9, 10, 20)] == [1, 8, 11, 12, 22]


def test_objects_named_by_site_are_paired_across_shifted_lines(tmp_path):
    """Before: x allocated at line 10, y at 12.  The patch inserts two lines above them:
    after, x is at 12 and y at 14.  Pairing by name put y (line 12 before) against x
    (line 12 after)."""
    before = _analysis(_profile(tmp_path / "b", {SRC: BEFORE}), [
        _obj("fill@grid.c:10", "fill@grid.c:10", 1), _obj("fill@grid.c:12", "fill@grid.c:12", 2)])
    after = _analysis(_profile(tmp_path / "a", {SRC: AFTER}), [
        _obj("fill@grid.c:12", "fill@grid.c:12", 5), _obj("fill@grid.c:14", "fill@grid.c:14", 6)])
    got = {(p.before.name, p.after.name, p.how) for p in match(before, after)}
    assert got == {("fill@grid.c:10", "fill@grid.c:12", "site"),
                   ("fill@grid.c:12", "fill@grid.c:14", "site")}
    doc = to_json(before, after)
    assert [(o["before_name"], o["after_name"]) for o in doc["objects"]] == [
        ("fill@grid.c:10", "fill@grid.c:12"), ("fill@grid.c:12", "fill@grid.c:14")]


def test_same_name_in_two_functions_and_repeated_sites(tmp_path):
    """`a` in f and `a` in g are two objects; two allocations of one site (no line map:
    the archive is absent) pair in allocation order."""
    before = _analysis(str(tmp_path / "b"), [
        _obj("a", "g@m.c:30", 2), _obj("a", "f@m.c:10", 1),
        _obj("heap@0x7f01", "h@m.c:40", 4), _obj("heap@0x7f00", "h@m.c:40", 3)])
    after = _analysis(str(tmp_path / "a"), [
        _obj("a", "f@m.c:11", 1), _obj("a", "g@m.c:31", 2),
        _obj("heap@0x7e00", "h@m.c:41", 3), _obj("heap@0x7e01", "h@m.c:41", 4)])
    got = {(p.before.site, p.before.name, p.after.site, p.after.name, p.how)
           for p in match(before, after)}
    assert got == {("f@m.c:10", "a", "f@m.c:11", "a", "function"),
                   ("g@m.c:30", "a", "g@m.c:31", "a", "function"),
                   ("h@m.c:40", "heap@0x7f00", "h@m.c:41", "heap@0x7e00", "function"),
                   ("h@m.c:40", "heap@0x7f01", "h@m.c:41", "heap@0x7e01", "function")}


def test_the_original_comes_from_the_apply_journal(tmp_path):
    """BEFORE's profile has no archived copy: the original text is the one `suggest
    --apply` kept (.numaprof/apply), found from the patched file's directory."""
    tree = tmp_path / "tree"
    tree.mkdir()
    src = tree / "grid.c"
    src.write_text(AFTER)
    apply_dir = tree / ".numaprof" / "apply"
    (apply_dir / "files").mkdir(parents=True)
    (apply_dir / "files" / "0001").write_text(BEFORE)
    sha = lambda t: hashlib.sha256(t.encode()).hexdigest()  # noqa: E731
    (apply_dir / "manifest.json").write_text(json.dumps({
        "schema": "numaprof.apply-backup/2", "state": "applied",
        "files": [{"path": "grid.c", "backup": "files/0001", "original_sha256": sha(BEFORE),
                   "patched_sha256": sha(AFTER)}]}))
    before = _analysis(_profile(tmp_path / "b", {}), [
        _obj("fill@grid.c:10", "fill@grid.c:10", 1), _obj("fill@grid.c:12", "fill@grid.c:12", 2)])
    after = _analysis(_profile(tmp_path / "a", {str(src): AFTER}), [
        _obj("fill@grid.c:12", "fill@grid.c:12", 5), _obj("fill@grid.c:14", "fill@grid.c:14", 6)])
    got = {(p.before.name, p.after.name, p.how) for p in match(before, after)}
    assert ("fill@grid.c:12", "fill@grid.c:14", "site") in got
    assert ("fill@grid.c:10", "fill@grid.c:12", "site") in got


def test_unpaired_objects_stay_on_their_side(tmp_path):
    before = _analysis(str(tmp_path / "b"), [_obj("x", "f@m.c:1", 1)])
    after = _analysis(str(tmp_path / "a"), [_obj("y", "g@m.c:1", 1)])
    got = [(p.before and p.before.name, p.after and p.after.name, p.how)
           for p in match(before, after)]
    assert got == [("x", None, ""), (None, "y", "")]
    doc = to_json(before, after)
    assert [(o["name"], o["paired_by"], o["before"] is None, o["after"] is None)
            for o in doc["objects"]] == [("x", None, False, True), ("y", None, True, False)]
