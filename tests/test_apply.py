"""`suggest --apply` machinery (recommender/apply.py): hash check, all-or-none, revert.

Every test works on copies in tmp_path.  "Nothing changed" is checked byte for byte,
including that no temporary files are left beside the sources.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

import numaprof.recommender.apply as apply_mod
from numaprof.errors import NumaprofError
from numaprof.recommender.apply import apply, read_backup, revert
from numaprof.recommender.patch import Patch, parallelize_first_touch, place_after_allocation
from numaprof.recommender.sources import sha256_file

ROOT = Path(__file__).resolve().parent.parent
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
        self.backup = base / "profile" / "apply-backup"
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
        return all(p.read_bytes() == data for p, data in self.original.items())

    def stray_files(self) -> list[str]:
        return [str(p) for p in self.root.rglob("*") if p.is_file()
                and p not in self.original]


@pytest.fixture
def tree(tmp_path) -> Tree:
    return Tree(tmp_path)


def test_dry_run_returns_the_combined_diff_and_touches_nothing(tree):
    r = apply(tree.patches(), tree.root, tree.hashes, tree.backup, dry_run=True)
    assert not r.applied and r.backup_dir is None
    assert "--- a/src/serial_init.c\n+++ b/src/serial_init.c\n" in r.diff
    assert "--- a/src/lib/loops.c\n+++ b/src/lib/loops.c\n" in r.diff
    assert r.diff.count('+#include "numaprof_place.h"') == 2  # once per file
    assert tree.unchanged() and not tree.backup.exists() and not tree.stray_files()


def test_apply_then_revert_restores_byte_for_byte(tree):
    patches = tree.patches()
    r = apply(patches, tree.root, tree.hashes, tree.backup)
    assert r.applied and set(r.files) == {str(tree.a), str(tree.b)}
    a_text = tree.a.read_text()
    assert "    numaprof_place(a, n * sizeof(double), NUMAPROF_CYCLIC);" in a_text
    assert "    numaprof_place(c, n * sizeof(double), NUMAPROF_SKEW_MAPP);" in a_text
    assert "#pragma omp parallel for schedule(static)\n    for (size_t j = 0;" in a_text
    assert "numaprof_place(b, N * sizeof *b, NUMAPROF_RANDOM);" in tree.b.read_text()
    assert stat.S_IMODE(tree.a.stat().st_mode) == 0o640  # permissions kept
    assert not tree.stray_files()
    manifest = read_backup(str(tree.backup))
    assert manifest["state"] == "applied" and len(manifest["files"]) == 2
    assert stat.S_IMODE(tree.backup.stat().st_mode) == 0o700

    restored = revert(str(tree.backup))
    assert sorted(restored) == sorted([str(tree.a), str(tree.b)])
    assert tree.unchanged() and not tree.backup.exists()
    assert stat.S_IMODE(tree.a.stat().st_mode) == 0o640


def test_apply_refuses_a_file_edited_after_recording(tree):
    with open(tree.b, "a") as f:
        f.write("/* edited */\n")
    tree.original[tree.b] = tree.b.read_bytes()
    with pytest.raises(NumaprofError, match=r"loops\.c was edited after recording"):
        apply(tree.patches(), tree.root, tree.hashes, tree.backup)
    assert tree.unchanged() and not tree.backup.exists() and not tree.stray_files()


def test_apply_refuses_a_file_the_profile_did_not_hash(tree):
    hashes = {str(tree.a): tree.hashes[str(tree.a)]}
    with pytest.raises(NumaprofError, match=r"loops\.c not among the sources"):
        apply(tree.patches(), tree.root, hashes, tree.backup)
    assert tree.unchanged() and not tree.backup.exists()


def test_patches_made_from_another_text_are_refused(tree):
    patches = tree.patches()
    tree.a.write_text(tree.a.read_text() + "\n")
    tree.hashes[str(tree.a)] = sha256_file(tree.a)  # as if recorded after the edit
    with pytest.raises(NumaprofError, match="made from another version"):
        apply(patches, tree.root, tree.hashes, tree.backup)


def test_second_apply_before_revert_is_refused(tree):
    apply(tree.patches()[:1], tree.root, tree.hashes, tree.backup)
    with pytest.raises(NumaprofError, match="still in place"):
        apply(tree.patches()[2:3], tree.root, tree.hashes, tree.backup)
    revert(str(tree.backup))
    assert tree.unchanged()


def test_failure_after_the_first_rename_restores_everything(tree, monkeypatch):
    calls = []
    real = apply_mod._replace

    def failing_replace(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise OSError(28, "No space left on device", dst)
        real(src, dst)

    monkeypatch.setattr(apply_mod, "_replace", failing_replace)
    with pytest.raises(NumaprofError, match="every file was left as it was"):
        apply(tree.patches(), tree.root, tree.hashes, tree.backup)
    # The first file really had been replaced, then restored from the backup.
    assert len(calls) >= 3
    assert tree.unchanged() and not tree.backup.exists() and not tree.stray_files()


def test_failure_while_writing_the_new_texts_changes_nothing(tree, monkeypatch):
    real = apply_mod._temp_beside
    seen = []

    def failing_temp(path, data, mode):
        seen.append(path)
        if len(seen) == 2:
            raise OSError(13, "Permission denied", path)
        return real(path, data, mode)

    monkeypatch.setattr(apply_mod, "_temp_beside", failing_temp)
    with pytest.raises(NumaprofError, match="every file was left as it was"):
        apply(tree.patches(), tree.root, tree.hashes, tree.backup)
    assert tree.unchanged() and not tree.backup.exists() and not tree.stray_files()


def test_failure_of_the_rollback_keeps_the_backup_for_revert(tree, monkeypatch):
    calls = []
    real = apply_mod._replace

    def replace_then_break(src, dst):
        calls.append(dst)
        if len(calls) >= 2:
            raise OSError(5, "Input/output error", dst)
        real(src, dst)

    monkeypatch.setattr(apply_mod, "_replace", replace_then_break)
    with pytest.raises(NumaprofError, match="--revert"):
        apply(tree.patches(), tree.root, tree.hashes, tree.backup)
    assert read_backup(str(tree.backup))["state"] == "applying"
    monkeypatch.setattr(apply_mod, "_replace", real)
    revert(str(tree.backup))
    assert tree.unchanged() and not tree.backup.exists() and not tree.stray_files()


def test_revert_refuses_when_a_patched_file_was_edited(tree):
    apply(tree.patches(), tree.root, tree.hashes, tree.backup)
    edited = tree.a.read_text() + "/* my own work */\n"
    tree.a.write_text(edited)
    patched_b = tree.b.read_bytes()
    with pytest.raises(NumaprofError, match=r"serial_init\.c was edited after --apply"):
        revert(str(tree.backup))
    assert tree.a.read_text() == edited and tree.b.read_bytes() == patched_b
    assert tree.backup.exists()


def test_revert_resumes_after_an_interruption(tree):
    apply(tree.patches(), tree.root, tree.hashes, tree.backup)
    tree.b.write_bytes(tree.original[tree.b])  # as if a revert stopped after one file
    assert revert(str(tree.backup)) == [str(tree.a)]
    assert tree.unchanged() and not tree.backup.exists()


def test_revert_refuses_a_damaged_backup(tree):
    apply(tree.patches(), tree.root, tree.hashes, tree.backup)
    patched = {p: p.read_bytes() for p in (tree.a, tree.b)}
    backup_file = tree.backup / read_backup(str(tree.backup))["files"][0]["backup"]
    backup_file.write_bytes(b"garbage")
    with pytest.raises(NumaprofError, match="missing or damaged"):
        revert(str(tree.backup))
    assert all(p.read_bytes() == data for p, data in patched.items())


def test_revert_without_backup_is_a_one_line_error(tmp_path):
    with pytest.raises(NumaprofError, match="nothing to revert") as e:
        revert(str(tmp_path / "apply-backup"))
    assert "\n" not in str(e.value)


def test_apply_follows_symlinks_to_the_real_file(tree):
    link = tree.root / "link.c"
    link.symlink_to(tree.a)
    line = tree.a.read_text().splitlines().index("        a[j] = 0.0;") + 1
    p = parallelize_first_touch(link, line, root=tree.root)
    apply([p], tree.root, tree.hashes, tree.backup)
    assert link.is_symlink() and "#pragma omp parallel for" in tree.a.read_text()
    revert(str(tree.backup))
    assert link.is_symlink() and tree.unchanged()


def test_patches_through_a_link_and_the_real_name_merge_into_one(tree):
    link = tree.root / "alias.c"
    link.symlink_to(tree.a)
    lines = tree.a.read_text().splitlines()
    via_link = parallelize_first_touch(link, lines.index("        a[j] = 0.0;") + 1,
                                       root=tree.root)
    direct = place_after_allocation(tree.a, lines.index(
        "    double *a = malloc(n * sizeof(double));") + 1, "a", "cyclic", root=tree.root)
    r = apply([via_link, direct], tree.root, tree.hashes, tree.backup)
    assert r.files == [str(tree.a)]
    text = tree.a.read_text()
    assert "#pragma omp parallel for" in text and "numaprof_place(a," in text
    revert(str(tree.backup))
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
    assert r.backup_dir == str(profile / "apply-backup") and not tree.unchanged()
    assert sorted(revert_profile(profile)) == sorted([str(tree.a), str(tree.b)])
    assert tree.unchanged()


def test_interrupt_between_rename_and_bookkeeping_still_restores(tree, monkeypatch):
    calls = []
    real = apply_mod._replace

    def rename_then_interrupt(src, dst):
        calls.append(dst)
        real(src, dst)  # the first file is replaced ...
        if len(calls) == 1:
            raise KeyboardInterrupt  # ... and Ctrl-C arrives before apply notes it

    monkeypatch.setattr(apply_mod, "_replace", rename_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        apply(tree.patches(), tree.root, tree.hashes, tree.backup)
    assert tree.unchanged() and not tree.backup.exists() and not tree.stray_files()


def test_interrupt_while_backing_up_leaves_no_backup(tree, monkeypatch):
    def interrupted(path, data, mode):
        raise KeyboardInterrupt

    monkeypatch.setattr(apply_mod, "_write_new", interrupted)
    with pytest.raises(KeyboardInterrupt):
        apply(tree.patches(), tree.root, tree.hashes, tree.backup)
    assert tree.unchanged() and not tree.backup.exists()
