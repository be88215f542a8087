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

The file-system mechanics (the tree opened beneath its root, in-place writes, the state
directory and its manifest) are in apply_state.py; this module decides what to write.

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
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass

from numaprof.errors import NumaprofError
from numaprof.recommender.apply_state import (
    APPLY_DIR,
    BACKUP_SCHEMA,
    MANIFEST,
    STATE_DIR,
    ApplyState,
    SourceTree,
    Target,
    describe,
    dir_not_writable,
    find_tree,
    fsync_quietly,
    open_beneath,
    overwrite,
    plural,
    read_all,
    read_only,
    sha256,
    state_dir,
    why_not_writable,
)
from numaprof.recommender.patch import Patch, merge_patches
from numaprof.recommender.sources import read_sources_json

__all__ = ["ApplyResult", "apply", "apply_to_profile", "find_tree", "revert",
           "revert_profile", "state_dir"]

#: Where numaprof kept the originals before this layout: inside the profile.
LEGACY_BACKUP_DIR = "apply-backup"


@dataclass
class ApplyResult:
    """What `apply` did: the combined diff, the files patched, where the originals are."""

    diff: str
    files: list[str]
    backup_dir: str | None  # None for a dry run
    applied: bool



# ----------------------------------------------------------------------- apply

def _check_hashes(patches: Iterable[Patch], tree: SourceTree,
                  profile_hashes: dict[str, str]) -> None:
    """Refuse (NumaprofError) unless every target file is exactly what the profile saw.

    All problems of one kind are named in the one-line message.
    """
    known = {os.path.realpath(p): h for p, h in profile_hashes.items()}
    unknown, edited, stale = [], [], []
    for p in patches:
        real = os.path.realpath(p.path)
        current = sha256(tree.targets[real].data)
        if real not in known:
            unknown.append(p.path)
        elif current != known[real]:
            edited.append(p.path)
        elif current != p.original_hash:
            stale.append(p.path)
    if edited:
        verb = "was" if len(edited) == 1 else "were"
        raise NumaprofError(
            f"{plural(edited)} {verb} edited after recording (hash differs from the "
            "profile's); nothing was patched: re-record, then suggest again")
    if unknown:
        raise NumaprofError(
            f"{plural(unknown)} not among the sources the profile recorded (no hash in "
            "its sources.json); nothing was patched")
    if stale:
        raise NumaprofError(
            f"the patches for {plural(stale)} were made from another version of the "
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


def _put_back(tree: SourceTree, wanted: dict[str, bytes]) -> list[str]:
    """Rewrite each file of `wanted` (path -> bytes) that does not hold its bytes;
    return the paths that could not be rewritten."""
    failed = []
    for path, data in wanted.items():
        fd = tree.targets[path].fd
        try:
            if read_all(fd) != data:
                overwrite(fd, data)
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
    with SourceTree(root) as tree:
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
            state = ApplyState(tree, create=True)
        except OSError as e:
            raise NumaprofError(f"cannot keep the originals in {state_dir(tree.root)}: "
                                f"{describe(e)}; nothing was patched") from e
        try:
            _refuse_an_earlier_apply(tree.root)  # again, now that the tree is locked
            _apply(tree, state, merged, files)
        finally:
            state.close()
        return ApplyResult(diff=diff, files=files, backup_dir=state.apply_path, applied=True)


def _apply(tree: SourceTree, state: ApplyState, merged: list[Patch], files: list[str]) -> None:
    originals = {path: tree.targets[path].data for path in files}
    new_texts = [p.new_text.encode("utf-8", "surrogateescape") for p in merged]
    entries = [{"path": tree.targets[path].rel, "backup": f"files/{i:04d}",
                "original_sha256": sha256(originals[path]), "patched_sha256": sha256(new),
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
        fsync_quietly(state.files_fd)
        journal("applying", None)
    except BaseException as e:
        # No source file has changed: dropping the backup undoes everything.
        try:
            state.discard()
        except OSError:
            pass  # the manifest says every file is original: --revert just removes it
        if isinstance(e, OSError):
            raise NumaprofError(f"cannot keep the originals in {state.apply_path}: "
                                f"{describe(e)}; nothing was patched") from e
        raise

    try:
        # 2. The new texts, in place, one file at a time, each announced in the journal.
        for i, (path, new) in enumerate(zip(files, new_texts, strict=True)):
            journal("applying", i)
            overwrite(tree.targets[path].fd, new)
        journal("applied", None)
    except BaseException as e:
        # Decide what to restore from the files themselves, not from a counter an
        # interruption could have caught between a write and its bookkeeping.
        failed = _put_back(tree, originals)
        if failed:
            raise NumaprofError(
                f"applying failed ({describe(e)}) and {plural(failed)} could not be "
                f"restored; the originals are in {state.apply_path}: run `numaprof suggest "
                "--revert`") from e
        try:
            state.discard()
            left = ""
        except OSError as e2:
            left = (f"; numaprof's state in {state.apply_path} could not be removed "
                    f"({describe(e2)}): `numaprof suggest --revert` removes it")
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        raise NumaprofError(f"applying failed ({describe(e)}); every file was left as it "
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
    with SourceTree(os.fspath(root)) as tree:
        try:
            state = ApplyState(tree, create=False)
        except FileNotFoundError:
            raise NumaprofError(f"nothing to revert: no {STATE_DIR}/{APPLY_DIR} in "
                                f"{tree.root}") from None
        except OSError as e:
            raise NumaprofError(f"cannot open {os.path.join(tree.root, STATE_DIR)}: "
                                f"{describe(e)}") from None
        try:
            if not state.has_manifest():
                # what an interrupted run left: nothing was changed by it, or it had
                # finished reverting
                try:
                    state.discard()
                except OSError as e:
                    raise NumaprofError(f"cannot remove what an interrupted numaprof left in "
                                        f"{state.path}: {describe(e)}") from None
                return []
            try:
                state.open_apply()
            except OSError as e:
                raise NumaprofError(f"cannot open {state.apply_path}: {describe(e)}") \
                    from None
            return _revert(tree, state, state.read_manifest())
        finally:
            state.close()


def _revert(tree: SourceTree, state: ApplyState, doc: dict) -> list[str]:
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
        if sha256(originals[j]) != entry["original_sha256"]:
            damaged.append(shown[j])
            continue
        try:
            dir_fd, fd = open_beneath(tree.fd, entry["path"], os.O_RDWR)
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR):
                links.append(shown[j])
            elif e.errno == errno.ENOENT:
                missing.append(shown[j])
            elif e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                locked.append(f"{shown[j]} ({why_not_writable(shown[j], e)})")
            else:
                odd.append(f"{shown[j]} ({describe(e)})")
            continue
        tree.targets[shown[j]] = Target(shown[j], entry["path"], dir_fd, fd, b"")
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            odd.append(f"{shown[j]} (not a regular file)")
            continue
        why = dir_not_writable(dir_fd, os.path.dirname(shown[j]))
        if read_only(st):
            why = f"read-only: mode {stat.S_IMODE(st.st_mode):04o}"
        if why:
            locked.append(f"{shown[j]} ({why})")
            continue
        before[j] = read_all(fd)
        current = sha256(before[j])
        if current == entry["original_sha256"]:
            continue
        if current == entry["patched_sha256"] or j <= free:
            todo.append(j)
        else:
            edited.append(shown[j])
    files_dir = os.path.join(state.apply_path, "files")
    if damaged:
        raise NumaprofError(f"the backup of {plural(damaged)} in {state.apply_path} is "
                            "missing or damaged; nothing was reverted")
    if links:
        raise NumaprofError(f"{plural(links)}: a symbolic link on the way, which --apply "
                            "never writes through; nothing was reverted")
    if missing:
        raise NumaprofError(f"{plural(missing)} no longer exist{'s' if len(missing) == 1 else ''}; "
                            f"nothing was reverted (the originals are in {files_dir})")
    if odd:
        raise NumaprofError(f"cannot revert {plural(odd)}; nothing was reverted")
    if locked:
        raise NumaprofError(f"cannot revert {plural(locked)}; nothing was reverted")
    if edited:
        verb = "was" if len(edited) == 1 else "were"
        raise NumaprofError(
            f"{plural(edited)} {verb} edited after --apply; not reverting, to keep those "
            f"edits (the originals are in {files_dir})")

    def fd_of(j: int) -> int:
        return tree.targets[shown[j]].fd

    done = 0
    try:
        for j in todo:
            state.write_manifest({**doc, "state": "reverting", "writing": j})
            done += 1
            overwrite(fd_of(j), originals[j])
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
            raise NumaprofError(f"reverting failed ({describe(e)}); every file is still "
                                "patched: run --revert again") from e
        raise NumaprofError(f"reverting failed ({describe(e)}); the originals are kept in "
                            f"{files_dir}: run `numaprof suggest --revert` again to finish") \
            from e
    try:
        state.discard()
    except OSError as e:
        raise NumaprofError(f"every file is restored, but numaprof's state in "
                            f"{state.apply_path} could not be removed ({describe(e)}): run "
                            "--revert again to remove it") from e
    for d in {os.path.dirname(shown[j]) for j in todo}:
        try:
            fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            continue
        fsync_quietly(fd)
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
