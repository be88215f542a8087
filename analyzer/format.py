"""The profile format, read from its one definition: ``numaprof_format.h``.

The collector's C tables are generated from the same header (collector/include/
nmp_schema.h), so the writer and this reader cannot disagree on a table, a column or a
type; ``numaprof-collect --schema`` prints what the collector was built with and a test
compares it with this module.  The header's grammar is stated at its top; anything else in
a table's block is an error here rather than a silently skipped column.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from numaprof import paths

HEADER_NAME = "numaprof_format.h"

#: C column type -> numpy dtype string of its values (STR: offsets into the .heap)
DTYPE_OF = {"U8": "|u1", "U16": "<u2", "U32": "<u4", "U64": "<u8", "I16": "<i2", "I32": "<i4",
            "I64": "<i8", "STR": "<u8"}

_DEFINE = re.compile(r"^#define[ \t]+(\w+)[ \t]+(.+?)[ \t]*$", re.M)
_TABLE = re.compile(r"^#define\s+NMP_TABLE_(\w+)\(COL\)\s*\\\s*$", re.M)
_COLUMN = re.compile(r"^\s*COL\((\w+),\s*(\w+),\s*(\w+),\s*(REQ|OPT)\)\s*(\\)?\s*$")
_TABLES = re.compile(r"^#define\s+NMP_TABLES\(T\)\s*\\\s*$", re.M)
_TABLE_ENTRY = re.compile(r"^\s*T\((\w+)\)\s*(\\)?\s*$")


class FormatDefinitionError(Exception):
    """numaprof_format.h does not follow its grammar (a broken installation or edit)."""


def _block(lines: list[str], start: int, pattern: re.Pattern) -> list[re.Match]:
    """The continuation lines after line `start`, each matching `pattern` (whose last group
    is the trailing backslash), up to the one without a backslash."""
    out = []
    for line in lines[start + 1:]:
        m = pattern.match(line)
        if m is None:
            raise FormatDefinitionError(f"{HEADER_NAME}: unexpected line {line!r}")
        out.append(m)
        if not m.group(pattern.groups):  # no continuation backslash: the block ends
            break
    else:
        raise FormatDefinitionError(f"{HEADER_NAME}: a block runs to the end of the file")
    return out


def parse(text: str) -> tuple[str, int, bytes, int, dict[str, dict[str, tuple[str, bool, bool]]]]:
    """(format name, version, column magic, column header bytes, schema) from the header.

    The schema maps table -> column -> (numpy dtype, required, is a string column), in the
    order of NMP_TABLES and of each table's columns.
    """
    return _parse(text)[:5]


def _parse(text: str):
    defines = {m.group(1): m.group(2) for m in _DEFINE.finditer(text)}
    try:
        fmt = defines["NMP_PROFILE_FORMAT"].strip('"')
        version = int(defines["NMP_PROFILE_VERSION"])
        magic = defines["NMP_COL_MAGIC"].strip('"').encode()
        header = int(defines["NMP_COL_HEADER"])
        segments = int(defines["NMP_OBJECT_PAGES_SEGMENTS"])
    except (KeyError, ValueError) as e:
        raise FormatDefinitionError(f"{HEADER_NAME}: missing or bad define {e}") from None
    if len(magic) != 8 or header != len(magic) + 8:
        raise FormatDefinitionError(f"{HEADER_NAME}: NMP_COL_MAGIC must have 8 characters, "
                                    "NMP_COL_HEADER be 16 (the magic and an 8-byte dtype)")
    lines = text.splitlines()
    starts = {i: m for i, line in enumerate(lines) if (m := _TABLE.match(line))}
    tables: dict[str, dict[str, tuple[str, bool, bool]]] = {}
    for i, m in starts.items():
        name = m.group(1)
        cols: dict[str, tuple[str, bool, bool]] = {}
        for c in _block(lines, i, _COLUMN):
            table, col, typ, req = c.group(1), c.group(2), c.group(3), c.group(4)
            if table != name or typ not in DTYPE_OF or col in cols:
                raise FormatDefinitionError(f"{HEADER_NAME}: bad column {c.group(0).strip()!r}")
            cols[col] = (DTYPE_OF[typ], req == "REQ", typ == "STR")
        tables[name] = cols
    order = next((i for i, line in enumerate(lines) if _TABLES.match(line)), None)
    if order is None:
        raise FormatDefinitionError(f"{HEADER_NAME}: no NMP_TABLES list")
    listed = [m.group(1) for m in _block(lines, order, _TABLE_ENTRY)]
    if sorted(listed) != sorted(tables):
        raise FormatDefinitionError(f"{HEADER_NAME}: NMP_TABLES lists {listed}, the file "
                                    f"defines {sorted(tables)}")
    return fmt, version, magic, header, {t: tables[t] for t in listed}, segments


def header_path() -> Path:
    """The header this installation was built with (the checkout's in a checkout)."""
    return paths.include_dir() / HEADER_NAME


@cache
def _load() -> tuple[str, int, bytes, int, dict, int]:
    try:
        text = header_path().read_text()
    except OSError as e:
        raise FormatDefinitionError(f"cannot read {header_path()}: {e.strerror} "
                                    "(a broken numaprof installation?)") from None
    return _parse(text)


_RULES = re.compile(r"^#define\s+NMP_SAMPLE_RULES\(R\)\s*\\\s*$", re.M)
_RULE = re.compile(r"^\s*R\((\w+),\s*(\w+),\s*(\d+)\)\s*(\\)?\s*$")


def _rule_names(text: str) -> dict[int, str]:
    """samples.rule value -> rule name, from NMP_SAMPLE_RULES in numaprof_format.h: the one
    list the collector's enum and its collector.json counts are generated from."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if _RULES.match(line)), None)
    if start is None:
        raise FormatDefinitionError(f"{HEADER_NAME}: no NMP_SAMPLE_RULES list")
    rules = [(int(m.group(3)), m.group(2)) for m in _block(lines, start, _RULE)]
    names = dict(rules)
    if len(names) != len(rules) or len(set(names.values())) != len(rules) or max(names) > 255:
        raise FormatDefinitionError(f"{HEADER_NAME}: NMP_SAMPLE_RULES repeats a rule "
                                        "or a value outside the u8 column")
    return names



FORMAT, VERSION, MAGIC, HEADER, SCHEMA, OBJECT_PAGES_SEGMENTS = _load()
#: samples.rule value -> rule name
RULE_NAMES = _rule_names(header_path().read_text())
#: the rules of samples that are not memory accesses: a thread busy-waiting (spin), the
#: core waiting on a divide or square root after the last access (divide); left out of
#: the address coverage (docs/backends.md)
NOT_ACCESS_RULES = ("spin", "divide")
assert set(NOT_ACCESS_RULES) <= set(RULE_NAMES.values()), NOT_ACCESS_RULES


def not_accesses(rules: dict) -> int:
    """The samples (of a rule name -> count map) that are not memory accesses."""
    return sum(int(rules.get(r, 0)) for r in NOT_ACCESS_RULES)
#: The tables in the order of the definition.
TABLES = tuple(SCHEMA)
