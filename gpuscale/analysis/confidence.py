"""How far to trust a run's numbers, and which of them deserve attention: the
judgements that ``gpuscale recommend`` and the dashboard share (the dashboard
only words them). Pure functions, no TensorFlow, no Textual."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import msgspec

from gpuscale.analysis.metrics import MIN_SAMPLES_FOR_UNCERTAINTY
from gpuscale.analysis.summary import RunSummary
from gpuscale.formatting import format_fraction_pct, format_points, plural

ENOUGH_STEPS = 20
"""Fewer counted steps (of one worker) than this and the medians are preliminary."""

NOISY_SPREAD = 0.5
"""A step-time spread ``(p90 - p10) / median`` above this is called noisy: the
middle 80 % of steps then differ by more than half a step."""

NOTABLE_COMM_SHARE = 0.2
"""An exposed all-reduce above this share of the whole step is worth a look: a
fifth of every step waits for the gradient exchange."""

CPU_LOGICAL_HEAD = (
    "CPU logical devices share this machine's cores, so a speedup from more of them "
    "comes from putting more of those cores to work{used}, never more than it has"
)
"""The first half of the caveat on CPU logical devices (:func:`cpu_logical_caveat`):
what they share, and so what a speedup measured on them is. (It said "so more of
them add no compute" beside a measured 1.73x from 1 to 2 devices, the one device
having kept about one of the two cores busy: they add no *cores*.)"""

CPU_LOGICAL_PREDICTED_SCOPE = "the predictions are for these logical devices, not for GPUs"
CPU_LOGICAL_MEASURED_SCOPE = "what is measured here is for these logical devices, not for GPUs"


def cpu_logical_caveat(predicted: bool, cores_used: Sequence[tuple[int, float]] = ()) -> str:
    """Said next to what runs on CPU logical devices measured (``predicted``: and
    predicted from them): they share the machine's cores, so a speedup is more of
    those cores put to work, and none of it is about GPUs. ``cores_used``: (device
    count, CPU use of its run in percent of one core) where the recordings said it
    (:attr:`~gpuscale.analysis.sweep.SweepPoint.proc_cpu_pct`): ``(1 device kept
    about 1.0 core busy, 2 devices about 1.9)``."""
    used = ""
    if cores_used:
        said = [(plural(n, "device"), f"{pct / 100:.1f}") for n, pct in sorted(cores_used)]
        first = (
            f"{said[0][0]} kept about {said[0][1]} core{'' if said[0][1] == '1.0' else 's'} busy"
        )
        used = f" ({', '.join([first, *(f'{who} about {cores}' for who, cores in said[1:])])})"
    scope = CPU_LOGICAL_PREDICTED_SCOPE if predicted else CPU_LOGICAL_MEASURED_SCOPE
    return f"{CPU_LOGICAL_HEAD.format(used=used)}: {scope}"


CPU_LOGICAL_CAVEAT = cpu_logical_caveat(True)
"""Said next to predictions made from runs on CPU logical devices (where no
recording said how many cores they kept busy)."""

CPU_LOGICAL_MEASURED_CAVEAT = cpu_logical_caveat(False)
"""Said instead of :data:`CPU_LOGICAL_CAVEAT` where nothing is predicted (one
measured count and nothing to predict from, or the machine's devices all measured)."""

LOCAL_WORKERS_CAVEAT = (
    "the workers all ran on one machine and share its cores, so a speedup from more of "
    "them comes from putting more of those cores to work, never more than it has: this "
    "shows the mechanism (the exchange between workers), not what separate machines "
    "would do"
)
"""Said next to predictions made from several workers on one machine's CPUs
(``--local-workers N``, :attr:`gpuscale.analysis.sweep.SweepPoint.local_cpu_workers`)."""

_SCOPES = {
    CPU_LOGICAL_PREDICTED_SCOPE: "the predictions are for these CPU logical devices, not for GPUs",
    CPU_LOGICAL_MEASURED_SCOPE: (
        "what is measured here is for these CPU logical devices, not for GPUs"
    ),
    LOCAL_WORKERS_CAVEAT.split(": ", 1)[1]: (
        "this shows the mechanism (the exchange between workers on one machine), not what "
        "separate machines would do"
    ),
}


def caveat_scope(note: str) -> str:
    """A platform caveat without its first half (the cores are shared): what
    recommend's confidence says where a reason of its Why already said that half,
    so that the two say it once; ``note`` itself where it is no such caveat. How
    many cores each count kept busy, which only the first half gives, stays:
    ``... not for GPUs (1 device kept about 1.3 cores busy, 2 devices about 1.0)``."""
    before, after = CPU_LOGICAL_HEAD.split("{used}")
    for half, scope in _SCOPES.items():
        if note.endswith(": " + half):
            head = note[: -len(": " + half)]
            if head.startswith(before) and head.endswith(after):
                used = head[len(before) : len(head) - len(after)]
                return scope + used  # "" or " (1 device kept about ...)"
            return scope
    return note


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


class LivePredictions(msgspec.Struct, kw_only=True):
    """Whether one run (in progress or over) can predict other device counts, and how."""

    level: Literal["wait", "guess", "step-times", "as-recorded", "calibrated"]
    """``wait``: no prediction (a run in progress: too little to fit what it rests
    on yet; a run that is over: no counted step); ``guess``: a run in progress whose
    predictions' ranges are no calibrated range; ``step-times``: predictions from the
    step times alone, no phase breakdown behind them (probes turned off; on a run
    that is over, also: no probe ran, or the probes' phases did not split the step);
    ``as-recorded``: a run that is over and lacked something (``reason`` says what):
    the predictions ``gpuscale recommend --from`` gives from its recording;
    ``calibrated``: the ranges as :func:`gpuscale.analysis.recommend.recommend`
    gives them. Only ``wait`` and ``guess`` change what
    :func:`gpuscale.analysis.recommend.recommend` predicts."""
    reason: str = ""
    """Why not ``calibrated``, in words (``wait``: what the predictions wait for)."""


STEP_TIMES_ALONE = "the predictions rest on the step times alone"


def live_predictions(summary: RunSummary, *, final: bool = False) -> LivePredictions:
    """The one rule for predictions from a single run (the dashboard's panel,
    :func:`gpuscale.analysis.recommend.recommend_from_run`). Its predictions rest on
    the median step time, the spread of the step times (noisy steps widen the range)
    and, on several devices, the exposed all-reduce's share of the step.

    While the run is in progress: before :data:`ENOUGH_STEPS` counted steps, and
    before the share is measured (3 probes whose phases split the step), there is
    nothing to fit: no prediction, never a 1.00x with a narrow "calibrated" range.
    A run whose probes are turned off (:attr:`RunSummary.probes_off`) waits for
    none: its predictions rest on the step times alone, and say so. While the share
    is known only to worse than its target (``share_target``: ``--precision`` or the
    probes' default) the predictions are a guess.

    ``final``: the run is over (finished, stopped, replayed; a summary whose run has
    ended is final either way). Nothing more will come, so there is one rule for it:
    what ``gpuscale recommend --from`` says of its recording (its step times, and
    the exposed all-reduce where the probes' phases split the step, however few
    probes); the reason says what it lacked. A run with enough of everything is
    ``calibrated`` either way."""
    final = final or summary.status != "running"
    if final:
        return _recorded(summary)
    if summary.steps_counted < ENOUGH_STEPS:
        return LivePredictions(
            level="wait",
            reason=f"predictions after {ENOUGH_STEPS} counted steps "
            f"({summary.steps_counted} so far)",
        )
    if summary.devices <= 1:
        return LivePredictions(level="calibrated")
    probes = summary.probes_run
    if summary.probes_off and not probes:
        return LivePredictions(level="step-times", reason=_probes_off_reason())
    if probes < MIN_SAMPLES_FOR_UNCERTAINTY or summary.comm_share_err is None:
        return LivePredictions(
            level="wait",
            reason=f"predictions after {MIN_SAMPLES_FOR_UNCERTAINTY} probes ({probes} so far)",
        )
    if not summary.phases_split_step:
        return LivePredictions(
            level="wait", reason="predictions once the probes' phases split the step (not yet)"
        )
    target = summary.share_target
    if target is not None and summary.comm_share_err > target:
        return LivePredictions(
            level="guess",
            reason=f"a guess, not a calibrated range: the exposed share is known to "
            f"\u00b1{100 * summary.comm_share_err:.1f} points so far "
            f"(target {format_points(target)}), so the range spans the predictions at "
            "either end",
        )
    return LivePredictions(level="calibrated")


def _probes_off_reason() -> str:
    return f"probes turned off: no phase breakdown; {STEP_TIMES_ALONE}"


def _recorded(summary: RunSummary) -> LivePredictions:
    """:func:`live_predictions` of a run that is over: what ``recommend --from``
    predicts from its recording (:func:`gpuscale.analysis.sweep.point_from_summary`
    keeps the phases only where they split the step), and what it lacked."""
    if summary.steps_counted == 0:
        return LivePredictions(level="wait", reason="no predictions: no counted steps")
    lacked = []
    if summary.steps_counted < ENOUGH_STEPS:
        lacked.append(
            f"only {plural(summary.steps_counted, 'counted step')} (fewer than {ENOUGH_STEPS})"
        )
    probes = summary.probes_run
    step_times = None
    if summary.devices > 1:
        if summary.probes_off and not probes:
            step_times = _probes_off_reason()
        elif not probes or summary.allreduce_s is None:
            step_times = f"no probe measured the exposed all-reduce; {STEP_TIMES_ALONE}"
        elif not summary.phases_split_step:
            step_times = f"the probes' phases did not split the step; {STEP_TIMES_ALONE}"
        elif probes < MIN_SAMPLES_FOR_UNCERTAINTY or summary.comm_share_err is None:
            lacked.append(
                f"the exposed all-reduce rests on {plural(probes, 'probe')}, too few "
                f"for its own range ({MIN_SAMPLES_FOR_UNCERTAINTY} give one)"
            )
        elif summary.share_target is not None and summary.comm_share_err > summary.share_target:
            lacked.append(
                f"the exposed share is known to \u00b1{100 * summary.comm_share_err:.1f} "
                f"points (target {format_points(summary.share_target)})"
            )
    if step_times is not None:
        return LivePredictions(level="step-times", reason="; ".join([*lacked, step_times]))
    if lacked:
        return LivePredictions(
            level="as-recorded",
            reason="; ".join(lacked) + ": the predictions `gpuscale recommend --from` "
            "gives from this recording",
        )
    return LivePredictions(level="calibrated")
