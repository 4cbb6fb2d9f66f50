"""A GPU held down, and a GPU that idles while the others work: the one rule the
dashboard's device cards (:mod:`gpuscale.ui.widgets.devices`) and a run's summary
(:mod:`gpuscale.analysis.summary`) share.

In a synchronous data-parallel run every replica waits for the slowest GPU each
step, so one GPU whose clocks something holds down (heat, a hardware slowdown, a
power brake, a power limit lowered below its peers') sets the pace of all of them,
and one GPU markedly less busy than the others says the run's pace is set by
something else than the exchange (its input, or which work runs on which GPU).

NVML says why a GPU's clocks are below their maximum (its clock event reasons,
:attr:`~gpuscale.events.schema.GpuSample.throttle_reasons`). A power cap alone is
no odd one out: under full load every GPU reaches its cap (the H100 and H200
recordings in ``tests/fixtures``, one GPU each at its 700 W limit, read
``sw_power_cap`` in a third of their busy samples). It counts only for a GPU whose
power limit is below its peers' (the highest limit of the same GPUs on its
machine: ``nvidia-smi -pl 400`` on a 700 W H100); a run of one GPU has no peers.

A summary names a GPU held down in at least :data:`HELD_DOWN_SHARE` of its busy
samples (:data:`BUSY_PCT`: the clocks of an idle GPU hold nothing up), at least
:data:`MIN_HELD_SAMPLES` of them; and an imbalance where the least busy GPU of the
run lags the median of the run's other GPUs by :data:`IMBALANCE_POINTS` or more.
Neither imports TensorFlow or Textual.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

import msgspec

from gpuscale.analysis import metrics
from gpuscale.formatting import format_fraction_pct, plural

SLOWDOWNS: dict[str, str] = {
    "hw_power_brake": "power brake",
    "hw_thermal": "HW thermal",
    "sw_thermal": "thermal",
    "hw_slowdown": "HW slowdown",
    "reliability": "reliability",
    "board_limit": "board limit",
    "sw_power_cap": "power cap",
}
"""NVML's clock event reasons that slow a busy GPU, the most telling first, and
what the views call them. The other reasons (``gpu_idle``, ``applications_clocks``,
``sync_boost``, ``display_clocks``) slow nothing that matters."""

POWER_CAP = "sw_power_cap"

BUSY_PCT = 20.0
"""A sample in which a kernel ran at least this share of the period (NVML's
utilization) is a busy one: only those count towards a GPU held down."""
HELD_DOWN_SHARE = 0.2
"""A GPU held down in at least this share of its busy samples is named."""
MIN_HELD_SAMPLES = metrics.MIN_SAMPLES_FOR_UNCERTAINTY
"""...and in at least this many of them (a blip in a short run is no finding)."""
IMBALANCE_POINTS = 20.0
"""The least busy GPU of a run is markedly less busy than the others where its
time-averaged utilization lags the median of the others' by this many points or
more (a healthy synchronous run's GPUs are within a few points of each other)."""

GpuKey = tuple[int, int]
"""(worker, GPU index as NVML counts on the worker's machine)."""


def slowdowns(reasons: Iterable[str] | None) -> list[str]:
    """The reasons in :data:`SLOWDOWNS` among ``reasons``, most telling first."""
    given = set(reasons or ())
    return [reason for reason in SLOWDOWNS if reason in given]


def held_down_reasons(
    reasons: Iterable[str] | None,
    power_limit_w: float | None,
    peer_limit_w: float | None,
) -> list[str]:
    """The rule: what holds a GPU's clocks down in one sample (its clock event
    ``reasons``), most telling first; a power cap only where its ``power_limit_w``
    is below ``peer_limit_w``, the highest limit of the same GPUs on its machine
    (:func:`peer_limits_w`; ``None``: no peer to compare with). Empty: nothing does."""
    held = slowdowns(reasons)
    if POWER_CAP in held and (
        power_limit_w is None or peer_limit_w is None or power_limit_w >= peer_limit_w
    ):
        held.remove(POWER_CAP)
    return held


def peer_limits_w(
    gpus: Iterable[tuple[int, str, float | None]],
) -> dict[tuple[int, str], float]:
    """The highest power limit of each kind of GPU on each machine, by ``(worker,
    name)``, from ``(worker, name, power limit)`` of each GPU (or sample): what a
    GPU's own limit is compared with (:func:`held_down_reasons`). A GPU alone of
    its kind is its own peer, so its cap never counts."""
    limits: dict[tuple[int, str], float] = {}
    for worker, name, limit in gpus:
        if limit is not None:
            key = (worker, name)
            limits[key] = max(limits.get(key, 0.0), limit)
    return limits


class GpuRow(NamedTuple):
    """What a summary keeps of one GPU sample for this module."""

    t: float
    util_pct: float | None
    slowdowns: tuple[str, ...]
    """Its reasons in :data:`SLOWDOWNS` (:func:`slowdowns`)."""
    power_limit_w: float | None
    proc_mem_bytes: int | None


class GpuRows:
    """One GPU's rows (:class:`GpuRow`), kept in arrays (33 bytes a sample, not a
    tuple's 180: a summary keeps every sample of a long run, 1.4 million in a day
    of 8 GPUs sampled twice a second); :meth:`within` gives the rows back."""

    def __init__(self) -> None:
        self._t = array("d")
        self._util = array("d")
        self._held = array("B")
        self._limit = array("d")
        self._mem = array("q")
        self._reasons: list[tuple[str, ...]] = []
        self._codes: dict[tuple[str, ...], int] = {}

    def __len__(self) -> int:
        return len(self._t)

    def append(self, row: GpuRow) -> None:
        code = self._codes.get(row.slowdowns)
        if code is None:  # at most 2**7 sets of the 7 reasons: a byte each
            code = self._codes[row.slowdowns] = len(self._reasons)
            self._reasons.append(row.slowdowns)
        self._t.append(row.t)
        self._util.append(_NAN if row.util_pct is None else row.util_pct)
        self._held.append(code)
        self._limit.append(_NAN if row.power_limit_w is None else row.power_limit_w)
        self._mem.append(-1 if row.proc_mem_bytes is None else row.proc_mem_bytes)

    def within(self, lo: float, hi: float) -> list[GpuRow]:
        """The rows sampled from ``lo`` to ``hi`` (both included), in their order."""
        return [
            GpuRow(
                t,
                None if math.isnan(u := self._util[i]) else u,
                self._reasons[self._held[i]],
                None if math.isnan(w := self._limit[i]) else w,
                None if (m := self._mem[i]) < 0 else m,
            )
            for i, t in enumerate(self._t)
            if lo <= t <= hi
        ]


_NAN = float("nan")


class HeldDownGpu(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A GPU of a run held down in a meaningful share of its busy samples
    (:attr:`gpuscale.analysis.summary.RunSummary.gpus_held_down`)."""

    index: int
    """As NVML counts on its worker's machine."""
    worker: int = 0
    share: float
    """Its busy samples held down (:func:`held_down_reasons`) over its busy samples."""
    busy_samples: int
    """Its busy samples (utilization at least :data:`BUSY_PCT`) in the summary's window."""
    reasons: list[str]
    """NVML's reasons that held it down (keys of :data:`SLOWDOWNS`), in the most
    samples first."""
    power_limit_w: float | None = None
    """With ``sw_power_cap`` among the reasons: its power limit (the lowest it had
    while capped)."""
    peer_power_limit_w: float | None = None
    """With ``sw_power_cap``: its peers' highest power limit, which its own is below."""


class GpuImbalance(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The run's least busy GPU, markedly less busy than its others
    (:attr:`gpuscale.analysis.summary.RunSummary.gpu_imbalance`)."""

    index: int
    worker: int = 0
    util_pct: float
    """Its time-averaged utilization over the summary's window."""
    others_pct: float
    """The median of the run's other GPUs' time-averaged utilization."""


def run_gpus(rows: Mapping[GpuKey, Sequence[GpuRow]], replicas: int) -> set[GpuKey] | None:
    """Which of the sampled GPUs are the run's: all of them where as many were
    sampled as the run has replicas; else those the run's processes hold memory on,
    where as many; ``None``: not known (a script's run samples every GPU of the
    machine, and TensorFlow may hold memory on GPUs it runs no replica on)."""
    if len(rows) == replicas:
        return set(rows)
    holding = {k for k, rs in rows.items() if any((r.proc_mem_bytes or 0) > 0 for r in rs)}
    return holding if len(holding) == replicas else None


def held_down_gpus(
    rows: Mapping[GpuKey, Sequence[GpuRow]],
    names: Mapping[GpuKey, str],
    gpus: Iterable[GpuKey] | None = None,
) -> list[HeldDownGpu]:
    """The GPUs (of ``gpus``; ``None``: every one in ``rows``) held down in at least
    :data:`HELD_DOWN_SHARE` of their busy samples and at least
    :data:`MIN_HELD_SAMPLES` of them, the most held down first. ``rows``: each
    sampled GPU's samples (the summary's window); ``names``: each GPU's model,
    whose peers on its machine a power limit is compared with (every sampled GPU
    of that model, the run's or not; a GPU without a name is compared with the
    others without one)."""
    peers = peer_limits_w(
        (worker, names.get((worker, index), ""), row.power_limit_w)
        for (worker, index), rs in rows.items()
        for row in rs
    )
    found = []
    for key in sorted(set(rows) if gpus is None else set(gpus) & set(rows)):
        peer = peers.get((key[0], names.get(key, "")))
        busy = [r for r in rows[key] if r.util_pct is not None and r.util_pct >= BUSY_PCT]
        counts: Counter[str] = Counter()
        held = 0
        capped_at: list[float] = []
        for row in busy:
            reasons = held_down_reasons(row.slowdowns, row.power_limit_w, peer)
            if reasons:
                held += 1
                counts.update(reasons)
                if POWER_CAP in reasons and row.power_limit_w is not None:
                    capped_at.append(row.power_limit_w)
        if held < MIN_HELD_SAMPLES or held / len(busy) < HELD_DOWN_SHARE:
            continue
        order = list(SLOWDOWNS)
        found.append(
            HeldDownGpu(
                index=key[1],
                worker=key[0],
                share=held / len(busy),
                busy_samples=len(busy),
                reasons=sorted(counts, key=lambda r: (-counts[r], order.index(r))),
                power_limit_w=min(capped_at) if capped_at else None,
                peer_power_limit_w=peer if capped_at else None,
            )
        )
    return sorted(found, key=lambda g: -g.share)


def imbalance(means_pct: Mapping[GpuKey, float]) -> GpuImbalance | None:
    """The least busy of the run's GPUs (``means_pct``: each one's time-averaged
    utilization), where it lags the median of the others by
    :data:`IMBALANCE_POINTS` or more; ``None``: no such GPU, or fewer than two."""
    if len(means_pct) < 2:
        return None
    key = min(sorted(means_pct), key=lambda k: means_pct[k])
    others = metrics.median([v for k, v in means_pct.items() if k != key])
    if others - means_pct[key] < IMBALANCE_POINTS:
        return None
    return GpuImbalance(index=key[1], worker=key[0], util_pct=means_pct[key], others_pct=others)


def gpu_name(index: int, worker: int, workers: int) -> str:
    """``GPU 3``; with several workers ``worker 1 GPU 3``."""
    return f"worker {worker} GPU {index}" if workers > 1 else f"GPU {index}"


def held_down_words(gpu: HeldDownGpu, workers: int = 1) -> str:
    """``GPU 3 was held down in 95% of its 38 busy samples (HW slowdown, power cap;
    its power limit 400 W, its peers' 700 W)``."""
    why = ", ".join(SLOWDOWNS[r] for r in gpu.reasons if r in SLOWDOWNS) or "reason not said"
    if gpu.power_limit_w is not None and gpu.peer_power_limit_w is not None:
        why += (
            f"; its power limit {gpu.power_limit_w:.0f} W, its peers' "
            f"{gpu.peer_power_limit_w:.0f} W"
        )
    return (
        f"{gpu_name(gpu.index, gpu.worker, workers)} was held down in "
        f"{format_fraction_pct(gpu.share)} of its {plural(gpu.busy_samples, 'busy sample')} "
        f"({why})"
    )


def held_down_said(gpus: Sequence[HeldDownGpu] | None, workers: int = 1) -> str | None:
    """The GPUs held down, in words (:func:`held_down_words`, ``; `` between them);
    ``None``: none."""
    return "; ".join(held_down_words(g, workers) for g in gpus or ()) or None
