"""The file-system side of `suggest --apply` (recommender/apply.py decides, this writes).

- `SourceTree`: the tree being patched, opened once; every file is reached beneath its
  root one component at a time with O_NOFOLLOW (`open_beneath`), so no symbolic link,
  `..` or absolute path can lead a write outside it, and only regular files are opened;
- `overwrite`: a file rewritten in place through its descriptor (pwrite, ftruncate,
  fsync, read back): same inode, owner, group, mode, hard links;
- `ApplyState`: ``<root>/.numaprof``, numaprof's state in the tree (0700, a .gitignore of
  ``*``), locked with flock while in use, used only if it is the user's own and writable
  by no one else; in ``apply/`` the copies of the originals (``files/NNNN``) and the
  journal ``manifest.json`` (`validated` field by field when read), replaced atomically.
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

BACKUP_SCHEMA = "numaprof.apply-backup/2"
STATE_DIR = ".numaprof"
APPLY_DIR = "apply"
MANIFEST = "manifest.json"

_GITIGNORE = b"# numaprof's --apply state: copies of your sources; never commit them\n*\n"
_MANIFEST_TMP = MANIFEST + ".tmp"
_MAX_MANIFEST_BYTES = 16 << 20
_HEX64 = re.compile(r"[0-9a-f]{64}")
_BACKUP_NAME = re.compile(r"files/[0-9]{4,9}")
_STATES = ("applying", "applied", "reverting")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def sha256(data: bytes) -> str:
    """Hex sha256 of `data`."""
    return hashlib.sha256(data).hexdigest()


def plural(names: Iterable[str]) -> str:
    """The names for a one-line message."""
    return ", ".join(names)


def describe(e: BaseException) -> str:
    """An exception in a few words: the OS's reason and the file it names."""
    if isinstance(e, OSError):
        name = f" {e.filename}" if e.filename else ""
        return f"{e.strerror or e}{name}"
    return str(e) or type(e).__name__


# ------------------------------------------------------------------- file primitives

def write_all(fd: int, data: bytes) -> None:
    view, offset = memoryview(data), 0
    while offset < len(data):
        n = os.pwrite(fd, view[offset:], offset)
        if n <= 0:
            raise OSError(errno.EIO, "short write")
        offset += n


def read_all(fd: int, limit: int | None = None) -> bytes:
    chunks, offset = [], 0
    while True:
        chunk = os.pread(fd, 1 << 20, offset)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        offset += len(chunk)
        if limit is not None and offset > limit:
            raise OSError(errno.EFBIG, f"larger than {limit} bytes")


def overwrite(fd: int, data: bytes) -> None:
    """Make the open file hold exactly `data`, in place (same inode), durably, and check
    it by reading it back."""
    write_all(fd, data)
    os.ftruncate(fd, len(data))
    os.fsync(fd)
    if sha256(read_all(fd)) != sha256(data):
        raise OSError(errno.EIO, "the file does not read back as written")


def fsync_quietly(fd: int) -> None:
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse fsync on directories; the files are synced


def unlink_quietly(dir_fd: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass


def create_at(dir_fd: int, name: str, data: bytes) -> None:
    """A new 0600 file `name` in `dir_fd` holding `data`, fsync'ed; none left if it fails."""
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600, dir_fd=dir_fd)
    try:
        write_all(fd, data)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        unlink_quietly(dir_fd, name)
        raise
    os.close(fd)


def remove_tree_at(dir_fd: int, name: str) -> None:
    """Remove the directory `name` of `dir_fd` and everything in it (no link followed)."""
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return
    try:
        for entry in os.scandir(fd):
            if entry.is_dir(follow_symlinks=False):
                remove_tree_at(fd, entry.name)
            else:
                os.unlink(entry.name, dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=dir_fd)


# ------------------------------------------------------------ paths inside the tree

def checked_rel(rel) -> str:
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


def open_beneath(root_fd: int, rel: str, flags: int) -> tuple[int, int]:
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
            raise OSError(errno.ELOOP, "a symbolic link")
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file")
        fd = os.open(name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except BaseException:
        os.close(dir_fd)
        raise
    return dir_fd, fd


def read_only(st: os.stat_result) -> bool:
    """No write permission bit at all: someone meant it not to change (root included)."""
    return not st.st_mode & 0o222


@dataclass
class Target:
    path: str  # absolute, resolved: what messages name
    rel: str  # relative to the tree's resolved root, no symbolic link in it
    dir_fd: int
    fd: int
    data: bytes


class SourceTree:
    """The source tree being patched, opened once; every file is reached beneath it."""

    def __init__(self, root: str):
        self.root = os.path.realpath(root)
        try:
            self.fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as e:
            raise NumaprofError(f"cannot open {self.root}: {describe(e)}") from None
        self.targets: dict[str, Target] = {}

    def close(self) -> None:
        for t in self.targets.values():
            os.close(t.fd)
            os.close(t.dir_fd)
        self.targets.clear()
        os.close(self.fd)

    def __enter__(self) -> SourceTree:
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
                rel = checked_rel(rel) if rel is not None else None
            except ValueError:
                rel = None
            if rel is None:
                outside.append(path)
                continue
            try:
                dir_fd, fd = open_beneath(self.fd, rel, os.O_RDWR if write else os.O_RDONLY)
            except OSError as e:
                if write and e.errno in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ETXTBSY):
                    locked.append(f"{path} ({why_not_writable(path, e)})")
                else:
                    unreadable.append(f"{path} ({describe(e)})")
                continue
            target = Target(path, rel, dir_fd, fd, b"")
            self.targets[path] = target
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                odd.append(path)
                continue
            twin = inodes.setdefault((st.st_dev, st.st_ino), path)
            if twin != path:  # two names of one file: the second write would undo the first
                twins.append(f"{twin} and {path}")
            if write:
                why = dir_not_writable(dir_fd, os.path.dirname(path))
                if read_only(st):
                    locked.append(f"{path} (read-only: mode {stat.S_IMODE(st.st_mode):04o})")
                elif why:
                    locked.append(f"{path} ({why})")
            try:
                target.data = read_all(fd)
            except OSError as e:
                unreadable.append(f"{path} ({describe(e)})")
        if outside:
            raise NumaprofError(
                f"{plural(outside)} {is_or_are(outside)} outside {self.root}, the directory being "
                "patched (or inside its .numaprof/); nothing was patched: run --apply from "
                "the top of the source tree")
        if odd:
            raise NumaprofError(f"{plural(odd)} {is_or_are(odd)} not a regular file; nothing was "
                                "patched")
        if unreadable:
            raise NumaprofError(f"cannot read {plural(unreadable)}; nothing was patched")
        if twins:
            raise NumaprofError(f"{plural(twins)} are one file (hard links); nothing was "
                                "patched")
        if locked:
            raise NumaprofError(f"cannot patch {plural(locked)}; nothing was patched")


def is_or_are(names: list) -> str:
    return "is" if len(names) == 1 else "are"


def why_not_writable(path: str, e: OSError) -> str:
    if e.errno == errno.EROFS:
        return "read-only file system"
    try:
        st = os.stat(path)
    except OSError:
        return describe(e)
    if read_only(st):
        return f"read-only: mode {stat.S_IMODE(st.st_mode):04o}"
    return (f"not writable by you: owner uid {st.st_uid}, mode "
            f"{stat.S_IMODE(st.st_mode):04o}")


def dir_not_writable(dir_fd: int, shown: str) -> str | None:
    """Why the directory of a target is read-only, or None.  A file is patched only in a
    directory you could edit it in with `patch` or `git`, which write a new file there."""
    st = os.fstat(dir_fd)
    if read_only(st) or not os.access(".", os.W_OK, dir_fd=dir_fd, effective_ids=True):
        return f"its directory {shown} is read-only (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


# --------------------------------------------------------------- the state directory

def check_ours(fd: int, shown: str) -> None:
    """Refuse a state directory or file that someone else could have written: it must be
    yours and writable by no one else (git refuses another owner's repository alike)."""
    st = os.fstat(fd)
    if st.st_uid != os.geteuid():
        raise NumaprofError(f"{shown} belongs to uid {st.st_uid}, not to you (uid "
                            f"{os.geteuid()}); not using it: run numaprof as that user")
    if st.st_mode & 0o022:
        raise NumaprofError(f"{shown} is writable by others (mode "
                            f"{stat.S_IMODE(st.st_mode):04o}); not using it")


class ApplyState:
    """``<root>/.numaprof``, opened without following links and locked (flock) while
    apply or revert runs, so that two numaprof processes never interleave."""

    def __init__(self, tree: SourceTree, create: bool):
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
            check_ours(self.fd, self.path)
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise NumaprofError(f"another numaprof --apply or --revert is running on "
                                    f"{tree.root}; try again when it has finished") from None
            if created:
                create_at(self.fd, ".gitignore", _GITIGNORE)
                fsync_quietly(tree.fd)
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
            fsync_quietly(self.apply_fd)
        self._remove_rest()

    def _remove_rest(self) -> None:
        remove_tree_at(self.fd, APPLY_DIR)
        self._remove_gitignore()
        try:
            os.rmdir(STATE_DIR, dir_fd=self.tree.fd)
        except OSError as e:
            if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
            return  # something that is not numaprof's is in there: leave it
        fsync_quietly(self.tree.fd)

    def _remove_gitignore(self) -> None:
        try:
            fd = os.open(".gitignore", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK |
                         os.O_CLOEXEC, dir_fd=self.fd)
        except OSError:
            return
        try:
            ours = _GITIGNORE.startswith(read_all(fd, limit=len(_GITIGNORE)))
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
        check_ours(self.apply_fd, self.apply_path)
        self.files_fd = os.open("files", _DIR_FLAGS, dir_fd=self.apply_fd)

    def create_apply(self) -> None:
        """A new, empty apply directory.  The remains of an interrupted run (no manifest:
        it never changed a source, or it had finished) are removed first."""
        remove_tree_at(self.fd, APPLY_DIR)
        os.mkdir(APPLY_DIR, 0o700, dir_fd=self.fd)
        self.apply_fd = os.open(APPLY_DIR, _DIR_FLAGS, dir_fd=self.fd)
        os.mkdir("files", 0o700, dir_fd=self.apply_fd)
        self.files_fd = os.open("files", _DIR_FLAGS, dir_fd=self.apply_fd)

    def write_backup(self, name: str, data: bytes) -> None:
        """Keep `data` as files/`name`, durably, and check it reads back the same."""
        create_at(self.files_fd, name, data)
        if self.read_backup(f"files/{name}") != data:
            raise OSError(errno.EIO, "the copy does not read back as written",
                          os.path.join(self.apply_path, "files", name))

    def read_backup(self, name: str) -> bytes:
        fd = os.open(name.split("/", 1)[1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK |
                     os.O_CLOEXEC, dir_fd=self.files_fd)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(errno.EINVAL, "not a regular file")
            return read_all(fd)
        finally:
            os.close(fd)

    def write_manifest(self, doc: dict) -> None:
        """Replace the manifest atomically and durably: the journal's one step."""
        data = (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()
        unlink_quietly(self.apply_fd, _MANIFEST_TMP)
        create_at(self.apply_fd, _MANIFEST_TMP, data)
        try:
            os.replace(_MANIFEST_TMP, MANIFEST, src_dir_fd=self.apply_fd,
                       dst_dir_fd=self.apply_fd)
        except BaseException:
            unlink_quietly(self.apply_fd, _MANIFEST_TMP)
            raise
        fsync_quietly(self.apply_fd)

    def read_manifest(self) -> dict:
        shown = os.path.join(self.apply_path, MANIFEST)
        try:
            fd = os.open(MANIFEST, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                         dir_fd=self.apply_fd)
        except OSError as e:
            raise NumaprofError(f"cannot read {shown}: {describe(e)}") from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise NumaprofError(f"{shown} is not a regular file; not using it")
            check_ours(fd, shown)
            data = read_all(fd, limit=_MAX_MANIFEST_BYTES)
        except OSError as e:
            raise NumaprofError(f"cannot read {shown}: {describe(e)}") from None
        finally:
            os.close(fd)
        try:
            return validated(json.loads(data))
        except (ValueError, TypeError, RecursionError) as e:
            raise NumaprofError(f"{shown} is not a {BACKUP_SCHEMA} record ({e}); not "
                                "using it") from None


def validated(doc) -> dict:
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
        paths.add(checked_rel(entry.get("path")))
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


def holds_state(d: str) -> bool:
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
        if holds_state(d):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent
