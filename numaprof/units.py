"""Quantities as people read them, shared by every layer (the report, the suggestions)."""

from __future__ import annotations


def human_bytes(n: int) -> str:
    """1536 -> "1.5 KiB"; bytes below 1 KiB whole ("512 B"), TiB the largest unit."""
    v = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if v < 1024 or unit == "TiB":
            return f"{v:.0f} {unit}" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024
    return f"{n} B"
