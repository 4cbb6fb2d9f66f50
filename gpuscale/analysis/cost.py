"""Cost per sample: what a device count costs for the work it does, when the
user gives a price per device-hour (cloud users decide on this).

    cost per million samples = devices x price per device-hour / 3600 / X(N) x 1e6

where ``X(N)`` is samples per second at ``N`` devices. Relative to the base
count, ``cost(N) / cost(base) = (N / base) / speedup``: paying for ``N`` devices
that run ``speedup`` times faster (1.0 at linear scaling, above 1 whenever
efficiency is below 100 %). Pure functions, no TensorFlow, no Textual.

A predicted count's cost has the range of its throughput, upside down: the low
end of the cost comes from the high end of the throughput and the other way
round (:func:`cost_of`).
"""

from __future__ import annotations

import msgspec

from gpuscale.analysis.sweep import SweepPoint
from gpuscale.formatting import format_with_range, plural

SECONDS_PER_HOUR = 3600.0


class Cost(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The cost of one count of one configuration."""

    devices: int
    config: str
    predicted: bool
    per_million_samples: float
    """Money (the price's unit) per million samples."""
    relative: float
    """Over the same figure at the base count (1.0 at the base)."""
    price_per_device_hour: float | None = None
    """The price it was computed with (configurations may have their own)."""
    per_million_samples_low: float | None = None
    """Predicted counts with a range: the cost at the high end of the throughput's
    range (and ``_high`` at its low end); ``None`` (left out of ``--json``) for
    measured counts."""
    per_million_samples_high: float | None = None
    relative_low: float | None = None
    relative_high: float | None = None
    coverage: float | None = None
    """The stated coverage of the throughput range these come from (``None`` for a
    guessed range: :attr:`coverage_basis` says so)."""
    coverage_basis: str | None = None


def per_million_samples(devices: int, price_per_device_hour: float, throughput: float) -> float:
    """``devices x price / 3600 / throughput x 1e6``."""
    if throughput <= 0:
        return float("inf")
    return devices * price_per_device_hour / SECONDS_PER_HOUR / throughput * 1e6


def cost_of(row: SweepPoint, config: str, price: float, base_cost: float) -> Cost:
    """The cost of one table row at ``price``, relative to ``base_cost`` (the base
    row's); a predicted row with a throughput range gets the cost's range."""
    c = per_million_samples(row.devices, price, row.throughput or 0.0)
    cost = Cost(
        devices=row.devices,
        config=config,
        predicted=row.predicted,
        per_million_samples=c,
        relative=c / base_cost,
        price_per_device_hour=price,
    )
    if row.predicted and row.throughput_low is not None and row.throughput_high is not None:
        # more samples per second is less money per sample: the ends swap
        low = per_million_samples(row.devices, price, row.throughput_high)
        high = per_million_samples(row.devices, price, row.throughput_low)
        cost.per_million_samples_low, cost.per_million_samples_high = low, high
        cost.relative_low, cost.relative_high = low / base_cost, high / base_cost
        cost.coverage, cost.coverage_basis = row.coverage, row.coverage_basis
    return cost


def relative_text(cost: Cost) -> str:
    """``1.02x`` measured, ``1.02x (1.00\u20131.21x)`` predicted with a range."""
    return format_with_range(cost.relative, cost.relative_low, cost.relative_high, ".2f", "x")


def pace_words(speedup: float, text: str, than: str = "") -> str:
    """``1.54x faster`` (``than``: `` than 1``); a speedup below 1 is no such thing:
    ``0.51x the speed, slower``, and one that reads 1.00x is ``1.00x the speed``
    (``text``: the speedup formatted to two decimals, with its range)."""
    shown = round(speedup, 2)
    if shown > 1:
        return f"{text} faster{than}"
    of = " of " + than.removeprefix(" than ") if than else ""
    return f"{text} the speed{of}" + (", slower" if shown < 1 else "")


def cost_line(speedup: float, text: str, base_devices: int, cost: Cost, what: str) -> str:
    """``8 devices: 5.07x faster than 1, 1.58x the cost per million samples (0.41
    per million at 1.2 per device-hour)`` (``what``: the part in brackets); a
    predicted count says so and gives the ranges (``text``: the ``speedup``
    formatted, with its range; below 1 it says slower, :func:`pace_words`)."""
    pred = " (predicted)" if cost.predicted else ""
    pace = pace_words(speedup, text, f" than {base_devices}")
    return (
        f"{plural(cost.devices, 'device')}{pred}: {pace}, "
        f"{relative_text(cost)} the cost per million samples ({what})"
    )
