"""`suggest --apply` / `--revert` against careless and hostile use (issue 11, items 2-4).

- the originals outlive the profile: `record` rotates profiles away, the backup stays;
- root patching another user's file keeps its owner, group, mode and inode (hard links);
- a crafted profile or apply record is data, never instructions: nothing is written
  outside the tree the user applies to, nor anything the apply did not write;
- a full disk or a SIGKILL at any write of apply or revert never leaves a file half
  written, and `--revert` always gets the originals back.

The fault tests wrap the `os` functions that change files (open for writing, write,
fsync, rename, mkdir, unlink, ...) rather than numaprof's own helpers, so that they count
every write whatever the implementation, and fail the k-th one for every k.

One file (~900 lines) on purpose: each case builds the same small tree, profile and
apply record (the fixtures at the top), and the cases read as one threat list.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from helpers import ROOT, fill_disk, run_numaprof

from numaprof.errors import NumaprofError
from numaprof.recommender.apply import apply_to_profile, revert_profile
from numaprof.recommender.patch import Patch, place_after_allocation
from numaprof.recommender.sources import SCHEMA, sha256_file

EXAMPLES = ROOT / "examples"
DATA = ROOT / "tests" / "data" / "patch"
USER = "numaprof-test"  # the account tests/test_unprivileged.py uses


def _line(path: Path, text: str) -> int:
    return path.read_text().splitlines().index(text) + 1


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Project:
    """A source tree with its profile inside, as `numaprof record` leaves it:

    proj/src/serial_init.c, proj/src/lib/loops.c, proj/numaprof.data/sources.json.
    """

    def __init__(self, base: Path, size: int = 0):
        self.base = base
        self.root = base / "proj"
        (self.root / "src" / "lib").mkdir(parents=True)
        self.a = self.root / "src" / "serial_init.c"
        self.b = self.root / "src" / "lib" / "loops.c"
        shutil.copyfile(EXAMPLES / "serial_init.c", self.a)
        shutil.copyfile(DATA / "loops.c", self.b)
        if size:  # loops.c made `size` bytes long by a comment at its end
            with open(self.b, "a") as f:
                f.write("/*" + "-" * (size - self.b.stat().st_size - 5) + "*/\n")
        os.chmod(self.a, 0o640)
        self.files = [self.a, self.b]
        self.original = {p: p.read_bytes() for p in self.files}
        self.inodes = {p: p.stat().st_ino for p in self.files}
        self.prof = self.root / "numaprof.data"
        self.record()

    def record(self) -> None:
        """What `record -o numaprof.data` does to the profile: the last but one goes,
        the last becomes .old, a new one holds the hashes of the sources as they are."""
        old = self.prof.with_name(self.prof.name + ".old")
        if old.exists():
            shutil.rmtree(old)
        if self.prof.exists():
            self.prof.rename(old)
        self.prof.mkdir(mode=0o700)
        hashes = {str(p): sha256_file(p) for p in self.files}
        (self.prof / "sources.json").write_text(json.dumps({"schema": SCHEMA,
                                                            "files": hashes}))

    def patches(self) -> list[Patch]:
        ps = [
            place_after_allocation(self.a, _line(self.a, "    double *a = malloc(n * sizeof(double));"),
                                   "a", "cyclic", root=self.root),
            place_after_allocation(self.b, _line(self.b, "    double *b = calloc(N, sizeof *b);"),
                                   "b", "random", root=self.root),
        ]
        assert all(isinstance(p, Patch) for p in ps), ps
        return ps

    def unchanged(self) -> bool:
        return all(p.read_bytes() == data for p, data in self.original.items())

    def same_inodes(self) -> bool:
        return all(p.stat().st_ino == ino for p, ino in self.inodes.items())

    def extra_files(self) -> list[str]:
        """Everything in the tree that is neither a source nor the profile."""
        profiles = (self.prof, self.prof.with_name(self.prof.name + ".old"))
        return sorted(str(p.relative_to(self.root)) for p in self.root.rglob("*")
                      if p not in self.files and not any(p.is_relative_to(d) for d in profiles)
                      and not (p.is_dir() and any(f.is_relative_to(p) for f in self.files)))

    def pristine(self) -> bool:
        """The tree exactly as it was: same bytes, same inodes, nothing added."""
        return self.unchanged() and self.same_inodes() and not self.extra_files()


@pytest.fixture
def project(tmp_path) -> Project:
    return Project(tmp_path)


def _one_line(e: BaseException) -> str:
    msg = str(e)
    assert msg and "\n" not in msg, msg
    return msg


# ------------------------------------------------------- 2. the backup outlives the profile

def test_the_originals_survive_two_rerecords(project, monkeypatch):
    """Item 2: apply, then record twice (the profile goes to .old, then is deleted):
    --revert still puts the originals back."""
    monkeypatch.chdir(project.root)
    apply_to_profile(project.prof, project.patches(), root=project.root)
    assert not project.unchanged()
    project.record()
    project.record()
    restored = revert_profile(project.prof)
    assert sorted(restored) == sorted(map(str, project.files))
    assert project.pristine()


def test_revert_finds_the_apply_from_the_profile_or_from_inside_the_project(tmp_path,
                                                                           monkeypatch):
    """--revert given the profile from another directory, or run in a subdirectory of the
    project without a profile there, finds the same apply."""
    project = Project(tmp_path)
    monkeypatch.chdir(project.root)
    apply_to_profile(project.prof, project.patches(), root=project.root)
    project.record()
    monkeypatch.chdir(tmp_path)  # outside the project: found through the profile
    revert_profile(project.prof)
    assert project.pristine()
    project.record()

    monkeypatch.chdir(project.root)
    apply_to_profile(project.prof, project.patches(), root=project.root)
    shutil.rmtree(project.prof)
    monkeypatch.chdir(project.root / "src" / "lib")  # no profile here: found upwards
    revert_profile(Path("numaprof.data"))
    assert project.pristine()


def test_a_second_apply_never_replaces_the_first_backup(project, monkeypatch):
    """Item 2: after apply, re-record (the new profile hashes the patched text) and apply
    again: refused, since its backup would hold the patched text, not the originals."""
    monkeypatch.chdir(project.root)
    apply_to_profile(project.prof, project.patches()[:1], root=project.root)
    patched = {p: p.read_bytes() for p in project.files}
    project.record()
    second = place_after_allocation(project.a, _line(
        project.a, "    double *c = malloc(n * sizeof(double));"), "c", "cyclic",
        root=project.root)
    assert isinstance(second, Patch)
    with pytest.raises(NumaprofError, match="--revert") as e:
        apply_to_profile(project.prof, [second], root=project.root)
    _one_line(e.value)
    assert all(p.read_bytes() == data for p, data in patched.items())
    revert_profile(project.prof)
    assert project.pristine()


@pytest.mark.e2e
def test_record_apply_record_twice_revert(tmp_path):
    """Item 2 end to end: the real `record` rotating the profile twice after --apply."""
    if shutil.which("g++") is None:
        pytest.skip("g++ not installed")
    proj = tmp_path / "proj"
    proj.mkdir()
    src = proj / "cxx_arrays.cpp"
    shutil.copyfile(EXAMPLES / "cxx_arrays.cpp", src)
    original = src.read_bytes()
    exe = proj / "cxx_arrays"
    subprocess.run(["g++", "-O2", "-g", "-fopenmp", "-o", str(exe), str(src)], check=True)
    env = {"OMP_NUM_THREADS": "2"}
    record = ["record", "-o", "prof", "--freq", "8000", "--", exe, "4"]
    run_numaprof(*record, cwd=proj, env=env, check=True)
    r = run_numaprof("suggest", "prof", "--target", "2s", "--apply", cwd=proj)
    assert r.returncode == 0, r.stderr
    assert src.read_bytes() != original
    for _ in range(2):
        run_numaprof(*record, cwd=proj, env=env, check=True)
    assert not (proj / "prof.old" / "apply-backup").exists()
    r = run_numaprof("suggest", "prof", "--revert", cwd=proj)
    assert r.returncode == 0, r.stderr
    assert src.read_bytes() == original


# ------------------------------------------- 3. root keeps owner, mode, inode, hard links

@pytest.fixture
def other_user() -> pwd.struct_passwd:
    if os.geteuid() != 0:
        pytest.skip("needs root to act on another user's files")
    if subprocess.run(["id", USER], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/bin/sh", USER],
                       check=True)
    return pwd.getpwnam(USER)


def _meta(p: Path) -> tuple:
    st = p.stat()
    return st.st_ino, st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode), st.st_nlink


def test_root_keeps_owner_group_mode_inode_and_hard_links(project, other_user, monkeypatch):
    """Item 3: root applies and reverts on a user's files, one of them hard-linked from
    outside the tree: every attribute stays, and the link sees each content."""
    for p in project.files:
        os.chown(p, other_user.pw_uid, other_user.pw_gid)
    os.chmod(project.b, 0o604)
    elsewhere = project.base / "elsewhere"
    elsewhere.mkdir()
    link = elsewhere / "serial_init.c"
    os.link(project.a, link)
    before = {p: _meta(p) for p in project.files}
    monkeypatch.chdir(project.root)

    apply_to_profile(project.prof, project.patches(), root=project.root)
    assert {p: _meta(p) for p in project.files} == before
    assert not project.unchanged()
    assert link.read_bytes() == project.a.read_bytes()  # the link sees the patched text

    revert_profile(project.prof)
    assert {p: _meta(p) for p in project.files} == before
    assert project.unchanged() and link.read_bytes() == project.original[project.a]


# ----------------------------------------------- 4. a crafted profile is never obeyed

def _outside(project: Project) -> Path:
    d = project.base / "outside"
    d.mkdir(exist_ok=True)
    return d


def test_a_backup_inside_a_crafted_profile_is_never_written(project):
    """Item 4: a profile whose apply-backup/manifest.json (the old layout) names files
    outside the project: `suggest PROFILE --revert` creates nothing, overwrites nothing."""
    out = _outside(project)
    victim = out / "existing.txt"
    victim.write_bytes(b"keep\n")
    backup = project.prof / "apply-backup"
    (backup / "files").mkdir(parents=True)
    (backup / "files" / "0000").write_bytes(b"evil\n")
    evil = _sha(b"evil\n")
    (backup / "manifest.json").write_text(json.dumps({
        "schema": "numaprof.apply-backup/1", "state": "applied", "root": "/",
        "files": [
            {"path": str(out / "new.sh"), "backup": "files/0000", "mode": 0o755,
             "original_sha256": evil, "patched_sha256": "0" * 64},
            {"path": str(victim), "backup": "files/0000", "mode": 0o644,
             "original_sha256": evil, "patched_sha256": _sha(b"keep\n")},
            {"path": "../outside/existing.txt", "backup": "files/0000", "mode": 0o644,
             "original_sha256": evil, "patched_sha256": _sha(b"keep\n")},
        ]}))
    r = run_numaprof("suggest", project.prof, "--revert", cwd=project.root)
    assert r.returncode != 0
    assert r.stderr.startswith("numaprof: ") and len(r.stderr.strip().splitlines()) == 1, \
        r.stderr
    assert sorted(os.listdir(out)) == ["existing.txt"] and victim.read_bytes() == b"keep\n"
    assert project.pristine()


def _tamper_path(escape):
    """A tamper that points the first entry of the apply record at `escape(project)` and
    makes the record claim exactly the content found there, so that only the path check
    can stop the write."""

    def tamper(project: Project, doc: dict, state: Path) -> None:
        target = escape(project)
        entry = doc["files"][0]
        entry["path"] = target if isinstance(target, str) else str(target)
        on_disk = project.base / "outside" / "x.c"
        entry["patched_sha256"] = _sha(on_disk.read_bytes())
        (state / entry["backup"]).write_bytes(b"evil\n")
        entry["original_sha256"] = _sha(b"evil\n")

    return tamper


def _tamper_backup_name(project: Project, doc: dict, state: Path) -> None:
    doc["files"][0]["backup"] = "../../../outside/x.c"


def _tamper_missing_file(project: Project, doc: dict, state: Path) -> None:
    doc["files"][0]["path"] = "src/new.c"
    doc["files"][0]["patched_sha256"] = "0" * 64


def _tamper_patched_hash(project: Project, doc: dict, state: Path) -> None:
    doc["files"][0]["patched_sha256"] = "0" * 64  # "the apply left other content"


def _symlinked_dir(project: Project) -> str:
    (project.root / "esc").symlink_to(project.base / "outside")
    return "esc/x.c"


def _symlinked_file(project: Project) -> str:
    (project.root / "src" / "l.c").symlink_to(project.base / "outside" / "x.c")
    return "src/l.c"


def _tamper_manifest_link(project: Project, doc: dict, state: Path) -> None:
    """The manifest replaced by a symbolic link to one elsewhere."""
    _tamper_path(lambda p: "../outside/x.c")(project, doc, state)
    elsewhere = project.base / "manifest.json"
    elsewhere.write_text(json.dumps(doc))
    (state / "manifest.json").unlink()
    (state / "manifest.json").symlink_to(elsewhere)
    doc.clear()  # nothing more to write through the link


def _tamper_mode(project: Project, doc: dict, state: Path) -> None:
    state.chmod(0o777)


# each tamper, and what the refusal must say
TAMPERS = {
    "dotdot": (_tamper_path(lambda p: "../outside/x.c"), "leaves the tree"),
    "absolute": (_tamper_path(lambda p: str(p.base / "outside" / "x.c")),
                 "not a relative path"),
    "symlinked directory": (_tamper_path(_symlinked_dir), "symbolic link"),
    "symlinked file": (_tamper_path(_symlinked_file), "symbolic link"),
    "backup name": (_tamper_backup_name, "not a name apply gives"),
    "file not there": (_tamper_missing_file, r"new\.c no longer exists"),
    "content not the apply's": (_tamper_patched_hash, "edited after --apply"),
    "manifest is a link": (_tamper_manifest_link, "manifest.json: Too many levels"),
    "writable by others": (_tamper_mode, "writable by others"),
}


@pytest.mark.parametrize("how", TAMPERS)
def test_revert_writes_only_what_the_apply_wrote(project, monkeypatch, how):
    """Item 4: a tampered apply record (path escaping the tree by `..`, an absolute path
    or a symbolic link, a backup name escaping the record, a file the apply did not
    leave, a manifest that is a link, a record others could write): one line, nothing
    written anywhere."""
    monkeypatch.chdir(project.root)
    victim = _outside(project) / "x.c"
    victim.write_bytes(b"precious\n")
    apply_to_profile(project.prof, project.patches(), root=project.root)
    patched = {p: p.read_bytes() for p in project.files}
    state = project.root / ".numaprof" / "apply"
    doc = json.loads((state / "manifest.json").read_text())
    tamper, says = TAMPERS[how]
    tamper(project, doc, state)
    if doc:
        (state / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(NumaprofError, match=says) as e:
        revert_profile(project.prof)
    _one_line(e.value)
    assert victim.read_bytes() == b"precious\n" and os.listdir(victim.parent) == ["x.c"]
    assert all(p.read_bytes() == data for p, data in patched.items())
    assert not (project.root / "src" / "new.c").exists()


def test_a_foreign_apply_record_is_refused(project, other_user, monkeypatch):
    """An apply record that another user could have written (as /tmp/.numaprof would
    be) is not used, as git refuses a repository of another owner."""
    monkeypatch.chdir(project.root)
    apply_to_profile(project.prof, project.patches(), root=project.root)
    patched = {p: p.read_bytes() for p in project.files}
    state = project.root / ".numaprof"
    for p in [state, *state.rglob("*")]:
        os.chown(p, other_user.pw_uid, other_user.pw_gid, follow_symlinks=False)
    with pytest.raises(NumaprofError, match="belongs to") as e:
        revert_profile(project.prof)
    _one_line(e.value)
    assert all(p.read_bytes() == data for p, data in patched.items())


def _outside_copy(project: Project) -> Path:
    out = _outside(project) / "serial_init.c"
    shutil.copyfile(project.a, out)
    return out


@pytest.mark.parametrize("via", ["path", "symlink"])
def test_apply_writes_nothing_outside_the_tree(project, monkeypatch, via):
    """Item 4, apply side: a crafted sources.json naming a file outside the tree (with
    its right hash), directly or through a symbolic link inside: refused, untouched."""
    out = _outside_copy(project)
    target = out
    if via == "symlink":
        target = project.root / "src" / "shared.c"
        target.symlink_to(out)
    doc = json.loads((project.prof / "sources.json").read_text())
    doc["files"][str(out)] = sha256_file(out)
    (project.prof / "sources.json").write_text(json.dumps(doc))
    patch = place_after_allocation(target, _line(out, "    double *a = malloc(n * sizeof(double));"),
                                   "a", "cyclic", root=project.root)
    assert isinstance(patch, Patch)
    monkeypatch.chdir(project.root)
    with pytest.raises(NumaprofError, match="outside") as e:
        apply_to_profile(project.prof, [*project.patches(), patch], root=project.root)
    _one_line(e.value)
    assert out.read_bytes() == project.original[project.a]
    if via == "symlink":
        target.unlink()
    assert project.pristine()


@pytest.fixture
def no_hang():
    """Fail the test, rather than hang it, if an open of a FIFO blocks."""
    def expire(signum, frame):
        raise TimeoutError("blocked for 20 s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def test_a_fifo_in_place_of_a_source_is_refused_at_once(project, monkeypatch, no_hang):
    """A crafted sources.json (and patch) naming a FIFO in the tree: apply neither hangs
    on it nor writes anything."""
    fifo = project.root / "src" / "pipe.c"
    os.mkfifo(fifo)
    text = project.original[project.a].decode()
    crafted = Patch(path=str(fifo), original_hash=_sha(project.original[project.a]),
                    diff="", new_text=text + "/* x */\n", edits=(), root=str(project.root))
    doc = json.loads((project.prof / "sources.json").read_text())
    doc["files"][str(fifo)] = crafted.original_hash
    (project.prof / "sources.json").write_text(json.dumps(doc))
    monkeypatch.chdir(project.root)
    with pytest.raises(NumaprofError, match="not a regular file") as e:
        apply_to_profile(project.prof, [*project.patches(), crafted], root=project.root)
    _one_line(e.value)
    fifo.unlink()
    assert project.pristine()


def test_revert_refuses_a_fifo_in_place_of_a_patched_file(project, monkeypatch, no_hang):
    monkeypatch.chdir(project.root)
    apply_to_profile(project.prof, project.patches(), root=project.root)
    patched_a = project.a.read_bytes()
    project.b.unlink()
    os.mkfifo(project.b)
    with pytest.raises(NumaprofError, match="not a regular file") as e:
        revert_profile(project.prof)
    _one_line(e.value)
    assert stat.S_ISFIFO(project.b.lstat().st_mode) and project.a.read_bytes() == patched_a


def test_two_hard_links_of_one_file_are_refused(project, monkeypatch):
    """Two names of one inode patched separately: the second write would undo the first
    (and a revert would then take it for an edit)."""
    twin = project.root / "src" / "twin.c"
    os.link(project.a, twin)
    doc = json.loads((project.prof / "sources.json").read_text())
    doc["files"][str(twin)] = sha256_file(twin)
    (project.prof / "sources.json").write_text(json.dumps(doc))
    second = place_after_allocation(twin, _line(twin, "    double *c = malloc(n * sizeof(double));"),
                                    "c", "cyclic", root=project.root)
    monkeypatch.chdir(project.root)
    with pytest.raises(NumaprofError, match="hard links") as e:
        apply_to_profile(project.prof, [*project.patches(), second], root=project.root)
    _one_line(e.value)
    twin.unlink()
    assert project.pristine()


def test_a_second_numaprof_waits_its_turn(project, monkeypatch):
    """While one apply or revert holds the tree, another refuses rather than interleave."""
    import fcntl

    monkeypatch.chdir(project.root)
    state = project.root / ".numaprof"
    state.mkdir(mode=0o700)
    fd = os.open(state, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(NumaprofError, match="another numaprof") as e:
            apply_to_profile(project.prof, project.patches(), root=project.root)
        _one_line(e.value)
        assert project.unchanged() and project.same_inodes()
    finally:
        os.close(fd)
    apply_to_profile(project.prof, project.patches(), root=project.root)
    revert_profile(project.prof)
    assert project.unchanged() and project.same_inodes()


# ------------------------------------------- read-only and foreign-owned sources

def test_a_read_only_source_is_refused_even_for_root(project, monkeypatch):
    os.chmod(project.b, 0o444)
    monkeypatch.chdir(project.root)
    with pytest.raises(NumaprofError, match="read-only") as e:
        apply_to_profile(project.prof, project.patches(), root=project.root)
    assert "loops.c" in _one_line(e.value)
    assert project.pristine()


def test_a_read_only_directory_is_refused_even_for_root(project, monkeypatch):
    os.chmod(project.b.parent, 0o555)
    monkeypatch.chdir(project.root)
    try:
        with pytest.raises(NumaprofError, match="read-only") as e:
            apply_to_profile(project.prof, project.patches(), root=project.root)
        assert "lib" in _one_line(e.value)
        assert project.pristine()
    finally:
        os.chmod(project.b.parent, 0o755)


_AS_USER = """
import sys
from numaprof.errors import NumaprofError
from numaprof.recommender.apply import apply_to_profile
from numaprof.recommender.patch import place_after_allocation
root, path, line = sys.argv[1], sys.argv[2], int(sys.argv[3])
p = place_after_allocation(path, line, "b", "random", root=root)
try:
    apply_to_profile(root + "/numaprof.data", [p], root=root)
except NumaprofError as e:
    print(e)
    sys.exit(e.exit_code)
"""


@pytest.mark.parametrize("case", ["foreign-owned file", "read-only directory",
                                  "read-only project directory"])
def test_an_ordinary_user_cannot_patch_what_they_cannot_edit(other_user, case):
    """As an ordinary user: a source owned by someone else (readable, not writable), a
    read-only directory holding it, a read-only project directory (where the backup
    would go): one line, nothing changed, nothing left."""
    base = Path(tempfile.mkdtemp(prefix="numaprof-apply-", dir="/tmp"))
    try:
        base.chmod(0o755)
        project = Project(base)
        for p in [project.root, *project.root.rglob("*")]:
            os.chown(p, other_user.pw_uid, other_user.pw_gid, follow_symlinks=False)
        if case == "foreign-owned file":
            os.chown(project.b, 0, 0)
            os.chmod(project.b, 0o644)
        elif case == "read-only directory":
            os.chmod(project.b.parent, 0o555)
        else:
            os.chmod(project.root, 0o555)
        line = _line(project.b, "    double *b = calloc(N, sizeof *b);")
        proc = subprocess.run(
            ["runuser", "-u", USER, "--", sys.executable, "-c", _AS_USER, str(project.root),
             str(project.b), str(line)],
            capture_output=True, text=True, cwd=project.root, timeout=120,
            env={"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT)})
        assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
        assert len(proc.stdout.strip().splitlines()) == 1, proc.stdout
        named = {"foreign-owned file": "loops.c", "read-only directory": "lib",
                 "read-only project directory": "proj"}[case]
        assert named in proc.stdout, proc.stdout
        assert not proc.stderr, proc.stderr
        os.chmod(project.root, 0o755)
        os.chmod(project.b.parent, 0o755)
        assert project.pristine()
    finally:
        shutil.rmtree(base, ignore_errors=True)


# ---------------------------------------------------------- faults at every write

_MUTATING_OPEN = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_OPS = ("open", "write", "pwrite", "fsync", "fdatasync", "ftruncate", "truncate", "replace",
        "rename", "mkdir", "unlink", "rmdir", "link", "symlink", "fchmod", "chmod", "fchown",
        "chown")


class Faults:
    """Counts every call of `os` that changes a file; optionally acts at the k-th.

    `action(name, real, args, kwargs)` is called instead of the k-th operation; for
    write/pwrite the default actions first write half of the bytes, as a disk that
    fills up in the middle of a write does.
    """

    def __init__(self, at: int | None = None, action=None):
        self.at, self.action, self.count, self.seen = at, action, 0, []

    def install(self, monkeypatch) -> None:
        for name in _OPS:
            real = getattr(os, name)
            monkeypatch.setattr(os, name, self._wrap(name, real))

    def _wrap(self, name, real):
        def op(*args, **kwargs):
            if name == "open":
                flags = args[1] if len(args) > 1 else kwargs.get("flags", 0)
                if not flags & _MUTATING_OPEN:
                    return real(*args, **kwargs)
            self.count += 1
            self.seen.append(name)
            if self.count == self.at:
                return self.action(name, real, args, kwargs)
            return real(*args, **kwargs)
        return op


def _half_write(name, real, args):
    if name == "write":
        real(args[0], bytes(args[1])[:len(args[1]) // 2])
    elif name == "pwrite":
        real(args[0], bytes(args[1])[:len(args[1]) // 2], args[2])


def _enospc(name, real, args, kwargs):
    _half_write(name, real, args)
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _sigkill(name, real, args, kwargs):
    _half_write(name, real, args)
    os.kill(os.getpid(), signal.SIGKILL)


def _count(project_factory, step, monkeypatch) -> int:
    """How many writes `step(project)` makes when nothing fails."""
    project = project_factory()
    faults = Faults()
    with monkeypatch.context() as m:
        faults.install(m)
        step(project)
    return faults.count


def _apply(project: Project) -> None:
    apply_to_profile(project.prof, project.patches(), root=project.root)


def _revert(project: Project) -> None:
    revert_profile(project.prof)


def _each_file_whole(project: Project, patched: dict[Path, bytes]) -> bool:
    """Every source holds either its original or its patched text, nothing between."""
    return all(p.read_bytes() in (project.original[p], patched[p]) for p in project.files)


class Projects:
    """Fresh copies of the project, one per fault injected."""

    def __init__(self, tmp_path: Path):
        self.tmp_path, self.n = tmp_path, 0

    def __call__(self) -> Project:
        self.n += 1
        base = self.tmp_path / f"run{self.n}"
        base.mkdir()
        return Project(base)


def _patched_text(tmp_path, monkeypatch) -> dict[str, bytes]:
    """The patched bytes of each source (by name), from an apply that succeeds."""
    base = tmp_path / "reference"
    base.mkdir()
    project = Project(base)
    monkeypatch.chdir(project.root)
    _apply(project)
    return {p.name: p.read_bytes() for p in project.files}


def _patched_of(project: Project, by_name: dict[str, bytes]) -> dict[Path, bytes]:
    return {p: by_name[p.name] for p in project.files}


def test_enospc_at_every_write_of_apply(tmp_path, monkeypatch):
    """Every write of apply fails in turn with ENOSPC (after half the bytes, for a
    write): apply either completes, or says so in one line with every file as it was
    (same bytes, same inode) and nothing left behind."""
    by_name = _patched_text(tmp_path, monkeypatch)
    projects = Projects(tmp_path)

    def in_project(step):
        def run(project):
            monkeypatch.chdir(project.root)
            step(project)
        return run

    n = _count(projects, in_project(_apply), monkeypatch)
    assert n >= 6
    failed = 0
    for k in range(1, n + 1):
        project = projects()
        monkeypatch.chdir(project.root)
        faults = Faults(at=k, action=_enospc)
        with monkeypatch.context() as m:
            faults.install(m)
            try:
                _apply(project)
            except NumaprofError as e:
                failed += 1
                msg = _one_line(e)
                assert "No space left on device" in msg, (k, faults.seen[k - 1], msg)
                assert project.unchanged() and project.same_inodes(), (k, faults.seen[k - 1])
                if project.extra_files():  # only when removing its own state failed
                    _revert(project)
                assert project.pristine(), (k, faults.seen[k - 1], project.extra_files())
                continue
        # the failed operation was one whose failure does not matter (an fsync of a
        # directory): the apply is whole and reverts
        assert [p.read_bytes() for p in project.files] == list(_patched_of(project,
                                                                           by_name).values())
        _revert(project)
        assert project.pristine(), k
    assert failed >= n // 2, (failed, n)


def test_enospc_at_every_write_of_revert(tmp_path, monkeypatch):
    """Every write of revert fails in turn: revert either completes, or says so in one
    line with every file whole and still patched, and a second --revert then succeeds."""
    by_name = _patched_text(tmp_path, monkeypatch)
    projects = Projects(tmp_path)

    def applied() -> Project:
        project = projects()
        monkeypatch.chdir(project.root)
        _apply(project)
        return project

    n = _count(applied, _revert, monkeypatch)
    assert n >= 3
    failed = 0
    for k in range(1, n + 1):
        project = applied()
        patched = _patched_of(project, by_name)
        faults = Faults(at=k, action=_enospc)
        with monkeypatch.context() as m:
            faults.install(m)
            try:
                _revert(project)
            except NumaprofError as e:
                failed += 1
                msg = _one_line(e)
                assert "No space left on device" in msg, (k, msg)
                # all still patched (the revert was rolled back), or all back to the
                # originals (only removing numaprof's own state failed)
                now = [p.read_bytes() for p in project.files]
                assert now in ([patched[p] for p in project.files],
                               [project.original[p] for p in project.files]), \
                    (k, faults.seen[k - 1], msg)
                assert project.same_inodes()
                _revert(project)
        assert project.pristine(), (k, faults.seen[k - 1])
    assert failed >= 1


def _killed_child(step, project: Project, k: int) -> int:
    """Run `step(project)` in a child killed by SIGKILL at its k-th write; its wait status."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 0
        try:
            os.chdir(project.root)
            mp = pytest.MonkeyPatch()
            Faults(at=k, action=_sigkill).install(mp)
            step(project)
        except BaseException:
            code = 3
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return status


@pytest.mark.parametrize("phase", ["apply", "revert"])
def test_sigkill_at_every_write(tmp_path, monkeypatch, phase):
    """A SIGKILL at each write of apply (or revert) in turn, half-way through a write for
    the writes themselves: `--revert` then brings back every original (same inode),
    nothing is left behind, and a new --apply works."""
    by_name = _patched_text(tmp_path, monkeypatch)
    projects = Projects(tmp_path)

    def ready() -> Project:
        project = projects()
        monkeypatch.chdir(project.root)
        if phase == "revert":
            _apply(project)
        return project

    step = _apply if phase == "apply" else _revert
    n = _count(ready, step, monkeypatch)
    for k in range(1, n + 1):
        project = ready()
        patched = _patched_of(project, by_name)
        status = _killed_child(step, project, k)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, (k, status)
        torn = [p for p in project.files
                if p.read_bytes() not in (project.original[p], patched[p])]
        assert len(torn) <= 1, (k, torn)  # only the file being written when killed
        monkeypatch.chdir(project.root)
        try:
            _revert(project)
        except NumaprofError as e:
            assert "nothing to revert" in str(e), (k, str(e))
        assert project.pristine(), (k, project.extra_files())
        _apply(project)
        assert _each_file_whole(project, patched) and not project.unchanged()


# ------------------------------------------------------- a really full file system

@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs (root only: mount(2) needs CAP_SYS_ADMIN)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {proc.stderr.strip()[:200]}")
    yield disk
    subprocess.run(["umount", str(disk)], check=True)


def test_a_full_tmpfs_at_every_size(small_disk, monkeypatch):
    """The tree on a real file system with 0, 1, 2, ... free pages (the patched
    loops.c needs one page more than the original): apply and revert either complete
    or refuse in one line, never leaving a file half written."""
    outcomes = set()
    for pages in range(0, 10):
        base = small_disk / f"p{pages}"
        base.mkdir()
        project = Project(base, size=8150)  # the patched text needs a third page
        patches = project.patches()
        monkeypatch.chdir(project.root)
        filler = fill_disk(small_disk, pages * 4096)
        try:
            apply_to_profile(project.prof, patches, root=project.root)
        except NumaprofError as e:
            assert "No space left on device" in _one_line(e)
            assert project.pristine(), (pages, project.extra_files())
            outcomes.add("apply refused")
        else:
            outcomes.add("applied")
            patched = {p: p.read_bytes() for p in project.files}
            try:
                revert_profile(project.prof)
            except NumaprofError as e:
                assert "No space left on device" in _one_line(e)
                assert all(p.read_bytes() == patched[p] for p in project.files)
                assert project.same_inodes()
                outcomes.add("revert refused")
                filler.unlink()
                revert_profile(project.prof)
            assert project.pristine(), pages
        finally:
            if filler.exists():
                filler.unlink()
        shutil.rmtree(base)
    assert {"apply refused", "applied"} <= outcomes, outcomes
