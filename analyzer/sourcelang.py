"""Source languages by file name, and their tree-sitter parsers.

One table for the analyzer (naming objects from the line that allocated them) and the
recommender (patching that line), so that both read a file with the same grammar.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import PurePath

C_SUFFIXES = frozenset({".c", ".h"})
CXX_SUFFIXES = frozenset({".cc", ".cpp", ".cxx", ".c++", ".cp", ".hpp", ".hh", ".hxx", ".h++",
                          ".ipp", ".tpp"})
CXX_CASED_SUFFIXES = frozenset({".C", ".H"})  # capitalised: C++, as gcc takes them
FORTRAN_FREE_SUFFIXES = frozenset({".f90", ".f95", ".f03", ".f08", ".f18"})
FORTRAN_FIXED_SUFFIXES = frozenset({".f", ".for", ".ftn", ".f77"})


def source_language(path: str) -> str | None:
    """``c``, ``cpp`` or ``fortran`` by the file's suffix (case-insensitive, except that
    ``.C`` and ``.H`` are C++); None for any other file."""
    suffix = PurePath(path).suffix
    low = suffix.lower()
    if suffix in CXX_CASED_SUFFIXES or low in CXX_SUFFIXES:
        return "cpp"
    if low in C_SUFFIXES:
        return "c"
    if low in FORTRAN_FREE_SUFFIXES or low in FORTRAN_FIXED_SUFFIXES:
        return "fortran"
    return None


_C_NAME = re.compile(r"[A-Za-z_]\w*")


def site_language(path: str, function: str) -> str:
    """The language of a line of ``path`` inside ``function`` (the name DWARF gives it):
    by the file's extension, C for an unknown one, except that a ``.h`` header (C or C++)
    holding a C++ function (a demangled name: `Allocate<double>(unsigned long)`,
    `Domain::AllocateElemPersistent(int)`, where a C function's name is an identifier) is
    C++."""
    lang = source_language(path) or "c"
    if lang == "c" and path.endswith(".h") and not _C_NAME.fullmatch(function):
        return "cpp"
    return lang


def fortran_free_form(path: str) -> bool:
    """Whether a Fortran file is free-form source (``.f90`` and later), by its suffix."""
    return PurePath(path).suffix.lower() in FORTRAN_FREE_SUFFIXES


@lru_cache(maxsize=3)
def parser(lang: str):
    """The tree-sitter parser of ``c``, ``cpp`` or ``fortran`` (one per process)."""
    import tree_sitter

    if lang == "c":
        import tree_sitter_c as grammar
    elif lang == "cpp":
        import tree_sitter_cpp as grammar
    elif lang == "fortran":
        import tree_sitter_fortran as grammar
    else:
        raise ValueError(f"no parser for language {lang!r}")
    return tree_sitter.Parser(tree_sitter.Language(grammar.language()))
