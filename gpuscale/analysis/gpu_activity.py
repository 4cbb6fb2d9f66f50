"""What the GPUs did over a run: busy (NVML utilization) and, where GPM reads it, working.

NVML's utilization is the share of time in which any kernel ran: a copy, NCCL's
all-reduce and even host-to-device copies read as fully busy. Hopper's GPM
metrics say how much of the SMs, and of their tensor cores, the work used. Read on
an H100 by ``benchmarks/gpu/check.sh`` (2026-11-26; the recording is
``tests/fixtures/h100_load.ndjson``): bf16 matrix products 100% busy, SM 96%,
tensor 93%; 1 GiB device-to-device copies 100% busy, SM 99%, tensor 0%;
host-to-device copies 100% busy, SM 0%.
"""

from __future__ import annotations

from gpuscale.analysis.held_down import gpu_name, held_down_said
from gpuscale.analysis.summary import RunSummary
from gpuscale.formatting import format_duration_s

BUSY_NOT_WORKING = 0.5
"""SM activity under this share of the utilization, with the GPUs at least half
busy, reads as "busy, not working"."""


def _activity(s: RunSummary) -> tuple[float | None, float | None, float | None, str]:
    """Busy, SM and tensor activity and which statistic they are: the time averages
    (``time average``), or in a summary written before those existed, what it had
    (``median``)."""
    if s.gpu_util_mean_pct is not None:
        return (
            s.gpu_util_mean_pct,
            s.gpu_sm_activity_mean_pct,
            s.gpu_tensor_activity_mean_pct,
            "time average",
        )
    util, sm, tensor = (
        s.gpu_util_median_pct,
        s.gpu_sm_activity_median_pct,
        s.gpu_tensor_activity_median_pct,
    )
    return util, sm, tensor, "median"


def gpu_window_text(s: RunSummary) -> str | None:
    """Over which samples the GPU figures are taken (:attr:`RunSummary.gpu_window`):
    ``over the counted steps``; with no counted step, ``over the whole run (31.5 s
    sampled, start-up included)`` (``the run so far`` while it runs), how long said as
    it is not the run's duration; ``None`` where the summary does not say (no GPU
    samples, or written before it did)."""
    if s.gpu_window == "counted steps":  # how long: the run's own duration says it
        return "over the counted steps"
    took = format_duration_s(s.gpu_window_s) if s.gpu_window_s is not None else None
    if s.gpu_window == "whole run":
        what = "the run so far" if s.status == "running" else "the whole run"
        return f"over {what} ({f'{took} sampled, ' if took else ''}start-up included)"
    return None


def gpu_activity_text(s: RunSummary) -> str | None:
    """``busy 99% · working SM 96%, tensor 93% (GPM) · least busy GPU 6 75%: time
    averages over the counted steps``: time averages (several GPUs: the median
    GPU's), the least busy GPU where it lags by over 10 points, and the window they are
    taken over (:func:`gpu_window_text`); ``None`` without GPU samples. "busy" is
    NVML's utilization. A summary that does not say its window (written before it
    did) reads ``busy 99% (time average) · ...``, or ``(median)`` where it has only
    the median fields."""
    util, sm, tensor, statistic = _activity(s)
    if util is None:
        return None
    window = gpu_window_text(s) if statistic == "time average" else None
    parts = [f"busy {util:.0f}%" + ("" if window else f" ({statistic})")]
    if sm is not None:
        parts.append(
            f"working SM {sm:.0f}%"
            + (f", tensor {tensor:.0f}%" if tensor is not None else "")
            + " (GPM)"
        )
    low = s.gpu_util_min_pct
    if s.devices > 1 and low is not None and low < util - 10:
        where = f"GPU {s.gpu_util_min_index}"
        if s.workers > 1 and s.gpu_util_min_worker is not None:
            where = f"worker {s.gpu_util_min_worker} {where}"
        parts.append(f"least busy {where} {low:.0f}%")
    text = " · ".join(parts)
    if window:
        several = len(parts) > 1
        text += f": time average{'s' if several else ''} {window}"
    return text


def busy_not_working(s: RunSummary) -> str | None:
    """A warning when the GPUs were busy but their SMs mostly idle (GPM only)."""
    util, sm, _tensor, _statistic = _activity(s)
    if util is None or sm is None or util < 50 or sm >= BUSY_NOT_WORKING * util:
        return None
    return (
        f"busy is not working: a kernel ran {util:.0f}% of the time but the SMs were "
        f"active {sm:.0f}% (copies, communication or small kernels)"
    )


def held_down_text(s: RunSummary) -> str | None:
    """The run's GPUs held down (:attr:`RunSummary.gpus_held_down`) and what that
    costs: ``GPU 3 was held down in 100% of its 38 busy samples (thermal): every
    replica waits for the slowest GPU, so it sets the pace of all 8``; ``None``:
    none."""
    said = held_down_said(s.gpus_held_down, s.workers)
    if said is None:
        return None
    if s.devices <= 1:
        return f"{said}: the run's throughput is below what the GPU does at full clocks"
    who = "it sets" if len(s.gpus_held_down or ()) == 1 else "they set"
    return f"{said}: every replica waits for the slowest GPU, so {who} the pace of all {s.devices}"


def imbalance_text(s: RunSummary) -> str | None:
    """``GPU 6 was busy 0% against 93% for the run's other GPUs (their median): an
    imbalance, ...`` (:attr:`RunSummary.gpu_imbalance`); ``None``: none."""
    odd = s.gpu_imbalance
    if odd is None:
        return None
    return (
        f"{gpu_name(odd.index, odd.worker, s.workers)} was busy {odd.util_pct:.0f}% against "
        f"{odd.others_pct:.0f}% for the run's other GPUs (their median): an imbalance, so the "
        "run's pace may be its input or its placement (which work runs on which GPU), "
        "not communication"
    )
