"""Cost per sample: what a device count costs for the work it does, when the
user gives a price per device-hour (cloud users decide on this).

    cost per million samples = devices x price per device-hour / 3600 / X(N) x 1e6

where ``X(N)`` is samples per second at ``N`` devices. Relative to the base
count, ``cost(N) / cost(base) = (N / base) / speedup``: paying for ``N`` devices
that run ``speedup`` times faster (1.0 at linear scaling, above 1 whenever
efficiency is below 100 %). Pure functions, no TensorFlow, no Textual.
"""

from __future__ import annotations

import msgspec

from gpuscale.formatting import plural

SECONDS_PER_HOUR = 3600.0


class Cost(msgspec.Struct, kw_only=True):
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


def per_million_samples(devices: int, price_per_device_hour: float, throughput: float) -> float:
    """``devices x price / 3600 / throughput x 1e6``."""
    if throughput <= 0:
        return float("inf")
    return devices * price_per_device_hour / SECONDS_PER_HOUR / throughput * 1e6


def cost_line(speedup: float, devices: int, base_devices: int, relative: float, what: str) -> str:
    """``8 devices: 5.10x faster, 1.57x the cost per million samples ($0.41)``."""
    return (
        f"{plural(devices, 'device')}: {speedup:.2f}x faster than "
        f"{base_devices}, {relative:.2f}x the cost per million samples ({what})"
    )
