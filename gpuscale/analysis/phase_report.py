"""How a run's throughput, its phase breakdown, its probes and its precision are
said in words:
one wording for ``gpuscale run``'s final summary and the dashboard (``watch``,
``replay``, a sweep's run panels), so the two never tell the same run apart, and
for ``recommend``'s per-count precision (its text and ``--watch``'s panel).

Every function takes a :class:`~gpuscale.analysis.summary.RunSummary` (or, for a
sweep's count, a :class:`~gpuscale.analysis.sweep.SweepPoint`) and returns
plain text (no markup, no style): each view styles and lays it out its own way.
The numbers and what counts as resolved come from :mod:`gpuscale.analysis.summary`
and :mod:`gpuscale.analysis.metrics`; nothing here measures anything.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from gpuscale.analysis.confidence import comm_share_is_notable
from gpuscale.analysis.metrics import MIN_SAMPLES_FOR_UNCERTAINTY, resolved
from gpuscale.analysis.summary import APPLY_WITH_INPUT, PROBE_RESERVE, RunSummary, unsplit_within
from gpuscale.analysis.sweep import SweepPoint, phases_not_split
from gpuscale.formatting import (
    format_duration_s,
    format_fraction_pct,
    format_measured_ms,
    format_phase_in_step_s,
    format_phase_s,
    format_points,
    format_samples_s,
)

WALL_RATE_NOTABLE = 0.05
"""Where the rate over the wall clock the counted steps span
(:attr:`RunSummary.wall_throughput_samples_s`, what the run got) differs from the
rate at the median step (:attr:`RunSummary.throughput_samples_s`, the headline) by
more than this share of the latter, the headline is said to be at the median step
and the wall-clock rate is said beside it, with why: batches under the median
(:attr:`RunSummary.small_batches_share`), slow steps (a skewed step time,
:attr:`RunSummary.slow_steps_share`) and time between steps
(:attr:`RunSummary.between_steps_share`)."""
DURATION_FIGURES = 3
"""Significant figures of the median and the mean step where the wall-clock lines
set them side by side (:func:`throughput_text`, :func:`wall_clock_text`): a slow
steps' share of a few percent must not sit beside two equal-looking steps
(``0.500 ms`` and ``0.547 ms``, not ``0.5 ms`` twice)."""
SHARE_SHOWN = 0.005
"""A part of the wall clock (slow steps, between steps) is named from this share up
(below it would read ``0%``)."""


def wall_rate_notable(s: RunSummary) -> bool:
    """Whether the rate the run got over the wall clock differs from the rate at the
    median step by more than :data:`WALL_RATE_NOTABLE` (for whatever reason: slow
    steps, time between steps), so that the headline alone would misstate it."""
    head, wall = s.throughput_samples_s, s.wall_throughput_samples_s
    if not head or not wall:
        return False
    return abs(wall / head - 1.0) > WALL_RATE_NOTABLE


def throughput_text(s: RunSummary, *, step: bool = True) -> str:
    """The rate at the median step: ``8,041 samples/s``, or ``8,041 samples/s at the
    median step (7.0 ms)`` where :func:`wall_clock_text` says the rate over the wall
    clock beside it (``step`` False: ``8,041 samples/s at median``, the
    dashboard's, whose row before says ``step time 7.0 ms median``)."""
    rate = format_samples_s(s.throughput_samples_s)
    if not wall_rate_notable(s):
        return rate
    if not step:
        return f"{rate} at median"
    return f"{rate} at the median step ({format_duration_s(s.step_time_s, DURATION_FIGURES)})"


def wall_clock_text(s: RunSummary, *, causes: bool = True) -> str | None:
    """The rate the run got over the wall clock the counted steps span, where it
    differs from the rate at the median step (:func:`wall_rate_notable`), and the
    parts of that wall clock that make the difference, which add up:
    ``1,737 samples/s over the wall clock: slow steps (mean step 5.8 ms) 20% of it,
    between steps 1%`` (the rate at the median step x (1 - 20% - 1%) is the
    wall-clock rate). Steps with fewer samples than the median (a short last batch
    per epoch): ``smaller batches (mean 25 samples a step, median 32) 26% of it``.
    Time between steps says its causes where known: ``between steps 48% (compiling
    the probes 22%, the probes 0.5%, the rest e.g. epoch starts, evaluation,
    checkpoints)``. A mean step under the median: ``steps faster than the median
    (mean step 4.1 ms) gave back 6%``; a mean batch over it: ``larger batches (...) gave
    back 6%`` (parts that take away from the rest, so that all add up).
    The parts are named only where they reconcile the two rates within
    :data:`PARTS_RECONCILE` (a summary recorded before the batches' part, or
    several workers' rates far apart, may not): else the wall-clock rate alone.
    ``None`` where the rates agree. ``causes`` False (the dashboard's ``wall
    clock`` row): shorter, ``1,737 samples/s: slow steps (mean step 5.8 ms) 20%,
    between steps 1%``; ``run`` says the long form after the headline (``;
    1,737 samples/s over the wall clock: ...``)."""
    if not wall_rate_notable(s):
        return None
    rate = format_samples_s(s.wall_throughput_samples_s)
    parts = _wall_parts(s, causes) if _parts_reconcile(s) else []
    said = [
        f"{part}{' of it' if causes and i == 0 else ''}{why}" for i, (part, why) in enumerate(parts)
    ]
    if not causes:
        return f"{rate}: {', '.join(said)}" if said else rate
    return f"{rate} over the wall clock" + (f": {', '.join(said)}" if said else "")


PARTS_RECONCILE = 0.01
"""The parts of the wall clock :func:`wall_clock_text` names must leave the
wall-clock rate's share of the rate at the median step to within this (a point)."""


def _parts_reconcile(s: RunSummary) -> bool:
    """Whether the rate at the median step x (1 - the parts) is the wall-clock rate
    to within :data:`PARTS_RECONCILE` of the former, every part counted (named or
    too small to name)."""
    head, wall = s.throughput_samples_s, s.wall_throughput_samples_s
    if not head or not wall or s.slow_steps_share is None or s.between_steps_share is None:
        return False
    batches = s.small_batches_share or 0.0
    kept = 1.0 - batches - s.slow_steps_share - s.between_steps_share
    return abs(kept - wall / head) <= PARTS_RECONCILE


def _wall_parts(s: RunSummary, causes: bool) -> list[tuple[str, str]]:
    """The parts of the wall clock :func:`wall_clock_text` names, each from
    :data:`SHARE_SHOWN` up, as (the part, what follows its share): smaller (larger)
    batches, slow (faster) steps, between steps (with its causes where
    ``causes``)."""
    parts = []
    batches = s.small_batches_share or 0.0
    if abs(batches) >= SHARE_SHOWN:
        mean, median = s.mean_samples_per_step, _median_samples(s)
        said = (
            f" (mean {mean:,.0f} samples a step, median {median:,.0f})" if mean and median else ""
        )
        if batches > 0:
            parts.append((f"smaller batches{said} {format_fraction_pct(batches)}", ""))
        else:
            parts.append((f"larger batches{said} gave back {format_fraction_pct(-batches)}", ""))
    slow = s.slow_steps_share or 0.0
    if abs(slow) >= SHARE_SHOWN:
        mean = f"(mean step {format_duration_s(s.mean_step_time_s, DURATION_FIGURES)})"
        if slow > 0:
            parts.append((f"slow steps {mean} {format_fraction_pct(slow)}", ""))
        else:
            faster = f"steps faster than the median {mean} gave back {format_fraction_pct(-slow)}"
            parts.append((faster, ""))
    between = s.between_steps_share or 0.0
    if between >= SHARE_SHOWN:
        named = _between_parts(s) if causes else []
        why = f" ({_between_causes(s)})" if causes else ""
        # said to the decimal of its parts, never "between steps 2% (the probes 2.4%)"
        whole = _part_pct(between) if named else format_fraction_pct(between)
        parts.append((f"between steps {whole}", why))
    return parts


def _median_samples(s: RunSummary) -> float | None:
    """The median samples per step (the rate at the median step x the median step)."""
    if not s.throughput_samples_s or not s.step_time_s:
        return None
    return s.throughput_samples_s * s.step_time_s


def _between_causes(s: RunSummary) -> str:
    """What fell between the steps, where known: ``compiling the probes 22%, the
    probes 0.5%, the rest e.g. epoch starts, evaluation, checkpoints`` (a part that
    reads 0.0% is left out). The probes' part is their own passes alone
    (:attr:`RunSummary.probe_passes_wall_share`): the steps they slowed are inside
    those steps' times (slow steps), so no part is larger than the whole it is a
    part of; probes whose passes are not known apart (an older recording) are named
    among the examples. The rest is said in the words of what ran the steps
    (:func:`between_steps_examples`)."""
    why = between_steps_examples(s)
    if s.probes_run and s.probe_passes_wall_share is None:
        return f"e.g. the probes, {why}"
    parts = _between_parts(s)
    if parts:
        return f"{', '.join(parts)}, the rest e.g. {why}"
    return f"e.g. {why}"


def _between_parts(s: RunSummary) -> list[str]:
    """The known parts of the time between steps, each with its share of the wall
    clock (:func:`_part_pct`): ``compiling the probes 22%``, ``the probes 0.5%``;
    none where they are not known apart or too small to name."""
    if not s.probes_run or s.probe_passes_wall_share is None:
        return []
    parts = []
    if (s.probe_setup_wall_share or 0.0) >= PART_SHOWN:
        parts.append(f"compiling the probes {_part_pct(s.probe_setup_wall_share or 0.0)}")
    if (s.probe_passes_wall_share or 0.0) >= PART_SHOWN:
        parts.append(f"the probes {_part_pct(s.probe_passes_wall_share or 0.0)}")
    return parts


TRAINER_BETWEEN = "the loop's own work, a busy machine"
"""What falls between the built-in trainer's steps besides its probes (it has no
epochs, evaluation or checkpoints)."""

FIT_BETWEEN = "epoch starts, evaluation, checkpoints"
"""What falls between the steps of a script's Keras ``fit`` besides the probes."""

CUSTOM_LOOP_BETWEEN = "the loop's own work between steps, data loading outside the step"
"""What falls between the steps of a script's own training loop
(``ScalingMonitor.start``/``step``) besides the probes: it has no Keras epochs,
evaluation or checkpoints, but whatever the loop does around its timed step."""


def between_steps_examples(s: RunSummary) -> str:
    """What may fall between the steps besides the probes, in the words of what ran
    them: the built-in trainer (:data:`TRAINER_BETWEEN`), a script's own loop
    (:data:`CUSTOM_LOOP_BETWEEN`) or a script's Keras ``fit`` (:data:`FIT_BETWEEN`)."""
    if not is_script(s):
        return TRAINER_BETWEEN
    return CUSTOM_LOOP_BETWEEN if s.custom_loop else FIT_BETWEEN


PART_SHOWN = 0.0005
"""A known part of the time between steps is named from this share of the wall
clock up (below it would read ``0.0%``)."""


def _part_pct(share: float) -> str:
    """A part of the wall clock as said: ``22%``, ``0.5%`` (a decimal below 10%)."""
    return format_fraction_pct(share, 1 if share < 0.1 else 0)


INPUT_NOT_MEASURED = "not measured"
"""The input wait where no probe measured it (the Keras callback's cannot)."""

INPUT_IN_APPLY = f"not measured apart: in {APPLY_WITH_INPUT}"
"""The input wait there: ``fit`` waits for each batch within the step it times, so
the wait is in what is left of the step after compute and the exchange."""


def apply_label(s: RunSummary) -> str:
    """``apply``, or :data:`APPLY_WITH_INPUT` where the input wait is in it."""
    return APPLY_WITH_INPUT if s.input_in_apply else "apply"


def input_in_apply_note(s: RunSummary) -> str | None:
    """Where ``apply + input`` (:attr:`RunSummary.input_in_apply`) is resolved and
    larger than compute and the exposed all-reduce beyond their noise, what it
    holds and how to tell the input wait apart: ``apply + input is 78% of the median
    step: fit waits for each batch within the step ...``; ``None`` otherwise. What
    the callback cannot measure is said as such, never guessed: the same part holds
    the optimizer update and Keras's own per-step work."""
    if not s.input_in_apply or not s.phases_split_step or s.phase_contradiction is not None:
        return None
    step, apply = s.step_time_s or s.phase_full_step_s, s.apply_s
    if not step or apply is None or s.compute_s is None or not resolved(apply, s.apply_err_s):
        return None
    # beyond the noise of both (95 % half-widths added in quadrature; none below 3 probes)
    noise = math.hypot(s.apply_err_s or 0.0, s.compute_err_s or 0.0)
    if apply - noise <= max(s.compute_s, s.allreduce_s or 0.0):
        return None
    share = format_fraction_pct(min(apply / step, 1.0))
    return (
        f"{APPLY_WITH_INPUT} is {share} of the median step, more than compute: Keras's fit "
        "waits for each batch within the step, and the callback cannot tell that wait from "
        "the optimizer update and Keras's own per-step work; if it is the input pipeline "
        "(time the dataset alone, e.g. a loop over dataset.take(100)), more devices will "
        "not shorten it"
    )


PASSES_LONGER_NOTE = (
    "the probes' phases do not add up to the median step: the breakdown is not resolved"
)
"""Said when :attr:`RunSummary.phase_consistent` is ``False`` (:func:`parts_note`
says it with the numbers)."""


def parts_note(s: RunSummary) -> str | None:
    """Why the phases are not numbers that split the step
    (:attr:`RunSummary.unsplit_why`), with the numbers: where they do not add up to
    it, ``the probes' phases add up to 27.2 ms (compute 1.4, exposed all-reduce 25.4,
    apply < 0.1, input < 0.1 ms), not the median step 4.4 ms: the breakdown is not
    resolved (...)``; where they do within their noise but compute alone fills the
    step, ``the probes' phases add up to 9.2 ms (compute 6.4, exposed all-reduce 1.1,
    apply 1.7 ms) against the median step 6.1 ms (within their noise), and compute
    alone fills that step: the exposed all-reduce and apply are not resolved (...)``; ``None``
    where they split it (or nothing was probed). The one note every view says
    (``run``'s and ``replay``'s summaries, the dashboard's summary and its phase
    chart), so what one shows, the others show."""
    if s.phase_contradiction is not None:
        if s.probes_run == 1:  # nothing else to contradict: its own parts
            who = f"the probe contradicts itself, its parts do not add up: {s.phase_contradiction} "
            who += "(1 probe; a busy machine?)"
        else:
            who = f"the probes contradict each other: {s.phase_contradiction} "
            who += f"({plural(s.probes_run, 'probe')}; a busy machine?)"
        return f"{who}: the breakdown is not resolved and no figure is taken from it"
    fills = s.phase_consistent is not False and s.unsplit_why is not None
    if not fills and (s.phase_consistent is not False or s.phase_parts_s is None):
        return PASSES_LONGER_NOTE if s.phase_consistent is False else None
    if s.phase_parts_s is None:
        return None

    def part(value_s: float | None) -> str:  # never a bare 0.0 (a median at or below 0)
        shown = f"{(value_s or 0.0) * 1000:.1f}"
        return "< 0.1" if shown == "0.0" else shown

    ms = [
        f"compute {part(s.compute_s)}",
        f"exposed all-reduce {part(s.allreduce_s)}",
        f"{apply_label(s)} {part(s.apply_s)}",
        f"input {part(s.input_s)} ms",
    ]
    if s.input_s is None:  # not measured: no part of the sum
        ms[-2] += " ms"
        del ms[-1]
    if s.devices <= 1:
        del ms[1]
    parts = f"the probes' phases add up to {format_duration_s(s.phase_parts_s)} ({', '.join(ms)})"
    step = format_duration_s(s.step_time_s or s.phase_full_step_s)
    few = s.probes_run < MIN_SAMPLES_FOR_UNCERTAINTY
    if fills:  # they add up within their noise, but nothing is left of the step to split
        why = (
            "too few probes, or probes at unusual steps"
            if few
            else f"{plural(s.probes_run, 'probe')}; their compute passes ran as long as the "
            "usual steps or longer: a busy machine, or probes at unusual steps"
        )
        return (
            f"{parts} against the median step {step} (within their noise), and compute "
            f"alone fills that step: the exposed all-reduce and {apply_label(s)} are not "
            f"resolved ({why})"
        )
    if few:
        why = "too few probes, or probes at unusual steps"
    else:  # not for want of probes: their passes and the usual steps ran apart
        longer = "longer" if s.phase_parts_s > (s.step_time_s or 0.0) else "shorter"
        why = (
            f"{plural(s.probes_run, 'probe')} agree on it: their passes ran {longer} "
            "than the usual steps (a busy machine, or probes at unusual steps)"
        )
    return f"{parts}, not the median step {step}: the breakdown is not resolved ({why})"


class PhaseItem(NamedTuple):
    """One phase as said: its label, its value with how well it is known, and
    whether it is worth a warning colour (a notable exposed share)."""

    label: str
    value: str
    notable: bool = False


def plural(n: int, word: str) -> str:
    """``1 probe``, ``12 probes``, ``6,147 steps``: :func:`gpuscale.formatting.plural`
    with a thousands separator (the step counts here run into thousands)."""
    return f"{n:,} {word}{'s' if n != 1 else ''}"


def phases_heading(s: RunSummary) -> str:
    """What the phases are medians of and what they split: ``12 probes, 95% ranges;
    parts of the median step 100.0 ms`` (``too few for ranges`` below 3 phase
    breakdowns). Probes are counted once per probed step, as :func:`probes_text`
    counts them: the workers of a multi-worker run probe the same steps, and each
    worker's breakdown is one more sample for the ranges, not one more probe."""
    enough = s.phase_steps >= MIN_SAMPLES_FOR_UNCERTAINTY
    ranges = "95% ranges" if enough else "too few for ranges"
    return (
        f"{plural(s.probes_run, 'probe')}, {ranges}; parts of the median step "
        f"{format_duration_s(s.step_time_s or s.phase_full_step_s)}"
    )


def phase_items(s: RunSummary) -> list[PhaseItem]:
    """Compute, exposed all-reduce, apply and input wait, each with its 95 %
    half-width over the probes, ``< X ms (not resolved)`` where it is within its
    own noise (never a 0.0 that is noise), and no number at all where the phases do
    not add up to the median step (:attr:`RunSummary.phase_consistent`; then
    :func:`parts_note` says why). The exposed share is of the median step, the
    one every view says. A Keras ``fit`` timed by the callback calls apply
    ``apply + input`` and its input wait ``not measured apart: in apply + input``
    (:attr:`RunSummary.input_in_apply`)."""
    step, n = s.step_time_s or s.phase_full_step_s, s.probes_run
    apart = s.phase_consistent is False
    compute = format_phase_in_step_s(s.compute_s, s.compute_err_s, step, n, s.devices)
    whole = s.compute_fills_step  # nothing left of the step to split
    if apart or s.phase_contradiction is not None:
        # parts that do not add up to the step (or contradict) are no figure at all,
        # as parts_note says: "≈ the whole step" only where they add up within their
        # noise (a pass 20% over the step beside "not the median step" contradicted it)
        compute = "not resolved"
    notable = False
    if s.devices <= 1 and s.lone_exchange_s is not None:  # what the probes timed: noise
        exposed = (
            f"none (1 device: nothing to exchange; the probes' "
            f"{s.lone_exchange_s * 1000:.1f} ms is noise, not counted)"
        )
    elif s.devices <= 1:
        exposed = "none (1 device: nothing to exchange)"
    elif whole or apart:
        exposed = "not resolved"
    else:
        exposed = format_phase_s(s.allreduce_s, s.allreduce_err_s)
        if s.comm_share is not None and resolved(s.allreduce_s, s.allreduce_err_s):
            points = (
                f" \u00b1 {s.comm_share_err * 100:.1f} points"
                if s.comm_share_err is not None
                else ""
            )
            exposed += f" ({s.comm_share:.1%}{points} of the median step)"
            notable = comm_share_is_notable(s.comm_share)
    apply = (
        "not resolved"
        if apart or whole
        else format_phase_in_step_s(s.apply_s, s.apply_err_s, step, n)
    )
    input_wait = INPUT_NOT_MEASURED if s.input_s is None else format_measured_ms(s.input_s)
    if s.input_in_apply:  # fit's wait for the batch: inside the step, so in apply
        input_wait = INPUT_IN_APPLY
    if s.input_s is not None and s.input_share is not None:
        input_wait += f" ({format_fraction_pct(s.input_share)} of the median step)"
    return [
        PhaseItem("compute", compute),
        PhaseItem("exposed all-reduce", exposed, notable),
        PhaseItem(apply_label(s), apply),
        PhaseItem("input wait", input_wait),
    ]


def probes_text(s: RunSummary) -> str:
    """How many probes ran, what they cost against the wall clock and the budget
    they had, and whether the exposed share is known to the target precision:
    ``6, 1.3% of wall (0.9 s; budget 2%) plus 780.0 ms compiling them once; exposed
    share known to ±2 points (±1.1)`` (the compiling, once, is not the budget's).
    A recording from before probes were costed (schema 1.1) says the count alone."""
    probes = s.probes_run
    text = f"{probes:,}"
    pace = None
    if s.probe_every:
        pace = f"every {plural(s.probe_every, 'step')}"
    elif s.probe_budget is not None:
        pace = f"budget {_pct(s.probe_budget)}"
        if s.probe_budget > 0:
            aim = s.probe_budget * (1 - PROBE_RESERVE)
            pace += (
                f": {_pct(aim)} for the probes, {_pct(s.probe_budget - aim)} for the per-step cost"
            )
    if s.probe_cost_s is not None:
        took = f"{format_duration_s(s.probe_cost_s)} with the steps they slowed"
        if s.probe_wall_share is not None:
            text += f", {format_fraction_pct(s.probe_wall_share, 1)} of wall"
            pace = f"{took}; {pace}" if pace else took
        else:
            text += f", {took}"
    if pace:
        text += f" ({pace})"
    if s.probe_setup_s:  # one-time, not the budget's: said beside the recurring cost
        text += f" plus {format_duration_s(s.probe_setup_s)} compiling them once"
    over = (
        s.probe_budget is not None
        and s.probe_wall_share is not None
        and s.probe_wall_share > s.probe_budget
    )
    if over and probes == 1:  # the scheduler's one exception: said, not hidden
        text += ", over the budget: the first probe always runs"
    elif over:  # the scheduler checks each probe's expected cost against the run's length
        text += f", over the budget: {over_budget_why(s)}"
    known = share_known_text(s)
    return f"{text}; {known}" if known else text


def is_script(s: RunSummary) -> bool:
    """The run is a user's script (``gpuscale.keras.ScalingMonitor``): it has none of
    the trainer's options (``--steps``, ``--precision``, ``--probe-budget``), its own
    are ``ScalingMonitor(budget=..., every=...)``, and it lasts as long as its fit."""
    return s.source == "script"


def over_budget_why(s: RunSummary) -> str:
    """Why probes can cost more than their budget, in the options the run has: the
    probe scheduler checks each probe's expected cost against the run's length so far
    and pays probes taken early with the steps to come. The built-in trainer's: ``the
    probes cost more than their median so far (a busy machine), or the run was
    stopped before --steps after probing early (a --precision run waits until its
    steps pay for its probes)``; a script's (no --steps, no --precision): ``... or
    the run ended before its steps paid for the probes taken early (stopped by hand,
    or a short fit; the budget is ScalingMonitor(budget=...))``."""
    busy = "the probes cost more than their median so far (a busy machine)"
    if is_script(s):
        return (
            f"{busy}, or the run ended before its steps paid for the probes taken early "
            "(stopped by hand, or a short fit; the budget is ScalingMonitor(budget=...))"
        )
    return (
        f"{busy}, or the run was stopped before --steps after probing early (a "
        "--precision run waits until its steps pay for its probes)"
    )


def _pct(share: float) -> str:
    """A budget as said: ``2%``, ``1.5%``."""
    return format_fraction_pct(share, 1).replace(".0%", "%")


def precision_meaning(asked: float) -> str:
    """What ``--precision`` asks, in the units each number is said in: ``the median
    step time to ±3.0% of itself and the exposed share to ±3 points of the step
    (95% ranges)`` (the share is a part of the step, so its precision is in points)."""
    return (
        f"the median step time to \u00b1{format_fraction_pct(asked, 1)} of itself and the "
        f"exposed share to {format_points(asked)} points of the step (95% ranges)"
    )


def share_known_text(s: RunSummary) -> str | None:
    """Whether the exposed share is known to its target (``--precision``, else the
    scheduler's default): ``exposed share known to ±2 points (±1.1)``, ``exposed
    share not yet known to ±2 points (±3.4 so far)``; ``None`` on one device
    (nothing is exchanged) or without a probe. Probes that agree on a share whose
    phases do not split the step (:attr:`RunSummary.phases_split_step`) do not make
    it known: ``exposed share spread ±1.5 points across probes, but the phases do not
    add up to the step: not resolved``."""
    if s.devices <= 1 or not s.phase_steps or s.share_target is None:
        return None
    target = f"{format_points(s.share_target)} points"
    err = s.comm_share_err
    if unsplit_within(s, s.share_target):
        return share_spread_text(s)
    if err is not None and err <= s.share_target:
        return f"exposed share known to {target} ({format_points(err)})"
    text = f"exposed share not yet known to {target} " + (
        "(fewer than 3 probes)" if err is None else f"({format_points(err)} so far)"
    )
    if s.share_more_steps and s.status != "running":
        steps = s.steps_total + s.share_more_steps
        # below 3 probes the noise is unknown: 3 probes' steps are a lower bound
        about = "at least" if err is None else "about"
        script = is_script(s)  # its options are ScalingMonitor's
        if s.probe_every:  # --phase-every: no budget applies, the period does
            pace = f"at a probe every {plural(s.probe_every, 'step')}"
            helps = "a longer run, or a shorter " + (
                "ScalingMonitor(every=...)" if script else "--phase-every"
            )
        else:
            pace = "at this probe budget"
            helps = "a longer run, or a larger " + (
                "ScalingMonitor(budget=...)" if script else "probe budget"
            )
        text += f": {about} {steps:,} steps {pace} to tell it ({helps})"
    return text


def share_spread_text(s: RunSummary) -> str:
    """Why probes whose share's spread is within its target leave it not resolved
    (:func:`~gpuscale.analysis.summary.unsplit_within`): ``exposed share spread ±1.5
    points across probes, but the phases do not add up to the step: not resolved``
    (:attr:`RunSummary.unsplit_why`)."""
    return (
        f"exposed share spread {format_points(s.comm_share_err or 0.0)} points across "
        f"probes, but {s.unsplit_why}: not resolved"
    )


def precision_text(s: RunSummary) -> tuple[str, bool] | None:
    """With ``--precision``: ``precision: ±3.0% asked (step time ±3.0%, exposed share
    ±3 points), reached (±2.1%)``, or how far it got and about how many more steps
    would likely reach it; and whether it was reached. Where the probes' phases do
    not split the step but their share's spread is within the precision
    (:func:`~gpuscale.analysis.summary.unsplit_within`), not reached, in the words
    the probes line says it in (:func:`share_spread_text`): ``..., not reached by the
    end: exposed share spread ±1.5 points across probes, but the phases do not add up
    to the step: not resolved`` (the probe scheduler's ``--precision`` stop rule does
    not stop on such a breakdown). ``None``: not asked."""
    if s.precision_asked is None:
        return None
    several = s.devices > 1  # two numbers in two units: each said in its own
    when = "yet" if s.status == "running" else "by the end"
    asked = s.precision_asked
    target = f"\u00b1{format_fraction_pct(asked, 1)} asked"
    if several:
        target += (
            f" (step time \u00b1{format_fraction_pct(asked, 1)}, "
            f"exposed share {format_points(asked)} points)"
        )
    if unsplit_within(s, asked):  # the share's spread is no precision then
        # what the probes line says too (share_known_text), and why --precision went on
        return f"precision: {target}, not reached {when}: {share_spread_text(s)}", False
    got, need, reached = precision_words(
        s.precision_asked,
        s.precision_reached,
        s.precision_more_steps,
        when=when,
        unknown=unknown_why(s.step_time_rel_err, s.comm_share_err, s.probes_run, s.devices),
        say_reached=not several,
    )
    if several:
        if s.precision_reached is not None and s.step_time_rel_err is not None:
            share = s.comm_share_err if s.comm_share_err is not None else 0.0
            got += (
                f" (step time \u00b1{format_fraction_pct(s.step_time_rel_err, 1)}, "
                f"exposed share \u00b1{share * 100:.1f} points)"
            )
    return f"precision: {target}, {got}" + (f"; {need}" if need else ""), reached


def unknown_why(
    step_err: float | None, share_err: float | None, probes: int | None, devices: int
) -> str:
    """Why a precision is not known yet: ``fewer than 3 probes`` (or steps, or both)."""
    few_steps = step_err is None
    few_probes = devices > 1 and share_err is None
    if few_steps and few_probes:
        return "not yet known (fewer than 3 steps and 3 probes)"
    if few_probes:
        return f"not yet known (fewer than 3 probes: {probes or 0} so far)"
    if few_steps:
        return "not yet known (fewer than 3 steps)"
    return "not yet known (fewer than 3 steps or probes)"


def precision_words(
    asked: float,
    reached: float | None,
    more: int | None,
    *,
    when: str = "by the end",
    unknown: str = "not yet known (fewer than 3 steps or probes)",
    say_reached: bool = True,
) -> tuple[str, str | None, bool]:
    """Whether ``± asked`` was reached (the worse of the step time's and the exposed
    share's half-widths, ``reached``; ``more``: counted steps still likely needed,
    0 when reached): ``("reached (±2.1%)", None, True)``, or ``("not reached
    {when}: reached only ±5.1%", "about 1,890 more steps would likely reach it",
    False)``. ``unknown``: what to say where nothing is known yet (which of steps
    and probes are too few); ``say_reached`` False: leave the figure reached out
    (the caller says each half-width itself). ``run``, the dashboard and
    ``recommend`` say it in these words."""
    if reached is not None and more == 0:
        if not say_reached:
            return "reached", None, True
        return f"reached (\u00b1{format_fraction_pct(reached, 1)})", None, True
    got = (
        (f"reached only \u00b1{format_fraction_pct(reached, 1)}" if say_reached else "")
        if reached is not None
        else unknown
    )
    if more is None:
        need = "no probe ran to estimate the steps needed"
    elif reached is None:
        need = f"at least {more:,} more steps would be needed"
    else:
        need = f"about {more:,} more steps would likely reach it"
    head = f"not reached {when}"
    return (f"{head}: {got}" if got else head), need, False


UNSPLIT_WORDS = "the phases do not split the step"
"""Why a sweep's count did not reach ``--precision`` where its phases did not split
the step (:func:`~gpuscale.analysis.sweep.phases_not_split`): a count keeps no phase
then, nor which of its summary's reasons it was (:attr:`RunSummary.unsplit_why`)."""


def count_precision_text(r: SweepPoint, *, several: bool = False, with_asked: bool = False) -> str:
    """One measured count of a sweep run with ``--precision`` (``r.precision_asked``
    set): ``2 devices, 150 steps: not reached within --steps: reached only ±5.1%;
    step time ±1.2%, exposed share ±5.1 points (4 probes); about 280 more steps
    would likely reach it``; a count whose phases did not split the step:
    ``not reached within --steps: the phases do not split the step: not resolved``.
    ``several``: name the configuration; ``with_asked``: say the precision asked
    (when the counts asked differently)."""
    label = plural(r.devices, "device")
    if several:
        label += f" ({r.config})"
    if r.steps:
        label += f", {r.steps:,} steps"
    if with_asked:
        label += f", \u00b1{format_fraction_pct(r.precision_asked, 1)} asked"
    unsplit = phases_not_split(r)
    got, need, _ = precision_words(
        r.precision_asked,
        r.precision_reached,
        r.precision_more_steps,
        when="within --steps",
        unknown=unknown_why(r.step_time_err, r.comm_share_err, r.probes, r.devices),
        say_reached=False,  # each half-width is said next
    )
    step = (
        f"step time \u00b1{format_fraction_pct(r.step_time_err, 1)}"
        if r.step_time_err is not None
        else "step time: too few steps for a range"
    )
    probes = plural(r.probes or 0, "probe")
    if unsplit and r.precision_more_steps is None:  # its summary: the spread no precision
        got, need = f"not reached within --steps: {UNSPLIT_WORDS}: not resolved", None
    if r.devices <= 1:
        share = "nothing exchanged"
    elif unsplit:
        share = f"exposed share from {probes}, not resolved"
    elif r.comm_share_err is not None:
        share = f"exposed share \u00b1{r.comm_share_err * 100:.1f} points ({probes})"
    else:
        share = f"exposed share from {probes}, too few for a range"
    return f"{label}: {got}; {step}, {share}" + (f"; {need}" if need else "")
