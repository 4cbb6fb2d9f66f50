"""Number formatting for the dashboard: units always shown, ``n/a`` for missing."""

from __future__ import annotations

NA = "n/a"


def gib(value_bytes: float | None) -> str:
    """Bytes as GiB with one decimal, or n/a."""
    return NA if value_bytes is None else f"{value_bytes / 2**30:.1f}"


def size(value_bytes: float | None) -> str:
    """Bytes with a binary unit (KiB, MiB, GiB)."""
    if value_bytes is None:
        return NA
    value = float(value_bytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return NA  # pragma: no cover


def rate(value_bytes_s: float | None) -> str:
    """Bytes per second in decimal units (GB/s, like NVIDIA's own tools)."""
    if value_bytes_s is None:
        return NA
    for unit, scale in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if value_bytes_s >= scale:
            return f"{value_bytes_s / scale:.1f} {unit}"
    return f"{value_bytes_s:.0f} B/s"


def seconds(value_s: float | None) -> str:
    """A duration: ms below one second, else s, else m:ss / h:mm:ss."""
    if value_s is None:
        return NA
    if value_s < 1:
        return f"{value_s * 1000:.1f} ms"
    if value_s < 60:
        return f"{value_s:.2f} s"
    whole = int(value_s)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def clock(value_s: float) -> str:
    """Elapsed time as m:ss or h:mm:ss."""
    whole = int(max(value_s, 0))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def number(value: float | None, fmt: str = ".0f", suffix: str = "") -> str:
    return NA if value is None else f"{value:{fmt}}{suffix}"


def bar(pct: float | None, width: int) -> str:
    """A text gauge ``width`` cells wide for 0-100 (blank track when n/a)."""
    width = max(width, 1)
    if pct is None:
        return "·" * width
    filled = pct / 100 * width
    full = int(min(max(filled, 0), width))
    partial = "▏▎▍▌▋▊▉"
    rest = filled - full
    text = "█" * full
    if full < width:
        index = int(rest * 8) - 1
        text += partial[index] if index >= 0 else ""
    return text + "░" * (width - len(text))
