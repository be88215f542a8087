"""Renderers: turn analysis and suggestion results into text, JSON or HTML.

Renderers never compute results and never see argv; they only lay out what they are given.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from numaprof.errors import NumaprofError


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
    """Writes `text` to `path` through a temporary file, so a failure leaves no half file."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise NumaprofError(f"cannot write {path}: {e.strerror}") from e
