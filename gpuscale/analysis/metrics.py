"""Every scaling metric, defined once with its formula. The rest of
:mod:`gpuscale.analysis` calls these and never re-derives them.

Notation: ``N`` devices (replicas), ``t(N)`` median step time in seconds, ``b(N)``
samples per step across all replicas (the global batch), ``X(N) = b(N) / t(N)``
throughput in samples per second.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from gpuscale import formatting


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation between the two
    nearest ranks (numpy's default). ``values`` must not be empty."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("percentile of no values")
    pos = (len(ordered) - 1) * q / 100.0
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def median(values: Sequence[float]) -> float:
    """The 50th percentile."""
    return percentile(values, 50.0)


def spread(values: Sequence[float]) -> float:
    """Relative spread of step times: ``(p90 - p10) / median``. 0.05 means the middle
    80 % of steps lie within 5 % of the median's size; robust to a few outliers."""
    mid = median(values)
    if mid <= 0:
        return 0.0
    return (percentile(values, 90.0) - percentile(values, 10.0)) / mid


def throughput(samples_per_step: float, step_time_s: float) -> float:
    """Samples per second: ``X = b / t``."""
    return samples_per_step / step_time_s


def speedup(throughput_n: float, throughput_base: float) -> float:
    """``S(N) = X(N) / X(base)``: how many times more samples per second than the
    baseline (one device, or the smallest count measured). For strong scaling
    (fixed global batch) this equals ``t(base) / t(N)``; for weak scaling
    ``N t(base) / (base t(N))``."""
    return throughput_n / throughput_base


def efficiency(speedup_n: float, devices: int, base_devices: int = 1) -> float:
    """Scaling efficiency ``E(N) = S(N) / (N / base)``: 1.0 is linear scaling,
    0.5 means half of every added device is lost."""
    return speedup_n / (devices / base_devices)


def marginal_efficiency(
    throughput_from: float, devices_from: int, throughput_to: float, devices_to: int
) -> float:
    """Efficiency of the step from ``N1`` to ``N2`` devices, per doubling:
    ``(X(N2) / X(N1)) ** (1 / log2(N2 / N1)) / 2``.

    For a doubling (1->2, 2->4, 4->8) this is simply the throughput gain divided by
    2: 1.0 means the added devices are used fully, 0.76 that doubling from 4 to 8
    gave 1.52 times the samples per second. Other steps (2->3, 1->4) are put on the
    same per-doubling scale, so the value does not depend on how the counts were
    spaced."""
    if devices_to <= devices_from:
        raise ValueError("marginal efficiency needs more devices at the end")
    gain = throughput_to / throughput_from
    if gain <= 0:
        return 0.0
    return gain ** (1.0 / math.log2(devices_to / devices_from)) / 2.0


def ring_volume_factor(devices: int) -> float:
    """Bytes each device sends (and receives) in a ring all-reduce, per byte of
    payload: ``2 (N - 1) / N`` (reduce-scatter then all-gather)."""
    return 2.0 * (devices - 1) / devices


def algbw_bytes_s(payload_bytes: float, allreduce_s: float) -> float:
    """Algorithm bandwidth: ``payload / all-reduce time`` (NCCL's ``algbw``)."""
    return payload_bytes / allreduce_s


def link_volume_factor(exchange: str, devices: int) -> float:
    """Payloads crossing the busiest link per step, ``v(N)``: ``2 (N - 1) / N`` for
    a ring all-reduce (``ring``), ``N - 1`` for gradients gathered on one device
    (``gather``: that device's link carries every other device's copy), ``N`` for
    variables on the host (``host``: one copy per device over the host's link)."""
    if exchange == "ring":
        return ring_volume_factor(devices)
    if exchange == "gather":
        return float(devices - 1)
    return float(devices)


LINK_VOLUME_WORDS = {"ring": "2(N-1)/N", "gather": "N-1", "host": "N"}
""":func:`link_volume_factor` in words, the bus-bandwidth convention of each exchange
as the views name it (``busbw = payload x factor / time``)."""


def busbw_bytes_s(algbw: float, devices: int, exchange: str = "ring") -> float:
    """Bus bandwidth: ``algbw x v(N)`` (:func:`link_volume_factor`), the rate the
    busiest link actually carried; comparable with the link's peak. For a ring
    this is NCCL's ``busbw``, ``algbw x 2 (N - 1) / N``."""
    return algbw * link_volume_factor(exchange, devices)


def share(part_s: float, whole_s: float) -> float:
    """``part / whole``, e.g. the exposed all-reduce's share of the step."""
    return part_s / whole_s if whole_s > 0 else 0.0


MIN_SAMPLES_FOR_UNCERTAINTY = 3
"""Below this many samples a median has no stated uncertainty (``None``)."""


def median_halfwidth(values: Sequence[float]) -> float | None:
    """Half-width of an approximate 95 % interval around the median of ``values``:
    ``1.96 x 1.2533 x sigma / sqrt(n)`` with the robust ``sigma = 1.4826 x MAD``
    (median absolute deviation; 1.2533 is the median's standard error over the
    mean's for normal noise). A few outliers barely move it, as they barely move
    the median. ``None`` for fewer than :data:`MIN_SAMPLES_FOR_UNCERTAINTY` values."""
    n = len(values)
    if n < MIN_SAMPLES_FOR_UNCERTAINTY:
        return None
    mid = median(values)
    mad = median([abs(v - mid) for v in values])
    return 1.96 * 1.2533 * 1.4826 * mad / math.sqrt(n)


class Balanced(NamedTuple):
    """A median over probes taken in two pass orders (:func:`balanced_median`)."""

    median: float
    halfwidth: float | None
    """Approximate 95 % half-width (``None``: fewer than 3 values)."""
    residuals: tuple[float, ...]
    """Each value less the median of its own order, scaled for the fitted median (an
    odd order's middle value left out), or less the median of all where not balanced:
    the noise the half-width is made of."""


def balanced_median(values: Sequence[float], first: Sequence[bool | None]) -> Balanced:
    """The median of a probe timing whose two passes ran in alternating order.

    The first pass after a training step pays for what the step left behind (cold
    caches, another compiled function's thread pool): on 2 CPU logical devices,
    probes spaced out by the budget read the exposed all-reduce as 0.00 ms when the
    compute pass ran first and 0.68 ms when the fused pass did (dense probes, one a
    step: 0.15 and 0.18 ms). Pooled, such values are two clusters whose median lands
    on either one as chance orders them; so where both orders have a value
    (``first[i]``: ``values[i]``'s probe ran its compute pass first), the median is
    the mean of the two orders' medians, which cancels a penalty of the first place
    whichever pass it falls on. With at least 2 values of each order the half-width is
    ``1.96 x 1.2533 x sigma x sqrt(1/n1 + 1/n2) / 2`` with ``sigma = 1.4826 x`` the
    median absolute deviation of each value from its own order's median, times
    ``sqrt(n / (n - 1))`` for the median fitted to the same ``n`` values, with an odd
    order's middle value (0 by construction) left out. For normal noise its 95 % range
    then holds for 85-95 % of draws at 2 + 2 to 30 + 30 probes (20,000 draws each:
    4 + 4 85 %, 3 + 3 95 %, without the two corrections 70 %); the plain median's
    half-width holds for 84 % at 6 values, 89 % at 10.
    With one value of an order, the plain half-width of all. Where an order is unknown (recordings
    before format 1.7, one replica) or missing: the plain :func:`median` and
    :func:`median_halfwidth`."""
    if not values:
        raise ValueError("median of no values")
    groups: dict[bool, list[float]] = {True: [], False: []}
    for value, order in zip(values, first, strict=True):
        if order is None:
            break
        groups[bool(order)].append(value)
    else:
        a, b = groups[True], groups[False]
        if a and b:
            mid = (median(a) + median(b)) / 2
            if len(a) < 2 or len(b) < 2:
                plain = median(values)
                return Balanced(mid, median_halfwidth(values), tuple(v - plain for v in values))
            residuals: list[float] = []
            for group in (a, b):
                ordered = sorted(group)
                centre = median(ordered)
                scale = math.sqrt(len(ordered) / (len(ordered) - 1))  # the centre is fitted
                if len(ordered) % 2:
                    del ordered[len(ordered) // 2]  # the middle value: its residual is 0
                residuals += [(v - centre) * scale for v in ordered]
            mad = median([abs(r) for r in residuals])
            width = 1.96 * 1.2533 * 1.4826 * mad * math.sqrt(1 / len(a) + 1 / len(b)) / 2
            return Balanced(mid, width, tuple(residuals))
    mid = median(values)
    return Balanced(mid, median_halfwidth(values), tuple(v - mid for v in values))


resolved = formatting.resolved
"""A measured phase is *resolved* when, as shown, it is larger than its own noise
(``value > halfwidth`` at the last digit printed); one rule for every view, kept in
:func:`gpuscale.formatting.resolved`, which the formatting of phases uses too."""


PARTS_TOLERANCE = 0.1
"""How far (a share of the whole) a breakdown's parts may miss the step before
they are said not to add up, whatever their stated noise: a probe's passes and the
steps are timed at different moments, and below 3 probes no noise is known."""


def parts_fit_whole(
    parts_s: float, whole_s: float | None, halfwidths: Sequence[float | None] = ()
) -> bool | None:
    """Whether a breakdown's parts add up to the step they split:
    ``|parts - whole| <= max(PARTS_TOLERANCE x whole, sum of the half-widths)``
    (the half-widths of each part's median and of the whole's; unknown ones count 0).
    ``None`` without a whole to compare with."""
    if not whole_s or whole_s <= 0:
        return None
    slack = max(PARTS_TOLERANCE * whole_s, sum(h for h in halfwidths if h is not None))
    return abs(parts_s - whole_s) <= slack


def scaled_parts(parts_s: Sequence[float], whole_s: float) -> tuple[float, ...]:
    """``parts`` scaled to add up to ``whole`` (``part x whole / sum(parts)``): the
    split of a measured step drawn as that step (the probes' medians add up to it
    only within their noise, :func:`parts_fit_whole`). All zeros: unchanged."""
    total = sum(parts_s)
    if total <= 0:
        return tuple(parts_s)
    return tuple(p * whole_s / total for p in parts_s)


def probes_for_precision(probes: int, halfwidth: float | None, asked: float) -> int:
    """Probes that would likely pin a share down to ``± asked`` (95 % half-width):
    a median's half-width shrinks as ``1/sqrt(n)``, so ``probes (halfwidth / asked)^2``,
    at least :data:`MIN_SAMPLES_FOR_UNCERTAINTY` (below them nothing is known: that
    many is a lower bound)."""
    need = MIN_SAMPLES_FOR_UNCERTAINTY
    if halfwidth is not None and asked > 0:
        need = max(need, math.ceil(probes * (halfwidth / asked) ** 2 - 1e-9))
    return need


def steps_per_probe(cost_s: float, step_s: float, probe_share: float) -> float | None:
    """Counted steps a probe budget needs to pay for one probe:
    ``cost / (probe_share x step)`` (``probe_share``: the probes' share of the
    steps' wall clock, e.g. 0.01; ``cost``: one probe as counted, its passes, its
    split step's excess and the slower step after it). ``None`` where it cannot
    be said (no cost, no step, no budget)."""
    if cost_s <= 0 or step_s <= 0 or probe_share <= 0:
        return None
    return cost_s / (probe_share * step_s)
