"""One unit system for every number gpuscale prints (CLI, dashboard, reports).

Headless: imports nothing but the standard library, so the CLI, the analysis
and the dashboard all format the same way.

The rules:

- Missing values print as ``n/a`` (:data:`NA`), never as 0; so do infinity and
  NaN (a number that cannot be shown is as good as missing).
- Every string that comes from data (a file, a script, the network) is shown
  through :func:`visible` (control characters as ``\x1b``-style escapes, so a
  recording cannot set the window title or clear the screen) and, where Rich or
  Textual markup is parsed, :func:`markup_literal` (``[bold]`` stays text).
- Durations take **seconds** and print in ms below one second
  (``12.3 ms``), in s below a minute (``4.56 s``, ``12.3 s``), then ``3m 05s`` /
  ``2h 03m``. :func:`format_ms` prints always in ms, for columns of step times.
  :func:`format_clock_s` prints an elapsed time as ``m:ss`` / ``h:mm:ss``.
- Sizes take **bytes** and print in decimal units (1 kB = 1000 B, 1 MB = 10^6 B,
  1 GB = 10^9 B): ``1.5 GB``. No KiB/MiB/GiB anywhere.
- Rates take **bytes per second** and print in the same decimal units per
  second: ``12.0 GB/s`` (as NVIDIA's tools and NCCL's busbw do).
- Percentages take a value on the 0-100 scale (:func:`format_pct`) or a
  fraction on the 0-1 scale (:func:`format_fraction_pct`) and print ``42%``.
- Throughput takes samples per second and prints ``1,234 samples/s``; the
  sampling frequency of telemetry takes an interval in seconds and prints
  ``2 Hz`` (:func:`format_sample_rate`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

NA = "n/a"
"""What a missing value prints as."""


def _missing(value: float | None) -> bool:
    """None, infinity or NaN: nothing a reader can use."""
    if value is None:
        return True
    try:
        return not math.isfinite(value)
    except (TypeError, OverflowError):
        return True


_CONTROL = {
    **{c: f"\\x{c:02x}" for c in range(0x20)},
    0x7F: "\\x7f",
    **{c: f"\\x{c:02x}" for c in range(0x80, 0xA0)},
    # Bidirectional overrides and isolates reorder what is shown ("Trojan source").
    **{c: f"\\u{c:04x}" for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))},
}
_CONTROL_KEEP_NEWLINES = {c: v for c, v in _CONTROL.items() if c not in (0x0A, 0x09)}


def visible(text: object, *, keep_newlines: bool = False, limit: int | None = None) -> str:
    """A string from data made safe to print: every control character (C0, DEL,
    C1, bidirectional overrides) shown as an escape such as ``\\x1b``, so nothing
    in it can move the cursor, set the window title or clear the screen.
    ``keep_newlines`` keeps line breaks and tabs (for multi-line log text);
    ``limit`` cuts it to that many characters, ending in ``…``."""
    text = text if isinstance(text, str) else str(text)
    if limit is not None and len(text) > limit:
        text = text[: max(limit - 1, 0)] + "…"
    return text.translate(_CONTROL_KEEP_NEWLINES if keep_newlines else _CONTROL)


def markup_literal(text: object, *, keep_newlines: bool = False, limit: int | None = None) -> str:
    """:func:`visible`, then escaped for Rich/Textual markup, so ``[bold]``,
    ``[/bold]`` or ``[link=...]`` in data is shown as typed: for strings put
    into a markup string (``f"[dim]{markup_literal(name)}[/]"``)."""
    from rich.markup import escape  # Rich is what parses the markup; its escape matches it

    return escape(visible(text, keep_newlines=keep_newlines, limit=limit))


_DECIMAL_UNITS = (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3))


def format_duration_s(value_s: float | None, significant: int | None = None) -> str:
    """A duration given in seconds: ``12.3 ms`` below 1 s, ``4.56 s`` below 10 s
    (three significant figures, as ``943.4 ms`` beside it: never ``1.0 s`` for both
    1.010 and 1.026 s), ``12.3 s`` below 60 s, ``3m 05s`` below an hour, else
    ``2h 03m``; ``n/a`` for None. ``significant``: at least that many significant
    figures below 1 s (``0.500 ms`` and ``0.547 ms`` at 3, not ``0.5 ms`` for both:
    for durations set side by side whose difference is said), never fewer decimals
    than the one it has without."""
    if _missing(value_s):
        return NA
    value_s = float(value_s)
    if abs(value_s) < 1:
        value_ms = value_s * 1000
        digits = 1
        if significant is not None and value_ms != 0:
            digits = max(1, _decimals(_round_significant(value_ms, significant), significant))
        if abs(round(value_ms, digits)) < 1000:  # 999.96 ms is 1.00 s
            return f"{value_ms:.{digits}f} ms"
    if abs(value_s) < 9.995:  # 9.996 rounds to 10.0 s, not "10.00 s"
        return f"{value_s:.2f} s"
    if abs(value_s) < 60:
        return f"{value_s:.1f} s"
    minutes, secs = divmod(int(round(value_s)), 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def format_rough_duration_s(value_s: float | None) -> str:
    """A duration a model estimated, to two significant figures (``64 ms``,
    ``6.4 ms``, ``640 ms``, ``1.3 s``): never ``64.0 ms`` for a number no
    measurement gave to a tenth of a millisecond; a minute or more, or 0, as
    :func:`format_duration_s`."""
    if _missing(value_s):
        return NA
    value = float(value_s)
    if value == 0 or abs(value) >= 60:
        return format_duration_s(value)
    x, unit = (value, "s") if abs(value) >= 1 else (value * 1000, "ms")
    x = round(x, 1 - math.floor(math.log10(abs(x))))
    if unit == "ms" and abs(x) >= 1000:  # 999.6 ms rounds to 1.0 s
        x, unit = x / 1000, "s"
    digits = max(0, 1 - math.floor(math.log10(abs(x))))
    return f"{x:.{digits}f} {unit}"


def format_ms(value_s: float | None, digits: int = 1) -> str:
    """A duration given in seconds, printed always in milliseconds
    (``123.4 ms``), so a column of step times shares one unit."""
    value_ms = None if _missing(value_s) else value_s * 1000
    return NA if _missing(value_ms) else f"{value_ms:.{digits}f} ms"


def _shows_as_zero_ms(value_s: float, digits: int) -> bool:
    """Whether ``value_s`` would print as ``0.0 ms`` (or below) at ``digits``."""
    return value_s * 1000 < 0.5 * 10.0**-digits


def format_measured_ms(value_s: float | None, digits: int = 1) -> str:
    """A duration measured without a stated uncertainty, in milliseconds, never a
    0.0 that rounding made: under half the last digit it is ``< 0.1 ms``."""
    if not _missing(value_s) and _shows_as_zero_ms(value_s, digits):
        return f"< {10.0**-digits:.{digits}f} ms"
    return format_ms(value_s, digits)


def resolved(value: float | None, halfwidth: float | None, resolution: float = 1e-4) -> bool:
    """The one rule for whether a measured value stands out of its own noise: it is
    *resolved* when, as shown (both rounded to ``resolution``, the last digit
    printed: 0.1 ms by default, 0.001 for a share shown as ``3.6%``), it is larger
    than its 95 % half-width; ``5.3 ± 5.3 ms`` is not. A value with no stated
    uncertainty is resolved when positive (as shown). Unresolved values are shown
    as ``< value + halfwidth``. (:func:`gpuscale.analysis.metrics.resolved` is this
    function, for the analysis.)"""
    if value is None:
        return False
    return round(value / resolution) > round((halfwidth or 0.0) / resolution)


def format_phase_s(value_s: float | None, err_s: float | None, digits: int = 1) -> str:
    """A measured phase with its uncertainty (a 95 % half-width), in milliseconds:
    ``12.3 ± 1.2 ms``; where the phase is no larger than its noise,
    ``< 1.4 ms (not resolved)`` (never ``0.0 ms``: noise is not zero); without an
    uncertainty (too few probes) the value alone, or ``not resolved`` if it is not
    positive."""
    if value_s is None:
        return NA
    if err_s is None:
        if _shows_as_zero_ms(value_s, digits):  # noise is not zero
            return "not resolved (too few probes)"
        return format_ms(value_s, digits)
    if resolved(value_s, err_s, 10.0 ** -(digits + 3)):
        return f"{value_s * 1000:.{digits}f} ± {err_s * 1000:.{digits}f} ms"
    # at least the last digit shown: "< 0.0 ms" would be a zero that is noise
    bound = max(max(value_s, 0.0) + err_s, 10.0 ** -(digits + 3))
    return f"< {bound * 1000:.{digits}f} ms (not resolved)"


def format_phase_in_step_s(
    value_s: float | None,
    err_s: float | None,
    step_s: float | None,
    probes: int,
    devices: int = 1,
) -> str:
    """A phase measured against the probed steps' median ``step_s``, as
    :func:`format_phase_s`, except where the phase is no smaller than that step:
    a probe's pass and the steps' median come from different moments, so a
    compute pass of 535 ms beside a 477 ms step is not a fact about the step.
    It reads ``≈ the whole step (1 probe; exposed exchange not resolved)`` instead
    (the exchange is what is left of the step, and nothing is left). ``devices``
    1: nothing is exchanged, so nothing is said about it."""
    if value_s is None or not step_s or value_s < step_s:
        return format_phase_s(value_s, err_s)
    why = f"{probes} probe{'s' if probes != 1 else ''}"
    if devices > 1:
        why += "; exposed exchange not resolved"
    return f"\u2248 the whole step ({why})"


def format_clock_s(value_s: float) -> str:
    """An elapsed time given in seconds as a clock: ``m:ss`` or ``h:mm:ss``
    (negative values print as ``0:00``; infinity or NaN as ``n/a``)."""
    if _missing(value_s):
        return NA
    whole = int(max(value_s, 0))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def format_bytes(value_bytes: float | None) -> str:
    """A size given in bytes, in decimal units with one decimal: ``512 B``,
    ``1.5 kB``, ``12.0 MB``, ``80.0 GB``, ``1.2 TB``; ``n/a`` for None."""
    if _missing(value_bytes):
        return NA
    value = float(value_bytes)
    for unit, scale in _DECIMAL_UNITS:
        if abs(value) >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{value:.0f} B"


def format_gb(value_bytes: float | None) -> str:
    """A size given in bytes as a bare number of GB (10^9 bytes) with one
    decimal, for ``used/total GB`` pairs; ``n/a`` for None."""
    return NA if _missing(value_bytes) else f"{value_bytes / 1e9:.1f}"


def format_rate_bytes_s(value_bytes_s: float | None, significant: int | None = None) -> str:
    """A transfer rate given in bytes per second, in decimal units:
    ``850 B/s``, ``1.5 kB/s``, ``320.0 MB/s``, ``45.0 GB/s``; ``n/a`` for None.
    ``significant``: that many significant figures instead of one decimal, for a
    measured rate that is not known better (``393 MB/s``, ``1.12 GB/s``)."""
    if _missing(value_bytes_s):
        return NA
    value = float(value_bytes_s)
    if significant is not None:
        value = _round_significant(value, significant)
    for unit, scale in _DECIMAL_UNITS:
        if abs(value) >= scale:
            scaled = value / scale
            if significant is None:
                return f"{scaled:.1f} {unit}/s"
            return f"{scaled:.{_decimals(scaled, significant)}f} {unit}/s"
    return f"{value:.0f} B/s"


def _round_significant(value: float, significant: int) -> float:
    """``value`` rounded to ``significant`` figures (999.6 at 3 is 1000)."""
    if value == 0:
        return 0.0
    return round(value, significant - 1 - math.floor(math.log10(abs(value))))


def _decimals(value: float, significant: int) -> int:
    """Decimals that show ``value`` (already rounded) to ``significant`` figures."""
    if value == 0:
        return 0
    return max(0, significant - 1 - math.floor(math.log10(abs(value))))


def format_gb_s(value_bytes_s: float | None) -> str:
    """A rate given in bytes per second as a bare number of GB/s (10^9 B/s):
    one decimal below 10, none above; ``n/a`` for None."""
    if _missing(value_bytes_s):
        return NA
    value = value_bytes_s / 1e9
    return f"{value:.1f}" if abs(value) < 10 else f"{value:.0f}"


def format_share_halfwidth(err_s: float, step_s: float) -> str:
    """A share's 95 % half-width in points of the step, as the tables print it:
    ``2`` (``0.4`` below one point)."""
    width = 100 * err_s / step_s
    return f"{width:.0f}" if width >= 1 else f"{width:.1f}"


def format_pct(value_pct: float | None, digits: int = 0) -> str:
    """A percentage given on the 0-100 scale: ``42%``; ``n/a`` for None."""
    return NA if _missing(value_pct) else f"{value_pct:.{digits}f}%"


def format_fraction_pct(fraction: float | None, digits: int = 0) -> str:
    """A fraction given on the 0-1 scale, printed as a percentage:
    0.42 -> ``42%``; ``n/a`` for None."""
    pct = None if _missing(fraction) else fraction * 100
    return NA if _missing(pct) else f"{pct:.{digits}f}%"


def format_points(share: float) -> str:
    """A share's half-width (0-1 scale) in percentage points, with the decimals it
    needs: ``±2``, ``±2.5``, ``±0.4``, ``±0.04`` (never a ``±0`` for a share above 0)."""
    value = share * 100
    if abs(value - round(value)) < 0.05 and (round(value) or not value):
        return f"\u00b1{value:.0f}"
    digits = 1
    while digits < 3 and value and not float(f"{value:.{digits}f}"):
        digits += 1
    return f"\u00b1{value:.{digits}f}"


def format_pct_against_floor(fraction: float | None, floor: float, passes: bool) -> str:
    """A fraction compared with a floor (both on the 0-1 scale; ``passes``: whether
    it was judged to pass), as a percentage with as few decimals (0 to 3) as keep
    that judgement true on the page: 0.5996 failing a floor of 0.6 is ``59.96%``,
    never a ``60%`` that fails a floor of ``60%``; 0.6 passing it is ``60%``."""
    if _missing(fraction):
        return NA
    for digits in range(4):
        shown, bar = round(fraction * 100, digits), round(floor * 100, digits)
        if (shown >= bar) == passes:
            return format_fraction_pct(fraction, digits)
    return format_fraction_pct(fraction)  # judged on more than this value: as it is


def step_of(done: int, total: int | None) -> str:
    """``21/60``: ``done`` steps of the planned ``total``; a step past its plan (Keras
    overrunning an epoch) is no ``31/30``, the plan then the step; ``21`` without one."""
    return f"{done}/{max(done, total)}" if total else str(done)


def plural(count: int | Sequence[int], noun: str, many: str | None = None) -> str:
    """``count`` and ``noun``, the noun plural unless ``count`` is 1: ``1 step``,
    ``0 steps``, ``2 devices``; ``many`` for a plural other than ``noun + "s"``.
    A list of counts is joined: ``1, 2, 4 devices``, ``1 device``."""
    if isinstance(count, int):
        text, one = f"{count}", count == 1
    else:
        text, one = ", ".join(map(str, count)), list(count) == [1]
    return f"{text} {noun if one else many or noun + 's'}"


def strategy_words(strategy: str | None) -> str:
    """A recorded strategy's name as a sentence says it: ``mirrored``; a script's
    ``none`` (Keras without a ``tf.distribute`` strategy) ``no tf.distribute
    strategy``; ``unknown`` (a script without gpuscale's callback, yet)
    ``strategy unknown``."""
    if strategy == "none":
        return "no tf.distribute strategy"
    if strategy in (None, "", "?", "unknown"):
        return "strategy unknown"
    return strategy


def exchange_words(cross_device_ops: str | None, replicas: int, *, short: bool = False) -> str:
    """How a run's strategy exchanges its gradients, to follow the strategy's name:
    `` with nccl all-reduce`` (``short``: `` (nccl)``); with one replica there is
    no exchange, whatever the strategy would use with more: `` (1 replica, no
    all-reduce)``; ``""`` when the run does not say (``cross_device_ops`` unset)."""
    if not cross_device_ops:
        return ""
    if replicas <= 1:
        return " (1 replica, no all-reduce)"
    return f" ({cross_device_ops})" if short else f" with {cross_device_ops} all-reduce"


def join_clauses(parts: Iterable[str | None]) -> str:
    """Clauses joined with ``; `` (empty ones left out), each without the full stop
    it may end with: ``"... for the original."`` and ``"recorded as X"`` make
    ``"... for the original; recorded as X"``, never ``"original.; recorded"``."""
    return "; ".join(p.rstrip().rstrip(".") for p in parts if p and p.strip())


def format_samples_s(value_samples_s: float | None) -> str:
    """Training throughput given in samples per second: ``1,234 samples/s``
    (one decimal below 10); ``n/a`` for None."""
    if _missing(value_samples_s):
        return NA
    if abs(value_samples_s) < 10:
        return f"{value_samples_s:.1f} samples/s"
    return f"{value_samples_s:,.0f} samples/s"


def format_sample_rate(interval_s: float | None) -> str:
    """How often telemetry is sampled, given the interval in seconds:
    0.5 -> ``2 Hz``, 5 -> ``0.2 Hz``; ``n/a`` for None or a non-positive interval."""
    if _missing(interval_s) or interval_s <= 0:
        return NA
    hz = 1 / interval_s
    return f"{hz:.0f} Hz" if hz >= 10 or hz == int(hz) else f"{hz:.1f} Hz"


def format_number(value: float | None, fmt: str = ".0f", suffix: str = "") -> str:
    """Any other number with a format spec and a unit suffix (``564 W``,
    ``60 °C``); ``n/a`` for None."""
    return NA if _missing(value) else f"{value:{fmt}}{suffix}"


def _cost_digits(value: float) -> int:
    """Decimals of a cost: two, or as many as give two significant figures."""
    if value == 0:
        return 2
    return max(2, 1 - math.floor(math.log10(abs(value))))


def format_cost(value: float | None) -> str:
    """Money (any currency) with two decimals, or as many as give it two
    significant figures: ``0.47``, ``2.31``, ``1,234.50``, but ``0.018`` and
    ``0.060``, never ``0.02`` and ``0.06`` that make 3.38x the cost look like 3x;
    ``n/a`` for None."""
    if _missing(value):
        return NA
    digits = _cost_digits(value)
    digits = _cost_digits(round(value, digits))  # 0.00996 rounds to 0.010, not 0.0100
    return f"{value:,.{digits}f}"


def format_cost_range(low: float | None, high: float | None) -> str:
    """``0.46–0.55``: a range of costs, both ends with the decimals of the
    smaller (:func:`format_cost`); empty without one."""
    if _missing(low) or _missing(high):
        return ""
    digits = _cost_digits(min(abs(low), abs(high)))
    return f"{low:,.{digits}f}–{high:,.{digits}f}"


def format_range(low: float | None, high: float | None, fmt: str, suffix: str = "") -> str:
    """``905\u20131,150``: a range on its own (``suffix`` once, after the high
    end); empty without one."""
    if low is None or high is None:
        return ""
    return f"{format_number(low, fmt)}\u2013{format_number(high, fmt)}{suffix}"


def format_with_range(
    value: float | None, low: float | None, high: float | None, fmt: str, suffix: str = ""
) -> str:
    """``7.88x (6.61\u20138.00x)``: a value and, when it has one, its range (the way
    every predicted number is printed: table, recommendation, dashboard)."""
    text = format_number(value, fmt, suffix)
    if _missing(value) or low is None or high is None:
        return text
    if format_number(low, fmt) == format_number(high, fmt):
        return text  # narrower than the digits shown: "1.00x (1.00–1.00x)" says nothing
    return f"{text} ({format_range(low, high, fmt, suffix)})"


def format_pct_with_range(value: float | None, low: float | None, high: float | None) -> str:
    """A fraction and its range as percentages, ``46% (25%–52%)``, with the
    decimals (0 or 1) that print the range's ends apart, ``1.2% (0.8%–1.3%)``
    (never ``1% (1%–1%)``); the value alone where even one decimal does not
    (a range narrower than the printed precision says nothing)."""
    if _missing(value) or low is None or high is None:
        return format_fraction_pct(value)
    for digits in (0, 1):
        ends = format_fraction_pct(low, digits), format_fraction_pct(high, digits)
        if ends[0] != ends[1]:
            return f"{format_fraction_pct(value, digits)} ({ends[0]}–{ends[1]})"
    return format_fraction_pct(value)


def text_gauge(pct: float | None, width: int) -> str:
    """A text gauge ``width`` cells wide for a value on the 0-100 scale, with
    eighth-cell resolution; a dotted track when the value is missing."""
    width = max(width, 1)
    if _missing(pct):
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
