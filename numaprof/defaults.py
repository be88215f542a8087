"""numaprof's default settings, read from their one definition (numaprof_defaults.h),
which the collector and the allocation shim are compiled with."""

from __future__ import annotations

import re

from numaprof import paths

HEADER_NAME = "numaprof_defaults.h"


def _read() -> dict[str, int | str]:
    path = paths.include_dir() / HEADER_NAME
    try:
        text = path.read_text()
    except OSError as e:  # a broken installation: the header ships with the collector
        raise RuntimeError(f"cannot read {path}: {e.strerror}") from None
    return {m.group(1): int(m.group(2)) if m.group(2) else m.group(3)
            for m in re.finditer(r'^#define[ \t]+NMP_DEFAULT_(\w+)[ \t]+(?:(\d+)|"([^"\\]*)")[ \t]*$',
                                 text, re.M)}


_VALUES = _read()
#: The profile directory `record` writes and `report` / `suggest` read when given none.
DEFAULT_PROFILE: str = _VALUES["PROFILE"]
#: Samples per second per thread.
FREQ: int = _VALUES["FREQ"]
#: Heap allocations of at least this many bytes are tracked with their call stack.
ALLOC_THRESHOLD: int = _VALUES["ALLOC_THRESHOLD"]
#: About one in this many bytes allocated below the threshold is recorded with its stack.
SMALL_SAMPLE: int = _VALUES["SMALL_SAMPLE"]
#: One page fault in this many is recorded (first touches between are inferred).
FAULT_PERIOD: int = _VALUES["FAULT_PERIOD"]
#: A heap block released within this many ns is counted in its site's summary, not recorded.
SHORT_LIVED: int = _VALUES["SHORT_LIVED"]
