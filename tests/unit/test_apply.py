"""`suggest --apply` machinery (recommender/apply.py): hash check, all-or-none, revert.

Every test works on copies in tmp_path.  "Nothing changed" is checked byte for byte,
including that nothing is left in the tree (no temporary file, no `.numaprof/`).
Faults at every write, SIGKILLs, a full file system, other users' files and crafted
apply records are in test_apply_trust.py.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest
from helpers import ROOT

import numaprof.recommender.apply as apply_mod
import numaprof.recommender.apply_state as apply_state
from numaprof.errors import NumaprofError
from numaprof.recommender.apply import apply, revert, state_dir
from numaprof.recommender.patch import Patch, parallelize_first_touch, place_after_allocation
from numaprof.recommender.sources import sha256_file

EXAMPLES = ROOT / "examples"
DATA = ROOT / "tests" / "data" / "patch"


class Tree:
    """A small source tree: src/serial_init.c and src/lib/loops.c, hashed as recorded."""

    def __init__(self, base: Path):
        self.root = base / "proj"
        (self.root / "src" / "lib").mkdir(parents=True)
        self.a = self.root / "src" / "serial_init.c"
        self.b = self.root / "src" / "lib" / "loops.c"
        shutil.copyfile(EXAMPLES / "serial_init.c", self.a)
        shutil.copyfile(DATA / "loops.c", self.b)
        os.chmod(self.a, 0o640)
        self.hashes = {str(p): sha256_file(p) for p in (self.a, self.b)}
        self.original = {p: p.read_bytes() for p in (self.a, self.b)}
        self.inodes = {p: p.stat().st_ino for p in (self.a, self.b)}
        self.state = self.root / ".numaprof"
        self.backup = self.state / "apply"
        (base / "profile").mkdir()

    def patches(self) -> list[Patch]:
        a_lines = self.a.read_text().splitlines()
        b_lines = self.b.read_text().splitlines()
        ps = [
            place_after_allocation(self.a, a_lines.index(
                "    double *a = malloc(n * sizeof(double));") + 1, "a", "cyclic",
                root=self.root),
            parallelize_first_touch(self.a, a_lines.index("        a[j] = 0.0;") + 1,
                                    root=self.root),
            place_after_allocation(self.b, b_lines.index(
                "    double *b = calloc(N, sizeof *b);") + 1, "b", "random", root=self.root),
            place_after_allocation(self.a, a_lines.index(
                "    double *c = malloc(n * sizeof(double));") + 1, "c", "skew_mapp",
                root=self.root),
        ]
        assert all(isinstance(p, Patch) for p in ps), ps
        return ps

    def unchanged(self) -> bool:
        return all(p.read_bytes() == data and p.stat().st_ino == self.inodes[p]
                   for p, data in self.original.items())

    def stray_files(self) -> list[str]:
        """Files in the tree other than the sources and numaprof's .numaprof/."""
        return [str(p) for p in self.root.rglob("*") if p.is_file()
                and p not in self.original and not p.is_relative_to(self.state)]

    def manifest(self) -> dict:
        return json.loads((self.backup / "manifest.json").read_text())


@pytest.fixture
def tree(tmp_path) -> Tree:
    return Tree(tmp_path)


def test_dry_run_returns_the_combined_diff_and_touches_nothing(tree):
    r = apply(tree.patches(), tree.root, tree.hashes, dry_run=True)
    assert not r.applied and r.backup_dir is None
    assert "--- a/src/serial_init.c\n+++ b/src/serial_init.c\n" in r.diff
    assert "--- a/src/lib/loops.c\n+++ b/src/lib/loops.c\n" in r.diff
    assert r.diff.count('+#include "numaprof_place.h"') == 2  # once per file
    assert tree.unchanged() and not tree.state.exists() and not tree.stray_files()


def test_apply_then_revert_restores_byte_for_byte(tree):
    patches = tree.patches()
    r = apply(patches, tree.root, tree.hashes)
    assert r.applied and set(r.files) == {str(tree.a), str(tree.b)}
    a_text = tree.a.read_text()
    assert "    numaprof_place(a, n * sizeof(double), NUMAPROF_CYCLIC);" in a_text
    assert "    numaprof_place(c, n * sizeof(double), NUMAPROF_SKEW_MAPP);" in a_text
    assert "#pragma omp parallel for schedule(static)\n    for (size_t j = 0;" in a_text
    assert "numaprof_place(b, N * sizeof *b, NUMAPROF_RANDOM);" in tree.b.read_text()
    assert stat.S_IMODE(tree.a.stat().st_mode) == 0o640  # permissions kept
    assert not tree.stray_files()
    manifest = tree.manifest()
    assert manifest["state"] == "applied" and len(manifest["files"]) == 2
    assert [f["path"] for f in manifest["files"]] == ["src/lib/loops.c", "src/serial_init.c"]
    assert str(tree.backup) == state_dir(tree.root) == r.backup_dir
    assert stat.S_IMODE(tree.state.stat().st_mode) == 0o700
    assert (tree.state / ".gitignore").read_text().splitlines()[-1] == "*"

    restored = revert(tree.root)
    assert sorted(restored) == sorted([str(tree.a), str(tree.b)])
    assert tree.unchanged() and not tree.state.exists()
    assert stat.S_IMODE(tree.a.stat().st_mode) == 0o640


def test_apply_refuses_a_file_edited_after_recording(tree):
    with open(tree.b, "a") as f:
        f.write("/* edited */\n")
    tree.original[tree.b] = tree.b.read_bytes()
    with pytest.raises(NumaprofError, match=r"loops\.c was edited after recording"):
        apply(tree.patches(), tree.root, tree.hashes)
    assert tree.unchanged() and not tree.state.exists() and not tree.stray_files()


def test_apply_refuses_a_file_the_profile_did_not_hash(tree):
    hashes = {str(tree.a): tree.hashes[str(tree.a)]}
    with pytest.raises(NumaprofError, match=r"loops\.c not among the sources"):
        apply(tree.patches(), tree.root, hashes, tree.backup)
    assert tree.unchanged() and not tree.state.exists()


def test_patches_made_from_another_text_are_refused(tree):
    patches = tree.patches()
    tree.a.write_text(tree.a.read_text() + "\n")
    tree.hashes[str(tree.a)] = sha256_file(tree.a)  # as if recorded after the edit
    with pytest.raises(NumaprofError, match="made from another version"):
        apply(patches, tree.root, tree.hashes)


def test_second_apply_before_revert_is_refused(tree):
    patches = tree.patches()  # made before: afterwards `a` is already placed
    apply(patches[:1], tree.root, tree.hashes)
    with pytest.raises(NumaprofError, match="still in place"):
        apply(patches[2:3], tree.root, tree.hashes)
    revert(tree.root)
    assert tree.unchanged()


def test_failure_after_the_first_file_restores_everything(tree, monkeypatch):
    calls = []
    real = apply_mod.overwrite

    def failing_overwrite(fd, data):
        calls.append(fd)
        if len(calls) == 2:  # half of the second file, then the disk is full
            os.pwrite(fd, data[:len(data) // 2], 0)
            raise OSError(28, "No space left on device")
        real(fd, data)

    monkeypatch.setattr(apply_mod, "overwrite", failing_overwrite)
    with pytest.raises(NumaprofError, match="every file was left as it was"):
        apply(tree.patches(), tree.root, tree.hashes)
    # The first file really had been patched, then restored from the originals.
    assert len(calls) >= 4
    assert tree.unchanged() and not tree.state.exists() and not tree.stray_files()


def test_failure_while_keeping_the_originals_changes_nothing(tree, monkeypatch):
    real = apply_state.create_at
    seen = []

    def failing_create(dir_fd, name, data):
        seen.append(name)
        if len(seen) == 3:
            raise OSError(13, "Permission denied", name)
        return real(dir_fd, name, data)

    monkeypatch.setattr(apply_state, "create_at", failing_create)
    with pytest.raises(NumaprofError, match="nothing was patched"):
        apply(tree.patches(), tree.root, tree.hashes)
    assert tree.unchanged() and not tree.state.exists() and not tree.stray_files()


def test_failure_of_the_rollback_keeps_the_backup_for_revert(tree, monkeypatch):
    calls = []
    real = apply_mod.overwrite

    def write_then_break(fd, data):
        calls.append(fd)
        if len(calls) >= 2:
            raise OSError(5, "Input/output error")
        real(fd, data)

    monkeypatch.setattr(apply_mod, "overwrite", write_then_break)
    with pytest.raises(NumaprofError, match="--revert"):
        apply(tree.patches(), tree.root, tree.hashes)
    assert tree.manifest()["state"] == "applying"
    monkeypatch.setattr(apply_mod, "overwrite", real)
    revert(tree.root)
    assert tree.unchanged() and not tree.state.exists() and not tree.stray_files()


def test_revert_refuses_when_a_patched_file_was_edited(tree):
    apply(tree.patches(), tree.root, tree.hashes)
    edited = tree.a.read_text() + "/* my own work */\n"
    tree.a.write_text(edited)
    patched_b = tree.b.read_bytes()
    with pytest.raises(NumaprofError, match=r"serial_init\.c was edited after --apply"):
        revert(tree.root)
    assert tree.a.read_text() == edited and tree.b.read_bytes() == patched_b
    assert tree.backup.exists()


def test_revert_resumes_after_an_interruption(tree):
    apply(tree.patches(), tree.root, tree.hashes)
    tree.b.write_bytes(tree.original[tree.b])  # as if a revert stopped after one file
    assert revert(tree.root) == [str(tree.a)]
    assert tree.unchanged() and not tree.state.exists()


def test_revert_refuses_a_damaged_backup(tree):
    apply(tree.patches(), tree.root, tree.hashes)
    patched = {p: p.read_bytes() for p in (tree.a, tree.b)}
    backup_file = tree.backup / tree.manifest()["files"][0]["backup"]
    backup_file.write_bytes(b"garbage")
    with pytest.raises(NumaprofError, match="missing or damaged"):
        revert(tree.root)
    assert all(p.read_bytes() == data for p, data in patched.items())


def test_revert_without_backup_is_a_one_line_error(tmp_path):
    with pytest.raises(NumaprofError, match="nothing to revert") as e:
        revert(tmp_path)
    assert "\n" not in str(e.value)


def test_apply_follows_symlinks_to_the_real_file(tree):
    link = tree.root / "link.c"
    link.symlink_to(tree.a)
    line = tree.a.read_text().splitlines().index("        a[j] = 0.0;") + 1
    p = parallelize_first_touch(link, line, root=tree.root)
    apply([p], tree.root, tree.hashes)
    assert link.is_symlink() and "#pragma omp parallel for" in tree.a.read_text()
    revert(tree.root)
    assert link.is_symlink() and tree.unchanged()


def test_patches_through_a_link_and_the_real_name_merge_into_one(tree):
    link = tree.root / "alias.c"
    link.symlink_to(tree.a)
    lines = tree.a.read_text().splitlines()
    via_link = parallelize_first_touch(link, lines.index("        a[j] = 0.0;") + 1,
                                       root=tree.root)
    direct = place_after_allocation(tree.a, lines.index(
        "    double *a = malloc(n * sizeof(double));") + 1, "a", "cyclic", root=tree.root)
    r = apply([via_link, direct], tree.root, tree.hashes)
    assert r.files == [str(tree.a)]
    text = tree.a.read_text()
    assert "#pragma omp parallel for" in text and "numaprof_place(a," in text
    revert(tree.root)
    assert tree.unchanged()


def test_profile_level_apply_and_revert(tree, tmp_path):
    from numaprof.errors import ProfileError
    from numaprof.recommender.apply import apply_to_profile, revert_profile
    from numaprof.recommender.sources import SCHEMA

    profile = tmp_path / "profile"
    with pytest.raises(ProfileError, match="no sources.json"):
        apply_to_profile(profile, tree.patches(), root=tree.root)
    (profile / "sources.json").write_text(json.dumps({"schema": SCHEMA,
                                                      "files": tree.hashes}))
    r = apply_to_profile(profile, tree.patches(), root=tree.root, dry_run=True)
    assert r.diff and tree.unchanged()
    r = apply_to_profile(profile, tree.patches(), root=tree.root)
    assert r.backup_dir == str(tree.backup) and not tree.unchanged()
    assert not (profile / "apply-backup").exists()  # never in the profile
    # the profile is outside the tree: --revert finds the apply from the directory it runs in
    with pytest.raises(NumaprofError, match="nothing to revert"):
        revert_profile(profile, cwd=str(tmp_path))
    restored = revert_profile(profile, cwd=str(tree.root / "src" / "lib"))
    assert sorted(restored) == sorted([str(tree.a), str(tree.b)])
    assert tree.unchanged() and not tree.state.exists()


def test_interrupt_between_write_and_bookkeeping_still_restores(tree, monkeypatch):
    calls = []
    real = apply_mod.overwrite

    def write_then_interrupt(fd, data):
        calls.append(fd)
        real(fd, data)  # the first file is patched ...
        if len(calls) == 1:
            raise KeyboardInterrupt  # ... and Ctrl-C arrives before apply notes it

    monkeypatch.setattr(apply_mod, "overwrite", write_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        apply(tree.patches(), tree.root, tree.hashes)
    assert tree.unchanged() and not tree.state.exists() and not tree.stray_files()


def test_interrupt_while_backing_up_leaves_no_backup(tree, monkeypatch):
    def interrupted(dir_fd, name, data):
        raise KeyboardInterrupt

    monkeypatch.setattr(apply_state, "create_at", interrupted)
    with pytest.raises(KeyboardInterrupt):
        apply(tree.patches(), tree.root, tree.hashes)
    assert tree.unchanged() and not tree.state.exists()
