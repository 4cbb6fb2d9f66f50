"""How far to trust a run's numbers, and which of them deserve attention: the
judgements that ``gpuscale recommend`` and the dashboard share (the dashboard
only words them). Pure functions, no TensorFlow, no Textual."""

from __future__ import annotations

from typing import Literal

import msgspec

from gpuscale.analysis.summary import RunSummary
from gpuscale.formatting import format_fraction_pct, plural

ENOUGH_STEPS = 20
"""Fewer counted steps (of one worker) than this and the medians are preliminary."""

NOISY_SPREAD = 0.5
"""A step-time spread ``(p90 - p10) / median`` above this is called noisy: the
middle 80 % of steps then differ by more than half a step."""

NOTABLE_COMM_SHARE = 0.2
"""An exposed all-reduce above this share of the whole step is worth a look: a
fifth of every step waits for the gradient exchange."""

CPU_LOGICAL_CAVEAT = (
    "CPU logical devices share this machine's cores, so more of them add no "
    "compute: the predictions are for these logical devices, not for GPUs"
)
"""Said next to predictions made from runs on CPU logical devices."""

LOCAL_WORKERS_CAVEAT = (
    "the workers all ran on one machine and share its cores, so more of them add no "
    "compute: this shows the mechanism (the exchange between workers), not what "
    "separate machines would do"
)
"""Said next to predictions made from several workers on one machine's CPUs
(``--local-workers N``, :attr:`gpuscale.analysis.sweep.SweepPoint.local_cpu_workers`)."""


class RunConfidence(msgspec.Struct, kw_only=True):
    """How far to trust one run's numbers."""

    level: Literal["none", "low", "medium"]
    """``none``: nothing measured; ``low``: too few steps, noisy, or no phase
    breakdown; ``medium``: enough of everything (one run is never ``high``:
    one device count says nothing measured about another)."""
    reason: str
    """What the level rests on, e.g. ``"42 steps, spread 12%, 4 phase breakdowns,
    measured at 2 devices only"``."""


def run_confidence(summary: RunSummary) -> RunConfidence:
    """The confidence of one run, from its step count (one worker's), the spread of
    its step times and how many steps had their phases measured."""
    if summary.steps_counted == 0:
        return RunConfidence(level="none", reason="no measured steps yet")
    reasons = [plural(summary.steps_counted, "step")]
    level: Literal["none", "low", "medium"] = "medium"
    if summary.steps_counted < ENOUGH_STEPS:
        level = "low"
        reasons[0] += f" (< {ENOUGH_STEPS})"
    if summary.spread is not None:
        reasons.append(f"spread {format_fraction_pct(summary.spread)}")
        if summary.spread > NOISY_SPREAD:
            level = "low"
    reasons.append(
        f"{summary.phase_steps} phase breakdown{'s' if summary.phase_steps != 1 else ''}"
    )
    if summary.phase_steps == 0:
        level = "low"
    reasons.append(f"measured at {plural(summary.devices, 'device')} only")
    return RunConfidence(level=level, reason=", ".join(reasons))


def comm_share_is_notable(share: float | None) -> bool:
    """Whether an exposed all-reduce share (0-1) is above :data:`NOTABLE_COMM_SHARE`."""
    return share is not None and share > NOTABLE_COMM_SHARE
