"""Renderers: turn analysis and suggestion results into text, JSON or HTML.

Renderers never compute results and never see argv; they only lay out what they are given.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from numaprof.errors import NumaprofError

# What a terminal would act on rather than show: C0 controls (ESC, CR, BS, BEL, ...), DEL,
# C1 controls (U+0080-U+009F: CSI, OSC as single characters), the Unicode format
# characters that reorder or hide text (bidirectional overrides and isolates, zero-width
# characters), line and paragraph separators, and lone surrogates (not encodable).
_UNSAFE = "\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff"
_UNSAFE_LINE = re.compile(f"[{_UNSAFE}\n]")
_UNSAFE_TEXT = re.compile(f"[{_UNSAFE}]")


def _visible(m: re.Match) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean(text: str, *, newlines: bool = False) -> str:
    """``text`` with every character a terminal would act on (escape sequences, carriage
    returns, bidirectional overrides, ...) written as a visible escape (``\\x1b``), so that
    text from a profile (a command line, a path, a thread name) is shown, never obeyed.
    Newlines are escaped too unless ``newlines``: a field cannot start a line of its own.
    Tabs are kept (source lines in a patch have them)."""
    return (_UNSAFE_TEXT if newlines else _UNSAFE_LINE).sub(_visible, text)


@contextlib.contextmanager
def progress_callback(enabled: bool = True) -> Iterator[Callable[[str, float], None] | None]:
    """A progress(step, fraction) callback drawing a bar on stderr, on a TTY only."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), transient=True,
                  console=Console(stderr=True)) as bar:
        task = bar.add_task("loading", total=1.0)

        def update(step: str, fraction: float) -> None:
            bar.update(task, description=step, completed=max(0.0, min(1.0, fraction)))

        yield update


def write_atomic(path: Path, text: str) -> None:
    """Writes `text` to `path` through a temporary file created 0600, so a failure leaves
    no half file and the report is readable by its owner only, as the profile is."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise NumaprofError(f"cannot write {clean(str(path))}: {e.strerror}") from e
