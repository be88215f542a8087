"""`suggest --apply` / `--revert` / `--dry-run`: write patches to the user's tree safely.

The promises (docs/apply.md): a file is patched only if it still has the content the
profile saw (its sha256 in the profile's sources.json) and lies inside the tree being
patched; all patches are applied or none; `revert` puts the originals back byte for
byte; a file keeps its inode, owner, group and mode; at no point is a file left half
written without the means to put it back.

Where the originals are kept.  In the tree itself, ``<root>/.numaprof/apply/`` (root: the
directory --apply runs in), as git keeps ``.git`` and quilt keeps ``.pc``: the state of a
tree lives with the tree.  Not in the profile, which `record` rotates away (``prof`` ->
``prof.old`` -> deleted) and which anyone can hand you.  ``.numaprof/`` is 0700 with a
``.gitignore`` of ``*``, so the copies of your sources are never committed by accident.

Writing in place.  Each file is rewritten through a descriptor opened on it (pwrite,
ftruncate, fsync), never replaced by a rename: the inode stays, so hard links see the
new text and root patching another user's file leaves its owner, group and mode as they
were.  The price is that one file can be caught half written by a crash; the journal
below makes that recoverable.

The journal (``manifest.json``, replaced atomically, fsync'ed before each step):

1. every check is made, and every target opened, before anything is written;
2. the originals are copied to ``files/NNNN``, fsync'ed and read back against their
   hashes, then the manifest is written in state ``applying``;
3. before each file ``i`` is rewritten, the manifest records ``writing: i``; so after a
   crash, files before ``i`` hold the patched text, file ``i`` anything, the rest the
   original;
4. after the last file, the state becomes ``applied``.

A failure (ENOSPC, EIO, Ctrl-C) puts every file back from the originals held in memory
and removes the state: the tree is as it was.  A SIGKILL or a power cut leaves the
journal, and `revert` finishes the job: it restores every file that holds the patched
text and, only for the files up to ``writing``, whatever they hold.  `revert` keeps the
same journal (state ``reverting``) and, if it fails half-way, writes the patched text
back so that the tree is whole again.

Trust.  Nothing read from a profile is an instruction: a path named by sources.json is
written only if it resolves inside the tree; the manifest is used only where `apply`
writes it (``.numaprof/`` of the tree, owned by the user running numaprof and writable by
no one else), its paths are relative, checked for ``..``/absolute parts, and opened one
component at a time without following any symbolic link, and a file is written only if
it still has the hash the apply left.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass

from numaprof.errors import NumaprofError
from numaprof.recommender.patch import Patch, merge_patches
from numaprof.recommender.sources import read_sources_json

BACKUP_SCHEMA = "numaprof.apply-backup/2"
STATE_DIR = ".numaprof"
APPLY_DIR = "apply"
MANIFEST = "manifest.json"
#: Where numaprof kept the originals before this layout: inside the profile.
LEGACY_BACKUP_DIR = "apply-backup"

_GITIGNORE = b"# numaprof's --apply state: copies of your sources; never commit them\n*\n"
_MANIFEST_TMP = MANIFEST + ".tmp"
_MAX_MANIFEST_BYTES = 16 << 20
_HEX64 = re.compile(r"[0-9a-f]{64}")
_BACKUP_NAME = re.compile(r"files/[0-9]{4,9}")
_STATES = ("applying", "applied", "reverting")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass
class ApplyResult:
    """What `apply` did: the combined diff, the files patched, where the originals are."""

    diff: str
    files: list[str]
    backup_dir: str | None  # None for a dry run
    applied: bool


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _plural(names: Iterable[str]) -> str:
    return ", ".join(names)


def _describe(e: BaseException) -> str:
    if isinstance(e, OSError):
        name = f" {e.filename}" if e.filename else ""
        return f"{e.strerror or e}{name}"
    return str(e) or type(e).__name__


# ------------------------------------------------------------------- file primitives

def _write_all(fd: int, data: bytes) -> None:
    view, offset = memoryview(data), 0
    while offset < len(data):
        n = os.pwrite(fd, view[offset:], offset)
        if n <= 0:
            raise OSError(errno.EIO, "short write")
        offset += n


def _read_all(fd: int, limit: int | None = None) -> bytes:
    chunks, offset = [], 0
    while True:
        chunk = os.pread(fd, 1 << 20, offset)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        offset += len(chunk)
        if limit is not None and offset > limit:
            raise OSError(errno.EFBIG, f"larger than {limit} bytes")


def _overwrite(fd: int, data: bytes) -> None:
    """Make the open file hold exactly `data`, in place (same inode), durably, and check
    it by reading it back."""
    _write_all(fd, data)
    os.ftruncate(fd, len(data))
    os.fsync(fd)
    if _sha256(_read_all(fd)) != _sha256(data):
        raise OSError(errno.EIO, "the file does not read back as written")


def _fsync(fd: int) -> None:
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse fsync on directories; the files are synced


def _unlink_at(dir_fd: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass


def _create_at(dir_fd: int, name: str, data: bytes) -> None:
    """A new 0600 file `name` in `dir_fd` holding `data`, fsync'ed; none left if it fails."""
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600, dir_fd=dir_fd)
    try:
        _write_all(fd, data)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        _unlink_at(dir_fd, name)
        raise
    os.close(fd)


def _remove_tree_at(dir_fd: int, name: str) -> None:
    """Remove the directory `name` of `dir_fd` and everything in it (no link followed)."""
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return
    try:
        for entry in os.scandir(fd):
            if entry.is_dir(follow_symlinks=False):
                _remove_tree_at(fd, entry.name)
            else:
                os.unlink(entry.name, dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=dir_fd)


# ------------------------------------------------------------ paths inside the tree

def _checked_rel(rel) -> str:
    """`rel` if it names a file inside the tree: relative, no empty, `.` or `..` part,
    not in numaprof's own state directory; ValueError otherwise."""
    if not isinstance(rel, str) or not rel or "\0" in rel or rel.startswith("/"):
        raise ValueError(f"{rel!r} is not a relative path")
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"{rel!r} leaves the tree or is not a plain path")
    if parts[0] == STATE_DIR:
        raise ValueError(f"{rel!r} is numaprof's own state")
    return rel


def _open_beneath(root_fd: int, rel: str, flags: int) -> tuple[int, int]:
    """Open `rel` under the directory `root_fd`, following no symbolic link on the way
    (ELOOP or ENOTDIR if there is one), so that nothing can redirect the write outside
    the tree, whatever changed since the path was checked.  Returns (directory fd, fd)."""
    *dirs, name = rel.split("/")
    dir_fd = os.open(".", _DIR_FLAGS, dir_fd=root_fd)
    try:
        for part in dirs:
            sub = os.open(part, _DIR_FLAGS, dir_fd=dir_fd)
            os.close(dir_fd)
            dir_fd = sub
        # Only a regular file is opened: opening a device can act, a FIFO can block.
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
        if stat.S_ISLNK(mode):
            raise OSError(errno.ELOOP, "a symbolic link", name)
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file", name)
        fd = os.open(name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except BaseException:
        os.close(dir_fd)
        raise
    return dir_fd, fd


def _read_only(st: os.stat_result) -> bool:
    """No write permission bit at all: someone meant it not to change (root included)."""
    return not st.st_mode & 0o222


@dataclass
class _Target:
    path: str  # absolute, resolved: what messages name
    rel: str  # relative to the tree's resolved root, no symbolic link in it
    dir_fd: int
    fd: int
    data: bytes


class _Tree:
    """The source tree being patched, opened once; every file is reached beneath it."""

    def __init__(self, root: str):
        self.root = os.path.realpath(root)
        try:
            self.fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as e:
            raise NumaprofError(f"cannot open {self.root}: {_describe(e)}") from None
        self.targets: dict[str, _Target] = {}

    def close(self) -> None:
        for t in self.targets.values():
            os.close(t.fd)
            os.close(t.dir_fd)
        self.targets.clear()
        os.close(self.fd)

    def __enter__(self) -> _Tree:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def rel(self, path: str) -> str | None:
        """`path` resolved, relative to the root; None if it is not inside the tree."""
        real = os.path.realpath(path)
        if os.path.commonpath([self.root, real]) != self.root or real == self.root:
            return None
        return os.path.relpath(real, self.root)

    def open_targets(self, paths: Iterable[str], write: bool) -> None:
        """Open every file to patch, or refuse (NumaprofError) naming every file that is
        outside the tree, not a regular file, unreadable or, with `write`, not writable."""
        outside, odd, unreadable, locked, twins = [], [], [], [], []
        inodes: dict[tuple[int, int], str] = {}
        for path in dict.fromkeys(os.path.realpath(p) for p in paths):
            rel = self.rel(path)
            try:
                rel = _checked_rel(rel) if rel is not None else None
            except ValueError:
                rel = None
            if rel is None:
                outside.append(path)
                continue
            try:
                dir_fd, fd = _open_beneath(self.fd, rel, os.O_RDWR if write else os.O_RDONLY)
            except OSError as e:
                if write and e.errno in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ETXTBSY):
                    locked.append(f"{path} ({_why_not_writable(path, e)})")
                else:
                    unreadable.append(f"{path} ({_describe(e)})")
                continue
            target = _Target(path, rel, dir_fd, fd, b"")
            self.targets[path] = target
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                odd.append(path)
                continue
            twin = inodes.setdefault((st.st_dev, st.st_ino), path)
            if twin != path:  # two names of one file: the second write would undo the first
                twins.append(f"{twin} and {path}")
            if write:
                why = _dir_not_writable(dir_fd, os.path.dirname(path))
                if _read_only(st):
                    locked.append(f"{path} (read-only: mode {stat.S_IMODE(st.st_mode):04o})")
                elif why:
                    locked.append(f"{path} ({why})")
            try:
                target.data = _read_all(fd)
            except OSError as e:
                unreadable.append(f"{path} ({_describe(e)})")
        if outside:
            raise NumaprofError(
                f"{_plural(outside)} {_is(outside)} outside {self.root}, the directory being "
                "patched (or inside its .numaprof/); nothing was patched: run --apply from "
                "the top of the source tree")
        if odd:
            raise NumaprofError(f"{_plural(odd)} {_is(odd)} not a regular file; nothing was "
                                "patched")
        if unreadable:
            raise NumaprofError(f"cannot read {_plural(unreadable)}; nothing was patched")
        if twins:
            raise NumaprofError(f"{_plural(twins)} are one file (hard links); nothing was "
                                "patched")
        if locked:
            raise NumaprofError(f"cannot patch {_plural(locked)}; nothing was patched")


def _is(names: list) -> str:
    return "is" if len(names) == 1 else "are"


def _why_not_writable(path: str, e: OSError) -> str:
    if e.errno == errno.EROFS:
        return "read-only file system"
    try:
        st = os.stat(path)
    except OSError:
        return _describe(e)
    if _read_only(st):
        return f"read-only: mode {stat.S_IMODE(st.st_mode):04o}"
    return (f"not writable by you: owner uid {st.st_uid}, mode "
            f"{stat.S_IMODE(st.st_mode):04o}")


def _dir_not_writable(dir_fd: int, shown: str) -> str | None:
    """Why the directory of a target is read-only, or None.  A file is patched only in a
    directory you could edit it in with `patch` or `git`, which write a new file there."""
    st = os.fstat(dir_fd)
    if _read_only(st) or not os.access(".", os.W_OK, dir_fd=dir_fd, effective_ids=True):
        return f"its directory {shown} is read-only (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


# --------------------------------------------------------------- the state directory

def _check_ours(fd: int, shown: str) -> None:
    """Refuse a state directory or file that someone else could have written: it must be
    yours and writable by no one else (git refuses another owner's repository alike)."""
    st = os.fstat(fd)
    if st.st_uid != os.geteuid():
        raise NumaprofError(f"{shown} belongs to uid {st.st_uid}, not to you (uid "
                            f"{os.geteuid()}); not using it: run numaprof as that user")
    if st.st_mode & 0o022:
        raise NumaprofError(f"{shown} is writable by others (mode "
                            f"{stat.S_IMODE(st.st_mode):04o}); not using it")


class _State:
    """``<root>/.numaprof``, opened without following links and locked (flock) while
    apply or revert runs, so that two numaprof processes never interleave."""

    def __init__(self, tree: _Tree, create: bool):
        self.tree = tree
        self.path = os.path.join(tree.root, STATE_DIR)
        self.apply_path = os.path.join(self.path, APPLY_DIR)
        self.fd: int | None = None
        self.apply_fd: int | None = None
        self.files_fd: int | None = None
        created = False
        try:
            self.fd = os.open(STATE_DIR, _DIR_FLAGS, dir_fd=tree.fd)
        except FileNotFoundError:
            if not create:
                raise
            os.mkdir(STATE_DIR, 0o700, dir_fd=tree.fd)
            created = True
            self.fd = os.open(STATE_DIR, _DIR_FLAGS, dir_fd=tree.fd)
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR):
                raise NumaprofError(f"{self.path} is not a directory (a symbolic link?); "
                                    "not using it") from None
            raise
        try:
            _check_ours(self.fd, self.path)
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise NumaprofError(f"another numaprof --apply or --revert is running on "
                                    f"{tree.root}; try again when it has finished") from None
            if created:
                _create_at(self.fd, ".gitignore", _GITIGNORE)
                _fsync(tree.fd)
        except BaseException:
            if created:
                try:
                    self._remove_rest()
                except OSError:
                    pass  # an empty .numaprof: the next run uses or removes it
            self.close()
            raise

    def close(self) -> None:
        for fd in (self.files_fd, self.apply_fd, self.fd):
            if fd is not None:
                os.close(fd)
        self.files_fd = self.apply_fd = self.fd = None

    def discard(self) -> None:
        """Delete the apply: the manifest first (if that fails, the apply stands), after
        which what is left is debris that no run obeys; then the rest of what numaprof
        keeps here.  OSError if anything of numaprof's could not be removed."""
        try:
            os.unlink(os.path.join(APPLY_DIR, MANIFEST), dir_fd=self.fd)
        except FileNotFoundError:
            pass
        if self.apply_fd is not None:
            _fsync(self.apply_fd)
        self._remove_rest()

    def _remove_rest(self) -> None:
        _remove_tree_at(self.fd, APPLY_DIR)
        self._remove_gitignore()
        try:
            os.rmdir(STATE_DIR, dir_fd=self.tree.fd)
        except OSError as e:
            if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
            return  # something that is not numaprof's is in there: leave it
        _fsync(self.tree.fd)

    def _remove_gitignore(self) -> None:
        try:
            fd = os.open(".gitignore", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK |
                         os.O_CLOEXEC, dir_fd=self.fd)
        except OSError:
            return
        try:
            ours = _GITIGNORE.startswith(_read_all(fd, limit=len(_GITIGNORE)))
        except OSError:
            ours = False
        finally:
            os.close(fd)
        if ours:  # also a half-written one a crash left
            os.unlink(".gitignore", dir_fd=self.fd)

    def has_manifest(self) -> bool:
        try:
            os.stat(os.path.join(APPLY_DIR, MANIFEST), dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        return True

    def open_apply(self) -> None:
        self.apply_fd = os.open(APPLY_DIR, _DIR_FLAGS, dir_fd=self.fd)
        _check_ours(self.apply_fd, self.apply_path)
        self.files_fd = os.open("files", _DIR_FLAGS, dir_fd=self.apply_fd)

    def create_apply(self) -> None:
        """A new, empty apply directory.  The remains of an interrupted run (no manifest:
        it never changed a source, or it had finished) are removed first."""
        _remove_tree_at(self.fd, APPLY_DIR)
        os.mkdir(APPLY_DIR, 0o700, dir_fd=self.fd)
        self.apply_fd = os.open(APPLY_DIR, _DIR_FLAGS, dir_fd=self.fd)
        os.mkdir("files", 0o700, dir_fd=self.apply_fd)
        self.files_fd = os.open("files", _DIR_FLAGS, dir_fd=self.apply_fd)

    def write_backup(self, name: str, data: bytes) -> None:
        """Keep `data` as files/`name`, durably, and check it reads back the same."""
        _create_at(self.files_fd, name, data)
        if self.read_backup(f"files/{name}") != data:
            raise OSError(errno.EIO, "the copy does not read back as written",
                          os.path.join(self.apply_path, "files", name))

    def read_backup(self, name: str) -> bytes:
        fd = os.open(name.split("/", 1)[1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK |
                     os.O_CLOEXEC, dir_fd=self.files_fd)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(errno.EINVAL, "not a regular file")
            return _read_all(fd)
        finally:
            os.close(fd)

    def write_manifest(self, doc: dict) -> None:
        """Replace the manifest atomically and durably: the journal's one step."""
        data = (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()
        _unlink_at(self.apply_fd, _MANIFEST_TMP)
        _create_at(self.apply_fd, _MANIFEST_TMP, data)
        try:
            os.replace(_MANIFEST_TMP, MANIFEST, src_dir_fd=self.apply_fd,
                       dst_dir_fd=self.apply_fd)
        except BaseException:
            _unlink_at(self.apply_fd, _MANIFEST_TMP)
            raise
        _fsync(self.apply_fd)

    def read_manifest(self) -> dict:
        shown = os.path.join(self.apply_path, MANIFEST)
        try:
            fd = os.open(MANIFEST, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                         dir_fd=self.apply_fd)
        except OSError as e:
            raise NumaprofError(f"cannot read {shown}: {_describe(e)}") from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise NumaprofError(f"{shown} is not a regular file; not using it")
            _check_ours(fd, shown)
            data = _read_all(fd, limit=_MAX_MANIFEST_BYTES)
        except OSError as e:
            raise NumaprofError(f"cannot read {shown}: {_describe(e)}") from None
        finally:
            os.close(fd)
        try:
            return _validated(json.loads(data))
        except (ValueError, TypeError, RecursionError) as e:
            raise NumaprofError(f"{shown} is not a {BACKUP_SCHEMA} record ({e}); not "
                                "using it") from None


def _validated(doc) -> dict:
    """The manifest if every field has the type and form `apply` writes; ValueError."""
    if not isinstance(doc, dict) or doc.get("schema") != BACKUP_SCHEMA:
        raise ValueError(f"schema is not {BACKUP_SCHEMA}")
    if doc.get("state") not in _STATES:
        raise ValueError(f"state is not one of {', '.join(_STATES)}")
    files = doc.get("files")
    if not isinstance(files, list) or not files:
        raise ValueError("no files")
    writing = doc.get("writing")
    if writing is not None and (type(writing) is not int or not 0 <= writing < len(files)):
        raise ValueError("writing is not the index of a file")
    paths, backups = set(), set()
    for entry in files:
        if not isinstance(entry, dict):
            raise ValueError("a file entry is not an object")
        paths.add(_checked_rel(entry.get("path")))
        backup = entry.get("backup")
        if not isinstance(backup, str) or not _BACKUP_NAME.fullmatch(backup):
            raise ValueError(f"backup {backup!r} is not a name apply gives")
        backups.add(backup)
        for key in ("original_sha256", "patched_sha256"):
            if not isinstance(entry.get(key), str) or not _HEX64.fullmatch(entry[key]):
                raise ValueError(f"{key} is not a sha256")
    if len(paths) != len(files) or len(backups) != len(files):
        raise ValueError("a file or a backup is named twice")
    return doc


def state_dir(root: str | os.PathLike) -> str:
    """Where `apply` keeps the originals of the tree at `root`: ``<root>/.numaprof/apply``."""
    return os.path.join(os.path.realpath(root), STATE_DIR, APPLY_DIR)


def _is_state(d: str) -> bool:
    """Does `d` hold numaprof's state: an apply, or what an interrupted run left?"""
    state = os.path.join(d, STATE_DIR)
    if os.path.lexists(os.path.join(state, APPLY_DIR)):
        return True
    try:
        return os.path.isdir(state) and not os.path.islink(state) and \
            set(os.listdir(state)) <= {".gitignore"}
    except OSError:
        return False


def find_tree(start: str | os.PathLike) -> str | None:
    """The nearest directory at or above `start` that holds numaprof's apply state (as
    git finds ``.git``), or None."""
    d = os.path.realpath(start)
    while True:
        if _is_state(d):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


# ----------------------------------------------------------------------- apply

def _check_hashes(patches: Iterable[Patch], tree: _Tree,
                  profile_hashes: dict[str, str]) -> None:
    """Refuse (NumaprofError) unless every target file is exactly what the profile saw.

    All problems of one kind are named in the one-line message.
    """
    known = {os.path.realpath(p): h for p, h in profile_hashes.items()}
    unknown, edited, stale = [], [], []
    for p in patches:
        real = os.path.realpath(p.path)
        current = _sha256(tree.targets[real].data)
        if real not in known:
            unknown.append(p.path)
        elif current != known[real]:
            edited.append(p.path)
        elif current != p.original_hash:
            stale.append(p.path)
    if edited:
        verb = "was" if len(edited) == 1 else "were"
        raise NumaprofError(
            f"{_plural(edited)} {verb} edited after recording (hash differs from the "
            "profile's); nothing was patched: re-record, then suggest again")
    if unknown:
        raise NumaprofError(
            f"{_plural(unknown)} not among the sources the profile recorded (no hash in "
            "its sources.json); nothing was patched")
    if stale:
        raise NumaprofError(
            f"the patches for {_plural(stale)} were made from another version of the "
            "file; nothing was patched")


def _refuse_an_earlier_apply(root: str) -> None:
    """One apply at a time in a tree (and in the trees around it): a second one would
    keep the patched text as its "original"."""
    d = root
    while True:
        if os.path.lexists(os.path.join(d, STATE_DIR, APPLY_DIR, MANIFEST)):
            where = os.path.join(d, STATE_DIR, APPLY_DIR)
            raise NumaprofError(
                f"an earlier --apply is still in place in {d} (originals in {where}); run "
                "`numaprof suggest --revert` there first (it also finishes an interrupted "
                f"one), or, to keep those changes, delete {where}")
        parent = os.path.dirname(d)
        if parent == d:
            return
        d = parent


def _put_back(tree: _Tree, wanted: dict[str, bytes]) -> list[str]:
    """Rewrite each file of `wanted` (path -> bytes) that does not hold its bytes;
    return the paths that could not be rewritten."""
    failed = []
    for path, data in wanted.items():
        fd = tree.targets[path].fd
        try:
            if _read_all(fd) != data:
                _overwrite(fd, data)
        except OSError:
            failed.append(path)
    return failed


def apply(patches: Iterable[Patch], root: str, profile_hashes: dict[str, str],
          dry_run: bool = False) -> ApplyResult:
    """Apply every patch or none, keeping the originals in ``<root>/.numaprof/apply``.

    `patches` may hold several patches to one file (they are merged); `root` is the
    directory of the source tree: the diff paths are relative to it, only files inside it
    are written, and its ``.numaprof/`` keeps the originals.  `profile_hashes` maps
    absolute paths to the sha256 recorded with the profile (`sources.read_sources_json`).
    Refuses with NumaprofError, before touching anything, when a file is outside the
    tree, not writable, differs from what the profile saw, or an earlier apply has not
    been reverted.  `dry_run` only checks and returns the combined diff.
    """
    root = os.path.abspath(root)
    patches = list(patches)
    with _Tree(root) as tree:
        tree.open_targets([p.path for p in patches], write=not dry_run)
        _check_hashes(patches, tree, profile_hashes)  # before merging: an edit is likelier
        try:
            merged = merge_patches(patches, root)
        except (ValueError, OSError) as e:
            raise NumaprofError(f"{e}; nothing was patched") from e
        merged.sort(key=lambda p: p.path)
        _check_hashes(merged, tree, profile_hashes)  # and what was merged is what we read
        diff = "".join(p.diff for p in merged)
        files = [os.path.realpath(p.path) for p in merged]
        if dry_run or not merged:
            return ApplyResult(diff=diff, files=files, backup_dir=None, applied=False)
        _refuse_an_earlier_apply(tree.root)
        try:
            state = _State(tree, create=True)
        except OSError as e:
            raise NumaprofError(f"cannot keep the originals in {state_dir(tree.root)}: "
                                f"{_describe(e)}; nothing was patched") from e
        try:
            _refuse_an_earlier_apply(tree.root)  # again, now that the tree is locked
            _apply(tree, state, merged, files)
        finally:
            state.close()
        return ApplyResult(diff=diff, files=files, backup_dir=state.apply_path, applied=True)


def _apply(tree: _Tree, state: _State, merged: list[Patch], files: list[str]) -> None:
    originals = {path: tree.targets[path].data for path in files}
    new_texts = [p.new_text.encode("utf-8", "surrogateescape") for p in merged]
    entries = [{"path": tree.targets[path].rel, "backup": f"files/{i:04d}",
                "original_sha256": _sha256(originals[path]), "patched_sha256": _sha256(new),
                "description": p.description}
               for i, (p, path, new) in enumerate(zip(merged, files, new_texts, strict=True))]

    def journal(state_name: str, writing: int | None) -> None:
        state.write_manifest({"schema": BACKUP_SCHEMA, "state": state_name,
                              "writing": writing, "files": entries})

    try:
        # 1. The originals, durable and checked, before any source file changes.
        state.create_apply()
        for path, entry in zip(files, entries, strict=True):
            state.write_backup(entry["backup"].split("/")[1], originals[path])
        _fsync(state.files_fd)
        journal("applying", None)
    except BaseException as e:
        # No source file has changed: dropping the backup undoes everything.
        try:
            state.discard()
        except OSError:
            pass  # the manifest says every file is original: --revert just removes it
        if isinstance(e, OSError):
            raise NumaprofError(f"cannot keep the originals in {state.apply_path}: "
                                f"{_describe(e)}; nothing was patched") from e
        raise

    try:
        # 2. The new texts, in place, one file at a time, each announced in the journal.
        for i, (path, new) in enumerate(zip(files, new_texts, strict=True)):
            journal("applying", i)
            _overwrite(tree.targets[path].fd, new)
        journal("applied", None)
    except BaseException as e:
        # Decide what to restore from the files themselves, not from a counter an
        # interruption could have caught between a write and its bookkeeping.
        failed = _put_back(tree, originals)
        if failed:
            raise NumaprofError(
                f"applying failed ({_describe(e)}) and {_plural(failed)} could not be "
                f"restored; the originals are in {state.apply_path}: run `numaprof suggest "
                "--revert`") from e
        try:
            state.discard()
            left = ""
        except OSError as e2:
            left = (f"; numaprof's state in {state.apply_path} could not be removed "
                    f"({_describe(e2)}): `numaprof suggest --revert` removes it")
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        raise NumaprofError(f"applying failed ({_describe(e)}); every file was left as it "
                            f"was{left}") from e


# ----------------------------------------------------------------------- revert

def revert(root: str | os.PathLike) -> list[str]:
    """Restore every file of the apply kept in ``<root>/.numaprof``, byte for byte and in
    place, then remove that state.  Returns the restored paths.

    Refuses (NumaprofError, nothing changed) when the record is not one this user's
    numaprof could have written, names a path outside the tree or through a symbolic
    link, a file is missing or holds neither its original nor the text the apply left
    (your edits would be lost), or a backup copy does not match its recorded hash.  A file
    already back to its original is left alone, so an interrupted revert (or apply) is
    finished by running it again.
    """
    with _Tree(os.fspath(root)) as tree:
        try:
            state = _State(tree, create=False)
        except FileNotFoundError:
            raise NumaprofError(f"nothing to revert: no {STATE_DIR}/{APPLY_DIR} in "
                                f"{tree.root}") from None
        except OSError as e:
            raise NumaprofError(f"cannot open {os.path.join(tree.root, STATE_DIR)}: "
                                f"{_describe(e)}") from None
        try:
            if not state.has_manifest():
                # what an interrupted run left: nothing was changed by it, or it had
                # finished reverting
                try:
                    state.discard()
                except OSError as e:
                    raise NumaprofError(f"cannot remove what an interrupted numaprof left in "
                                        f"{state.path}: {_describe(e)}") from None
                return []
            try:
                state.open_apply()
            except OSError as e:
                raise NumaprofError(f"cannot open {state.apply_path}: {_describe(e)}") \
                    from None
            return _revert(tree, state, state.read_manifest())
        finally:
            state.close()


def _revert(tree: _Tree, state: _State, doc: dict) -> list[str]:
    entries = doc["files"]
    # Up to the file being written when a run was cut short, any content is that run's.
    free = doc["writing"] if doc["state"] != "applied" and doc["writing"] is not None else -1
    shown = [os.path.join(tree.root, e["path"]) for e in entries]
    damaged, links, missing, odd, locked, edited = [], [], [], [], [], []
    originals, before, todo = {}, {}, []
    for j, entry in enumerate(entries):
        try:
            originals[j] = state.read_backup(entry["backup"])
        except OSError:
            damaged.append(shown[j])
            continue
        if _sha256(originals[j]) != entry["original_sha256"]:
            damaged.append(shown[j])
            continue
        try:
            dir_fd, fd = _open_beneath(tree.fd, entry["path"], os.O_RDWR)
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR):
                links.append(shown[j])
            elif e.errno == errno.ENOENT:
                missing.append(shown[j])
            elif e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                locked.append(f"{shown[j]} ({_why_not_writable(shown[j], e)})")
            else:
                odd.append(f"{shown[j]} ({_describe(e)})")
            continue
        tree.targets[shown[j]] = _Target(shown[j], entry["path"], dir_fd, fd, b"")
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            odd.append(f"{shown[j]} (not a regular file)")
            continue
        why = _dir_not_writable(dir_fd, os.path.dirname(shown[j]))
        if _read_only(st):
            why = f"read-only: mode {stat.S_IMODE(st.st_mode):04o}"
        if why:
            locked.append(f"{shown[j]} ({why})")
            continue
        before[j] = _read_all(fd)
        current = _sha256(before[j])
        if current == entry["original_sha256"]:
            continue
        if current == entry["patched_sha256"] or j <= free:
            todo.append(j)
        else:
            edited.append(shown[j])
    files_dir = os.path.join(state.apply_path, "files")
    if damaged:
        raise NumaprofError(f"the backup of {_plural(damaged)} in {state.apply_path} is "
                            "missing or damaged; nothing was reverted")
    if links:
        raise NumaprofError(f"{_plural(links)}: a symbolic link on the way, which --apply "
                            "never writes through; nothing was reverted")
    if missing:
        raise NumaprofError(f"{_plural(missing)} no longer exist{'s' if len(missing) == 1 else ''}; "
                            f"nothing was reverted (the originals are in {files_dir})")
    if odd:
        raise NumaprofError(f"cannot revert {_plural(odd)}; nothing was reverted")
    if locked:
        raise NumaprofError(f"cannot revert {_plural(locked)}; nothing was reverted")
    if edited:
        verb = "was" if len(edited) == 1 else "were"
        raise NumaprofError(
            f"{_plural(edited)} {verb} edited after --apply; not reverting, to keep those "
            f"edits (the originals are in {files_dir})")

    def fd_of(j: int) -> int:
        return tree.targets[shown[j]].fd

    done = 0
    try:
        for j in todo:
            state.write_manifest({**doc, "state": "reverting", "writing": j})
            done += 1
            _overwrite(fd_of(j), originals[j])
    except BaseException as e:
        rolled_back = False
        if doc["state"] == "applied":
            # The revert of an applied tree that fails half-way writes the patched text
            # back: the tree is whole again, the apply still in place.
            wanted = {shown[j]: before[j] for j in todo[:done]}
            if not _put_back(tree, wanted):
                try:
                    state.write_manifest(doc)
                    rolled_back = True
                except OSError:
                    pass
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        if rolled_back:
            raise NumaprofError(f"reverting failed ({_describe(e)}); every file is still "
                                "patched: run --revert again") from e
        raise NumaprofError(f"reverting failed ({_describe(e)}); the originals are kept in "
                            f"{files_dir}: run `numaprof suggest --revert` again to finish") \
            from e
    try:
        state.discard()
    except OSError as e:
        raise NumaprofError(f"every file is restored, but numaprof's state in "
                            f"{state.apply_path} could not be removed ({_describe(e)}): run "
                            "--revert again to remove it") from e
    for d in {os.path.dirname(shown[j]) for j in todo}:
        try:
            fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            continue
        _fsync(fd)
        os.close(fd)
    return [shown[j] for j in todo]


# ------------------------------------------------------------- profile level

def apply_to_profile(profile_dir: str | os.PathLike, patches: Iterable[Patch],
                     root: str | None = None, dry_run: bool = False) -> ApplyResult:
    """`apply` with the hashes of the profile's sources.json.

    `root` (default: the current directory) is the source tree: diff paths are relative
    to it, only files inside it are patched, and its ``.numaprof/`` keeps the originals.
    """
    hashes = read_sources_json(profile_dir)
    return apply(patches, root or os.getcwd(), hashes, dry_run=dry_run)


def revert_profile(profile_dir: str | os.PathLike, cwd: str | None = None) -> list[str]:
    """`revert` the apply of the tree that holds the profile, else of the tree that
    holds the current directory (the nearest ``.numaprof/`` above either)."""
    cwd = cwd or os.getcwd()
    profile = os.path.abspath(os.path.join(cwd, profile_dir))
    for start in (os.path.dirname(profile), cwd):
        root = find_tree(start)
        if root is not None:
            return revert(root)
    msg = f"nothing to revert: no {STATE_DIR}/{APPLY_DIR} in {cwd} or above it"
    legacy = os.path.join(profile, LEGACY_BACKUP_DIR)
    if os.path.lexists(os.path.join(legacy, MANIFEST)):
        msg += (f"; {legacy} was left by an older numaprof, which kept the originals in "
                "the profile, and is not used (a profile is data, never instructions): "
                f"its copies are in {legacy}/files")
    raise NumaprofError(msg)
