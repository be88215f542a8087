"""The profile's archive: copies of the user's executables and sources taken at record
time (archive.json), read instead of the files on disk, which may have been rebuilt or
patched since (as perf's build-id cache does for perf report).

An :class:`Archive` is built once per analysis and passed to what reads binaries and
sources (:func:`~numaprof.analyzer.symbols.elf_info`, the
:class:`~numaprof.analyzer.symbols.CodeResolver`, the source naming in
:mod:`~numaprof.analyzer.srcnames`), so two profiles analysed in one process never see
each other's copies.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from numaprof.analyzer import profile_io
from numaprof.errors import ProfileError

INDEX = "archive.json"


@dataclass(frozen=True)
class Archive:
    """Original path -> checked copy inside the profile, for binaries and sources."""
    binaries: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)

    @classmethod
    def read(cls, profile_dir) -> Archive:
        """The archive of the profile at ``profile_dir`` (empty without archive.json).

        archive.json is profile content: each copy is ``archive/<sha256>``, checked with
        :func:`~numaprof.analyzer.profile_io.archive_copy` (a digest, a regular file
        inside the profile) before it is used; a copy that is absent is skipped (the file
        on disk is read, as for a profile without an archive); anything else raises
        ProfileError."""
        index = Path(profile_dir) / INDEX
        try:
            doc = profile_io.read_json(index)
        except FileNotFoundError:
            return cls()
        if not isinstance(doc, dict):
            raise ProfileError(f"{index}: corrupted (not a JSON object)")
        groups = {}
        for group in ("binaries", "sources"):
            found = groups[group] = {}
            for original, digest in profile_io.get_dict(doc, group, index).items():
                try:
                    copy = profile_io.archive_copy(profile_dir, digest)
                except FileNotFoundError:
                    continue
                if os.lstat(copy).st_size > profile_io.ARCHIVE_FILE_LIMIT:
                    raise ProfileError(f"{copy}: larger than the {profile_io.ARCHIVE_FILE_LIMIT} "
                                       "bytes record archives")
                found[str(original)] = str(copy)
        return cls(groups["binaries"], groups["sources"])

    def binary(self, path: str) -> str | None:
        """The archived copy of the executable or library at ``path``, or None."""
        return self.binaries.get(path)

    def source(self, path: str) -> str | None:
        """The archived copy of the source file ``path`` names, or None."""
        path = os.path.normpath(path)
        return self.sources.get(path) or self.binaries.get(path)

    def is_copy(self, path: str) -> bool:
        """Whether ``path`` is one of the archive's copies (inside the profile: never
        followed through a symbolic link)."""
        return path in self.sources.values() or path in self.binaries.values()


EMPTY = Archive()
