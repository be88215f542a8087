"""`suggest --apply` / `--revert` / `--dry-run`: write patches to the user's tree safely.

The promises (SPEC §4.3): a file is patched only if it still has the content the profile
saw (its sha256 in the profile's sources.json); all patches are applied or none; the
originals are kept in a backup directory with a manifest, and `revert` puts them back
byte for byte; at no point is the tree left half-patched.

How "all or none" is kept:

1. every check is made before anything is written;
2. the originals are copied into the backup directory and fsync'ed, and the manifest
   (state ``applying``) is written, before any source file changes;
3. each new text goes to a temporary file in the target's own directory (same file
   system, so the rename is atomic) and is fsync'ed;
4. only then is each temporary renamed over its target; if a rename fails, the files
   already replaced are restored from the backup and the backup is removed.

If the process dies between two renames, the manifest (state ``applying``) is still on
disk and `revert` restores whatever was replaced: it accepts a file that is either the
patched or the original version.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass

from numaprof.errors import NumaprofError
from numaprof.recommender.patch import Patch, merge_patches
from numaprof.recommender.sources import read_sources_json

BACKUP_SCHEMA = "numaprof.apply-backup/1"
MANIFEST = "manifest.json"
BACKUP_DIRNAME = "apply-backup"


@dataclass
class ApplyResult:
    """What `apply` did: the combined diff, the files patched, where the backup is."""

    diff: str
    files: list[str]
    backup_dir: str | None  # None for a dry run
    applied: bool


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _replace(src: str, dst: str) -> None:
    """Atomic rename; one place so the tests can inject a failure between two renames."""
    os.replace(src, dst)


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse fsync on directories; the data itself is synced
    finally:
        os.close(fd)


def _write_new(path: str, data: bytes, mode: int) -> None:
    """Create `path` (which must not exist) with `data`, fsync'ed, with permission `mode`."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fchmod(f.fileno(), mode)
        os.fsync(f.fileno())


def _temp_beside(path: str, data: bytes, mode: int) -> str:
    """Write `data` to a new temporary file in `path`'s directory; return its name."""
    d, base = os.path.split(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{base}.", suffix=".numaprof-tmp", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
    except BaseException:
        _unlink_quietly(tmp)
        raise
    return tmp


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _write_manifest(backup_dir: str, doc: dict) -> None:
    path = os.path.join(backup_dir, MANIFEST)
    tmp = path + ".tmp"
    _unlink_quietly(tmp)
    _write_new(tmp, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode(), 0o600)
    os.replace(tmp, path)
    _fsync_dir(backup_dir)


def _plural(names: list[str]) -> str:
    return ", ".join(names)


def check(patches: Iterable[Patch], profile_hashes: dict[str, str]) -> list[tuple[Patch, bytes]]:
    """Refuse (NumaprofError) unless every target file is exactly what the profile saw.

    Returns each patch with the current bytes of its file.  All problems of one kind
    are named in the one-line message.
    """
    known = {os.path.realpath(p): h for p, h in profile_hashes.items()}
    unknown, edited, stale, missing = [], [], [], []
    checked = []
    for p in patches:
        real = os.path.realpath(p.path)
        try:
            data = _read(real)
        except OSError:
            missing.append(p.path)
            continue
        current = _sha256(data)
        if real not in known:
            unknown.append(p.path)
        elif current != known[real]:
            edited.append(p.path)
        elif current != p.original_hash:
            stale.append(p.path)
        checked.append((p, data))
    if missing:
        raise NumaprofError(f"cannot read {_plural(missing)}; nothing was patched")
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
    return checked


def apply(patches: Iterable[Patch], root: str, profile_hashes: dict[str, str],
          backup_dir: str, dry_run: bool = False) -> ApplyResult:
    """Apply every patch or none, keeping the originals in `backup_dir`.

    `patches` may hold several patches to one file (they are merged); `root` is the
    directory the diff paths are relative to; `profile_hashes` maps absolute paths to
    the sha256 recorded with the profile (`sources.read_sources_json`).  Refuses with
    NumaprofError, before touching anything, when a file differs from what the profile
    saw or an earlier apply has not been reverted.  `dry_run` only checks and returns
    the combined diff.
    """
    root = os.path.abspath(root)
    patches = list(patches)
    check(patches, profile_hashes)  # before merging: the user's edit is the likely cause
    try:
        merged = merge_patches(patches, root)
    except (ValueError, OSError) as e:
        raise NumaprofError(f"{e}; nothing was patched") from e
    merged.sort(key=lambda p: p.path)
    diff = "".join(p.diff for p in merged)
    checked = check(merged, profile_hashes)
    files = [os.path.realpath(p.path) for p in merged]
    if dry_run or not merged:
        return ApplyResult(diff=diff, files=files, backup_dir=None, applied=False)

    backup_dir = os.path.abspath(backup_dir)
    if os.path.exists(os.path.join(backup_dir, MANIFEST)):
        raise NumaprofError(
            f"an earlier --apply is still in place (backup in {backup_dir}); run "
            "`numaprof suggest --revert` first")
    if os.path.isdir(backup_dir) and os.listdir(backup_dir):
        raise NumaprofError(f"{backup_dir} exists and is not an apply backup; "
                            "move it away first")
    os.makedirs(backup_dir, mode=0o700, exist_ok=True)

    entries = []
    try:
        # 1. The originals, durable, before any source file changes.
        os.makedirs(os.path.join(backup_dir, "files"), mode=0o700, exist_ok=True)
        for i, ((p, data), real) in enumerate(zip(checked, files, strict=True)):
            mode = stat.S_IMODE(os.stat(real).st_mode)
            name = f"files/{i:04d}"
            _write_new(os.path.join(backup_dir, name), data, 0o600)
            new = p.new_text.encode("utf-8", "surrogateescape")
            entries.append({"path": real, "backup": name, "mode": mode,
                            "original_sha256": _sha256(data), "patched_sha256": _sha256(new),
                            "description": p.description})
        _fsync_dir(os.path.join(backup_dir, "files"))
        _write_manifest(backup_dir, {"schema": BACKUP_SCHEMA, "state": "applying",
                                     "root": root, "files": entries})
    except BaseException as e:
        # No source file has changed yet: dropping the partial backup undoes everything.
        shutil.rmtree(backup_dir, ignore_errors=True)
        if isinstance(e, OSError):
            raise NumaprofError(f"cannot write the backup in {backup_dir}: "
                                f"{_describe(e)}; nothing was patched") from e
        raise

    temps: list[str] = []
    replaced = 0
    try:
        # 2. Every new text on disk beside its target before the first rename.
        for (p, _), entry in zip(checked, entries, strict=True):
            temps.append(_temp_beside(entry["path"], p.new_text.encode(
                "utf-8", "surrogateescape"), entry["mode"]))
        # 3. The renames: the only step that changes the user's tree.
        for tmp, entry in zip(temps, entries, strict=True):
            _replace(tmp, entry["path"])
            replaced += 1
        for d in {os.path.dirname(e["path"]) for e in entries}:
            _fsync_dir(d)
    except BaseException as e:
        for tmp in temps[replaced:]:
            _unlink_quietly(tmp)
        # Decide what to restore from the files themselves, not from a counter an
        # interruption could have caught between a rename and its bookkeeping.
        failed = _restore(backup_dir, [e for e in entries if _is_patched(e)])
        if failed:
            raise NumaprofError(
                f"applying failed ({_describe(e)}) and {_plural(failed)} could not be "
                f"restored; the originals are in {backup_dir}: run `numaprof suggest "
                "--revert`") from e
        shutil.rmtree(backup_dir, ignore_errors=True)
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        raise NumaprofError(f"applying failed ({_describe(e)}); every file was left "
                            "as it was") from e

    _write_manifest(backup_dir, {"schema": BACKUP_SCHEMA, "state": "applied", "root": root,
                                 "files": entries})
    return ApplyResult(diff=diff, files=files, backup_dir=backup_dir, applied=True)


def _is_patched(entry: dict) -> bool:
    try:
        current = _sha256(_read(entry["path"]))
    except OSError:
        return True  # unreadable: try to put the original back
    return current == entry["patched_sha256"] != entry["original_sha256"]


def _describe(e: BaseException) -> str:
    if isinstance(e, OSError):
        name = f" {e.filename}" if e.filename else ""
        return f"{e.strerror or e}{name}"
    return str(e) or type(e).__name__


def _restore(backup_dir: str, entries: list[dict]) -> list[str]:
    """Put the backed-up originals of `entries` back; return the paths that failed."""
    failed = []
    for entry in entries:
        try:
            data = _read(os.path.join(backup_dir, entry["backup"]))
            if _sha256(data) != entry["original_sha256"]:
                raise OSError(f"backup of {entry['path']} is damaged")
            tmp = _temp_beside(entry["path"], data, entry["mode"])
            try:
                _replace(tmp, entry["path"])
            except BaseException:
                _unlink_quietly(tmp)
                raise
        except OSError:
            failed.append(entry["path"])
    return failed


def read_backup(backup_dir: str) -> dict:
    """The manifest of an apply backup; NumaprofError if there is none or it is foreign."""
    path = os.path.join(backup_dir, MANIFEST)
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise NumaprofError(f"nothing to revert: no apply backup in {backup_dir}") from None
    except (OSError, ValueError) as e:
        raise NumaprofError(f"cannot read {path}: {e}") from None
    if not isinstance(doc, dict) or doc.get("schema") != BACKUP_SCHEMA or \
            not isinstance(doc.get("files"), list):
        raise NumaprofError(f"{path} is not a {BACKUP_SCHEMA} manifest")
    return doc


def revert(backup_dir: str) -> list[str]:
    """Restore every file of an earlier `apply` byte for byte, then remove the backup.

    Refuses (NumaprofError, nothing changed) when a patched file was edited since the
    apply — restoring would lose that work — or a backup copy does not match its
    recorded hash.  A file already back to its original is left alone, so an
    interrupted revert (or apply) can simply be run again.  Returns the restored paths.
    """
    backup_dir = os.path.abspath(backup_dir)
    doc = read_backup(backup_dir)
    todo = []
    edited, damaged = [], []
    for entry in doc["files"]:
        try:
            original = _read(os.path.join(backup_dir, entry["backup"]))
        except OSError:
            damaged.append(entry["path"])
            continue
        if _sha256(original) != entry["original_sha256"]:
            damaged.append(entry["path"])
            continue
        try:
            current = _sha256(_read(entry["path"]))
        except FileNotFoundError:
            current = None
        if current == entry["original_sha256"]:
            continue
        if current is not None and current != entry["patched_sha256"]:
            edited.append(entry["path"])
            continue
        todo.append(entry)
    if damaged:
        raise NumaprofError(f"the backup of {_plural(damaged)} in {backup_dir} is missing "
                            "or damaged; nothing was reverted")
    if edited:
        verb = "was" if len(edited) == 1 else "were"
        raise NumaprofError(
            f"{_plural(edited)} {verb} edited after --apply; not reverting, to keep those "
            f"edits (the originals are in {os.path.join(backup_dir, 'files')})")
    failed = _restore(backup_dir, todo)
    if failed:
        raise NumaprofError(f"could not restore {_plural(failed)}; the backup in "
                            f"{backup_dir} is kept: run --revert again")
    for entry in todo:
        if _sha256(_read(entry["path"])) != entry["original_sha256"]:
            raise NumaprofError(f"{entry['path']} does not match its original after "
                                f"restoring; the backup in {backup_dir} is kept")
    for d in {os.path.dirname(e["path"]) for e in todo}:
        _fsync_dir(d)
    shutil.rmtree(backup_dir)
    return [e["path"] for e in todo]


def backup_dir_of(profile_dir: str | os.PathLike) -> str:
    """Where `apply_to_profile` keeps the originals: ``<profile>/apply-backup``."""
    return os.path.join(os.fspath(profile_dir), BACKUP_DIRNAME)


def apply_to_profile(profile_dir: str | os.PathLike, patches: Iterable[Patch],
                     root: str | None = None, dry_run: bool = False) -> ApplyResult:
    """`apply` with the hashes of the profile's sources.json and its apply-backup directory.

    `root` (default: the current directory) is what diff paths are relative to.
    """
    hashes = read_sources_json(profile_dir)
    return apply(patches, root or os.getcwd(), hashes, backup_dir_of(profile_dir),
                 dry_run=dry_run)


def revert_profile(profile_dir: str | os.PathLike) -> list[str]:
    """`revert` the last `apply_to_profile` of this profile."""
    return revert(backup_dir_of(profile_dir))
