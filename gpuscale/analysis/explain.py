"""Explain: the reasons, advice and confidence statements of a
:class:`~gpuscale.analysis.decide.Recommendation` (the last step of fit ->
predict -> decide -> explain). Every number it quotes comes from the decision's
rows and models; it computes nothing the table does not show."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence

import msgspec

from gpuscale.analysis import metrics
from gpuscale.analysis.confidence import ENOUGH_STEPS, NOISY_SPREAD, caveat_scope
from gpuscale.analysis.decide import (
    LOCAL_WORKERS_NEXT,
    SHARED_CORES_NEXT,
    Group,
    Recommendation,
    WalkStep,
    dev,
    own_speedup,
    passes_floor,
    row_at,
    shared_cores_next,
    speedup_text,
)
from gpuscale.analysis.model import (
    IMPLAUSIBLE_PEAK,
    ScalingModel,
    compute_scale_for,
    threshold_compute_scale,
)
from gpuscale.analysis.placement import placement_sentence
from gpuscale.analysis.predict import (
    BET_RISK,
    borrowed,
    measured_noise,
    measured_superlinear,
    uncovered,
)
from gpuscale.analysis.summary import APPLY_WITH_INPUT
from gpuscale.analysis.sweep import SweepPoint, exposed_unresolved, phases_unresolved
from gpuscale.formatting import (
    format_bytes,
    format_duration_s,
    format_fraction_pct,
    format_pct_against_floor,
    format_rate_bytes_s,
    format_share_halfwidth,
    format_with_range,
    plural,
)

WALK_SHOWN = 4
"""Steps of the walk told at each end when it is long (the rest are all accepted)."""

ALL_BUT_EXCHANGE = "compute, apply and input"
"""What a model's ``compute`` is (the step less the exposed exchange, fitted from
step times or phases), always said with "all but the exchange": ``run``'s "compute"
is the probes' forward and backward pass alone, a part of it."""

EDGE_SCALE = 1.10
"""A batch that would have to grow by less than this (10 %) to pass the floor is
not advice: the step is at the floor's edge, where the noise of one more
measurement decides as much as the batch (said as such instead)."""


def explain(
    rec: Recommendation,
    groups: Sequence[Group],
    by_name: dict[str, Group],
    walk: Sequence[WalkStep],
) -> None:
    floor = rec.floor
    several = len(groups) > 1
    what = f"{dev(rec.devices)}" + (f" with '{rec.config}'" if several else "")
    pred = " (predicted, not measured)" if rec.predicted else ""
    chosen_row = row_at(by_name[rec.config], rec.devices)
    if rec.verdict == "none":
        rec.reasons.append(
            # what to measure next is said once, under the verdict (rec.measure_next)
            f"Measured at {dev(rec.devices)} only: {rec.throughput:,.0f} samples/s; "
            "no recommendation yet."
        )
    elif rec.predicted and chosen_row is not None and chosen_row.throughput_low is not None:
        rec.reasons.append(
            f"{what}{pred}: "
            f"{format_with_range(rec.throughput, chosen_row.throughput_low, chosen_row.throughput_high, ',.0f')} "
            f"samples/s ({format_fraction_pct(rec.coverage or 0)} range), {speedup_text(rec)} "
            f"over {rec.baseline} (efficiency {format_fraction_pct(rec.efficiency or 0)}){_own(rec)}."
        )
    elif rec.speedup is not None and rec.devices > 1:
        rec.reasons.append(
            f"{what}{pred}: {rec.throughput:,.0f} samples/s, {rec.speedup:.2f}x over {rec.baseline} "
            f"(efficiency {format_fraction_pct(rec.efficiency or 0)}){_own(rec)}."
        )
    else:
        rec.reasons.append(f"{what}{pred}: {rec.throughput:,.0f} samples/s.")
    raised = ", the least that gains" if rec.floor_raised else ""
    shown = list(walk)
    if len(walk) > 2 * WALK_SHOWN:
        # a sweep of thousands of counts: the first steps and the ones that decide
        shown = walk[:WALK_SHOWN] + walk[-WALK_SHOWN:]
    for i, step in enumerate(shown):
        if len(shown) < len(walk) and i == WALK_SHOWN:
            rec.reasons.append(
                f"... {len(walk) - len(shown)} more steps, all worth it (the walk in --json has them) ..."
            )
        label = f" ('{step.config_to}')" if several else ""
        start = f"{step.devices_from}"
        if several and step.config_from != step.config_to:  # from another configuration's row
            start += f" ('{step.config_from}')"
        tag = " [predicted]" if step.predicted else ""
        verdict = "worth it" if step.accepted else "not worth it"
        low = ""
        if step.marginal_efficiency_low is not None:
            low = (
                f", {_against(step.marginal_efficiency_low, floor)} at its bet bound "
                f"(what {format_fraction_pct(1 - BET_RISK)} of such predictions reached)"
            )
        if step.uncalibrated:
            low = f", its range a guess{_why_guessed(by_name[step.config_to])}"
        if step.own_stop is not None:
            verdict = f"not a safe bet: '{step.config_to}' on its own stops at {dev(step.own_stop)}"
            if step.uncertain:
                verdict += "; " + (rec.measure_next or f"measure {step.own_next} next")
        elif step.uncertain:
            verdict = "not a safe bet: " + (rec.measure_next or f"measure {step.devices_to} next")
        rec.reasons.append(
            f"{start} -> {step.devices_to}{label}{tag}: {step.throughput_gain:.2f}x the "
            f"samples/s, marginal efficiency {_against(step.marginal_efficiency, floor)}{low} "
            f"(floor {format_fraction_pct(floor)}{raised}): {verdict}."
        )
    _comm_reason(rec, by_name, walk)
    for g in groups:
        if rec.verdict != "none":
            _one_count_outlook(rec, g)
    if several:
        alone = "; ".join(
            # one measured count has nothing to compare with: as when it is alone
            f"'{c.config}' -> NONE yet (measured at {dev(c.measured_devices[0])} only)"
            if len(c.measured_devices) == 1
            else f"'{c.config}' -> {dev(c.devices)}"
            + (
                f" ({c.speedup:.2f}x its own smallest count)"
                if c.devices != min(c.measured_devices)
                else ""
            )
            + (" [predicted]" if c.predicted else "")
            for c in rec.configs
        )
        rec.reasons.append(f"Each configuration on its own: {alone}.")
        _compare_configs(rec, groups)
    _advice(rec, groups, by_name, walk)
    _confidence(rec, groups, walk)


def _one_count_outlook(rec: Recommendation, g: Group) -> None:
    """With one measured count, say what the model would expect from doubling it
    (shown, not used for the verdict)."""
    if len(g.measured) != 1 or not g.model.predicts:
        return
    (n,) = g.measured
    nxt = [r for r in g.rows if r.predicted and r.devices > n]
    if not nxt:
        return
    r = min(nxt, key=lambda row: row.devices)
    eff = metrics.marginal_efficiency(g.measured[n], n, r.throughput or 0.0, r.devices)
    basis = {
        "link peak": "the link at its peak (optimistic)",
        "phases": "the exposed exchange measured at this count",
        "step times": "the step times",
    }.get(g.model.basis, g.model.basis)
    expects = (
        f"Only {dev(n)} measured for '{g.config}': the model, from {basis}, expects "
        f"{n} -> {r.devices} to reach a marginal efficiency of {format_fraction_pct(eff)}"
    )
    if g.model.shared_cores:  # measuring N there would not answer it (nor can run give N)
        rec.reasons.append(f"{expects}; {shared_cores_next(g.model)}.")
        return
    rec.reasons.append(
        f"{expects}; measure {dev(r.devices)} to know (a prediction from one count does not "
        "decide)."
    )


def _deciding_step(walk: Sequence[WalkStep]) -> WalkStep | None:
    """The first rejected step, else the last accepted one."""
    for step in walk:
        if not step.accepted:
            return step
    return walk[-1] if walk else None


def _comm_reason(rec: Recommendation, by_name: dict[str, Group], walk: Sequence[WalkStep]) -> None:
    step = _deciding_step(walk)
    if step is None or step.own_stop is not None:
        # beyond where its configuration's own walk stops: the step's line says why
        return
    g = by_name[step.config_to]
    m = g.model
    if m.shared_cores and m.predicts and not step.accepted:
        rec.reasons.append(_shared_cores_reason(m))
        return
    if not m.predicts or m.beta_s == 0 and m.alpha_s == 0:
        return
    n1, n2 = step.devices_from, step.devices_to
    row = row_at(g, n2)
    # a measured count: the table's row (its runs combined, their probes pooled)
    measured = row is not None and not row.predicted and row.allreduce_s is not None
    if not measured and any(p.workers > 1 for p in g.points):
        return  # one ring over all devices misreads machines; explain_multi_worker says it
    if measured and row is not None and exposed_unresolved(row):
        # noise, not an exchange: say so, as the table does, never a 0 %
        err, step_t = row.allreduce_err_s, row.step_time_s or 0.0
        under = (
            f"under {format_fraction_pct(metrics.share((row.allreduce_s or 0) + err, step_t))} "
            "of each step, "
            if err is not None and step_t
            else ""
        )
        rec.reasons.append(
            f"The exposed gradient exchange at {dev(n2)} is within its probes' noise "
            f"({under}{plural(row.probes or 0, 'probe')}): not resolved; measure longer to "
            "know it."
        )
        return
    split = _table_split(g, n2)
    if split is None:  # the table says "not resolved" there: so does the text
        rec.reasons.append(
            "The exposed gradient exchange is not resolved at any measured count (within "
            "its probes' noise, or the phases did not split the step): the model has none "
            f"to go on, so what it takes at {dev(n2)} is not known, as the table says; "
            "measure longer to know it."
        )
        return
    comm, step_t = split
    how = f"estimated by the model from {m.basis}"
    if measured and row is not None:
        how = "measured"
        if row.probes and row.allreduce_err_s is not None and row.step_time_s:
            # the share's half-width in points of the step, as the table prints it
            points = format_share_halfwidth(row.allreduce_err_s, row.step_time_s)
            how = f"measured (±{points} points, {plural(row.probes, 'probe')})"
    if comm <= 0:
        return
    detail = ""
    if m.payload_bytes and measured:
        # the footnote's measure (busbw) of the exposed exchange the table gives here
        rate = metrics.busbw_bytes_s(metrics.algbw_bytes_s(m.payload_bytes, comm), n2, m.exchange)
        detail = (
            f" ({format_bytes(m.payload_bytes)} per step; exposed exchange ≈ "
            f"{format_rate_bytes_s(rate, significant=3)} effective, busbw"
        )
        peaks = [
            p.interconnect_bytes_s for p in g.points if p.devices == n2 and p.interconnect_bytes_s
        ]
        # the table's row (runs combined), as the footnote under the table gives it
        alone = alone_busbw_bytes_s([r for r in g.rows if r.devices == n2], m.exchange)
        if peaks and n2 > 1 and alone:
            # the link's peak is compared with the all-reduce timed alone, never with a
            # rate from the exposed part (overlap hides the rest: it would read high)
            detail += (
                f"; the all-reduce alone ran at a busbw of "
                f"{format_rate_bytes_s(alone, significant=3)} against a link peak of "
                f"{format_rate_bytes_s(min(peaks))}"
            )
        detail += ")"
    elif m.payload_bytes and (rate_text := exposed_rate_text(m, g.rows)):
        # the figure and the words of the footnote under the table (bandwidth_text)
        busbw = "" if m.basis == "link peak" else ", busbw"
        detail = f" ({format_bytes(m.payload_bytes)} per step; {rate_text}{busbw})"
    compute = max(step_t - comm, 0.0)
    ratio = compute / comm
    k = threshold_compute_scale(m, n1, n2, rec.floor)
    # below the ratio that passes: both with the decimals that print them apart
    shown, needed = _apart(ratio, ratio * k) if k is not None and k > 1.0 else (f"{ratio:.1f}", "")
    text = (
        f"Gradient exchange takes {_of_step(comm, step_t)} of each step at "
        f"{dev(n2)}{detail}, {how}; compute:communication is {shown}"
    )
    model_passes = k is not None and k <= 1.0
    floor = format_fraction_pct(rec.floor)
    if step.uncertain and step.uncalibrated:
        text += f"; whether {n1} -> {n2} pays is not known: {_why_no_bet(g, row)}"
    elif step.uncertain:
        text += (
            f"; whether {n1} -> {n2} pays is not known: more than 1 in "
            f"{round(1 / BET_RISK)} such predictions of published tables came out below "
            "the throughput it needs"
        )
    elif not step.predicted and step.accepted != model_passes:
        # the decision rests on the measured points; the model's fit across every
        # count may put this one step on the other side of the floor: say which decided
        text += (
            f"; measured, {n1} -> {n2} passes the {floor} floor (the model's fit, "
            "across all counts, puts it below)"
            if step.accepted
            else f"; measured, {n1} -> {n2} stays below the {floor} floor (the model's "
            "fit, across all counts, would let it pass)"
        )
    elif k is None:
        text += f", and no batch size makes {n1} -> {n2} reach {format_fraction_pct(rec.floor)} per the model"
    elif k > 1.0 and shown == needed:  # apart by less than 4 decimals show
        text += (
            f", at the {needed} at which {n1} -> {n2} reaches "
            f"{format_fraction_pct(rec.floor)} marginal efficiency (model: a hair below it)"
        )
    elif k > 1.0:
        edge = "just " if k < EDGE_SCALE else ""
        text += (
            f", {edge}below the {needed} at which {n1} -> {n2} reaches "
            f"{format_fraction_pct(rec.floor)} marginal efficiency (model)"
        )
    elif k * ratio < 0.05:  # shown as 0.0: the exchange alone does not stop this step
        text += f"; {n1} -> {n2} pays at any compute:communication ratio (model)"
    else:
        text += f", above the {ratio * k:.1f} needed for {n1} -> {n2} to pay (model)"
    rec.reasons.append(text + ".")


def alone_busbw_bytes_s(points: Sequence[SweepPoint], exchange: str) -> float | None:
    """The busbw of the all-reduce timed alone (``allreduce_total_s``) at the largest
    of the measured multi-device ``points`` that timed it, as the run's summary and
    the dashboard give it (``RunSummary.busbw_total_bytes_s``); ``None`` without one."""
    timed = [p for p in points if p.allreduce_total_s and p.payload_bytes and p.devices > 1]
    if not timed:
        return None
    top = max(p.devices for p in timed)
    alone = metrics.median([p.allreduce_total_s or 0.0 for p in timed if p.devices == top])
    payload = metrics.median([p.payload_bytes or 0 for p in timed if p.devices == top])
    return metrics.busbw_bytes_s(metrics.algbw_bytes_s(payload, alone), top, exchange)


def _exposed_busbw(model: ScalingModel, points: Sequence[SweepPoint]) -> tuple[float, int] | None:
    """``(busbw, devices)``: what the step effectively pays per byte for the model's
    fitted *exposed* exchange at the largest measured multi-device count of
    ``points``, in the summary's convention (:data:`gpuscale.analysis.metrics.LINK_VOLUME_WORDS`); ``None`` where
    the payload is not known, nothing is exchanged, or the exposed share is not
    resolved (:func:`~gpuscale.analysis.sweep.phases_unresolved`: the table says
    "not resolved", so no rate is read from it)."""
    if not model.payload_bytes or not model.bandwidth_bytes_s or phases_unresolved(points):
        return None
    multi = [p.devices for p in points if not p.predicted and p.devices > 1]
    top = max(multi, default=0)
    comm = model.comm_time_s(top) if top else 0.0
    if comm <= 0:
        return None
    algbw = metrics.algbw_bytes_s(model.payload_bytes, comm)
    return metrics.busbw_bytes_s(algbw, top, model.exchange), top


def exposed_rate_text(model: ScalingModel, points: Sequence[SweepPoint]) -> str | None:
    """The model's bandwidth in a few words, the same in the footnote under the
    table (:func:`bandwidth_text`) and in the Why: ``the link assumed at its peak,
    X``, or ``exposed exchange ≈ X effective at N devices`` (:func:`_exposed_busbw`:
    a busbw, never called a link's); ``None`` where there is none to give."""
    if not model.payload_bytes or not model.bandwidth_bytes_s:
        return None
    if model.basis == "link peak":
        return f"the link assumed at its peak, {format_rate_bytes_s(model.bandwidth_bytes_s)}"
    exposed = _exposed_busbw(model, points)
    if exposed is None:
        return None
    paid, top = exposed
    return f"exposed exchange ≈ {format_rate_bytes_s(paid, significant=3)} effective at {dev(top)}"


def bandwidth_text(model: ScalingModel, points: Sequence[SweepPoint]) -> str | None:
    """What the model's bandwidth is, in words (:func:`exposed_rate_text`), beside
    the all-reduce timed alone where it was (``points``: the configuration's table
    rows). A model fitted from phases or step times knows the *exposed* exchange: the
    busbw it gives is what the step effectively pays per byte (at the largest
    measured multi-device count, in the summary's convention, :data:`gpuscale.analysis.metrics.LINK_VOLUME_WORDS`),
    not the link's speed, and differs from the all-reduce alone by the overlap with
    the backward pass (or by replicas waiting for each other). ``None`` where the
    payload is not known, or where the exposed share is not resolved (the table says
    so: no rate is read from noise)."""
    text = exposed_rate_text(model, points)
    exposed = _exposed_busbw(model, points)
    if text is None or exposed is None or model.basis == "link peak":
        return text
    paid, top = exposed
    factor = metrics.LINK_VOLUME_WORDS.get(model.exchange, "v(N)")
    text += f" (busbw, payload x {factor} over the fitted exposed time)"
    alone = alone_busbw_bytes_s(
        [p for p in points if not p.predicted and p.devices == top], model.exchange
    )
    if alone:
        why = (
            "overlap with the backward pass hides part of the exchange"
            if paid > alone
            else "the step waits longer than the exchange alone takes (replicas waiting "
            "for each other, launch overhead)"
        )
        text += (
            f"; the all-reduce alone measured {format_rate_bytes_s(alone, significant=3)}: {why}"
        )
    return text


def _table_split(g: Group, devices: int) -> tuple[float, float] | None:
    """``(exchange, step)`` at ``devices`` as the table shows them: the row's step
    time and its exposed share of it (a prediction's class prior and anchor are in
    both), so the text quotes the table's figure; the model's own where the table
    has no share there; ``None`` where the table says "not resolved" (every measured
    share within its probes' noise, :func:`~gpuscale.analysis.sweep.phases_unresolved`):
    no figure where the table has none."""
    r = row_at(g, devices)
    if r is not None and r.comm_share is not None and r.step_time_s:
        return r.comm_share * r.step_time_s, r.step_time_s
    if phases_unresolved(g.rows):
        return None
    return g.model.comm_time_s(devices), g.model.step_time_s(devices)


DEVICES_SHARE_CORES = "The devices are CPU logical devices sharing the same cores"
WORKERS_SHARE_CORES = "The workers all ran on one machine's CPUs, sharing its cores"

CORES_SHARED_SAID = (
    DEVICES_SHARE_CORES,
    WORKERS_SHARE_CORES,
    SHARED_CORES_NEXT,
    LOCAL_WORKERS_NEXT,
)
"""Words of a reason that says the devices share one machine's cores, so that more
of them cannot pay: the platform caveat's first half, which the confidence then
leaves out (:func:`~gpuscale.analysis.confidence.caveat_scope`)."""


def _shared_cores_reason(m: ScalingModel) -> str:
    """Why devices that share one machine's cores do not pay (the model's
    ``shared_cores`` compute, :mod:`gpuscale.analysis.model`)."""
    fitted = [n for n in m.fitted_devices if n > 1] or m.fitted_devices
    at = f"fitted at {', '.join(map(str, fitted))} devices"
    since = f"from {fitted[0]} devices on, " if fitted[0] > 1 else ""
    if m.scaling == "weak":
        how = (
            f"{since}N devices' batches take N times as long (weak scaling: about "
            f"{format_duration_s(m.compute_time_s(1))} per device per step for {ALL_BUT_EXCHANGE}, all but the exchange; {at})"
        )
    else:
        how = (
            f"{since}the same global batch takes as long whatever N (strong scaling: about "
            f"{format_duration_s(m.compute_time_s(1))} per step for {ALL_BUT_EXCHANGE}, all but the exchange; {at})"
        )
    who = WORKERS_SHARE_CORES if m.local_workers else DEVICES_SHARE_CORES
    return (
        f"{who}: {how}, so neither the exchange nor a bigger batch makes more of them "
        "pay on this machine."
    )


def _compare_configs(rec: Recommendation, groups: Sequence[Group]) -> None:
    counts = sorted({n for g in groups for n in g.measured})
    shown = []
    for n in counts:
        here = [(g.measured[n], g.config) for g in groups if n in g.measured]
        if len(here) < 2:
            continue
        shown.append(n)
    # The smallest and largest count measured by several configurations, and the chosen one.
    pick = sorted({shown[0], shown[-1]} | ({rec.devices} & set(shown))) if shown else []
    for n in pick:
        here = sorted(((g.measured[n], g.config) for g in groups if n in g.measured), reverse=True)
        best_x, best = here[0]
        others = ", ".join(
            f"'{c}' {x:,.0f} ({format_fraction_pct(x / best_x - 1)})" for x, c in here[1:]
        )
        rec.reasons.append(f"At {dev(n)}: '{best}' {best_x:,.0f} samples/s; {others}.")


def _kind_label(exchange: str) -> str:
    return {
        "ring": "an all-reduce between the devices (NCCL)",
        "gather": "gathering gradients on one device",
        "host": "variables on the CPU",
    }[exchange]


def _advice(
    rec: Recommendation,
    groups: Sequence[Group],
    by_name: dict[str, Group],
    walk: Sequence[WalkStep],
) -> None:
    floor = rec.floor
    chosen = by_name[rec.config]
    # 1. A bigger batch, when the exchange is what stops the walk.
    rejected = next((s for s in walk if not s.accepted), None)
    if rejected is not None:
        g = by_name[rejected.config_to]
        m = g.model
        if m.predicts and (m.beta_s > 0 or m.alpha_s > 0):
            k = compute_scale_for(m, rejected.devices_from, rejected.devices_to, floor)
            if k is not None and 1.0 < k < EDGE_SCALE:
                n1, n2 = rejected.devices_from, rejected.devices_to
                rec.advice.append(
                    f"{n1} -> {n2} devices is just below the {format_fraction_pct(floor)} floor "
                    f"({_against(rejected.marginal_efficiency, floor)}): a batch only slightly "
                    f"larger ({format_fraction_pct(k - 1, 1)} more compute per step, per the "
                    "model) or the noise of one more measurement would pass it; no batch change "
                    f"is worth making for that alone: measure {n1} and {n2} again if {dev(n2)} matter."
                )
            elif k is not None and k > 1.0:
                if g.scaling == "weak":
                    size = f"per-replica batch from {m.per_replica_batch} to about {math.ceil(k * m.per_replica_batch)}"
                else:
                    size = f"global batch from {m.global_batch} to about {math.ceil(k * m.global_batch)}"
                rec.advice.append(
                    f"Raise the {size} ({k:.1f}x): the model says {rejected.devices_from} -> "
                    f"{rejected.devices_to} devices would then reach {format_fraction_pct(floor)} marginal "
                    f"efficiency, because compute grows with the batch and the exchange does not. "
                    f"A different batch is a different hyper-parameter: retune the learning rate."
                )
    # 2. Placement and exchange: compare kinds measured at the same count.
    kinds: dict[str, list[Group]] = defaultdict(list)
    for g in groups:
        kinds[g.model.exchange].append(g)
    for worse_kind, better_kind, advice in (
        ("host", "ring", "keep the variables on the GPUs rather than the CPU"),
        ("host", "gather", "keep the variables on the GPUs rather than the CPU"),
        ("gather", "ring", "use an NCCL all-reduce rather than gathering on one device"),
    ):
        line = _kind_comparison(kinds.get(worse_kind, []), kinds.get(better_kind, []), advice)
        if line:
            rec.advice.append(line)
    if len(groups) == 1 and chosen.model.exchange in ("gather", "host") and rejected is not None:
        m = chosen.model
        ring = msgspec.structs.replace(m, exchange="ring")
        n1, n2 = rejected.devices_from, rejected.devices_to
        eff = metrics.marginal_efficiency(ring.throughput(n1), n1, ring.throughput(n2), n2)
        rec.advice.append(
            f"Try an all-reduce between the devices (MirroredStrategy with NCCL) instead of "
            f"{_kind_label(m.exchange)}: at the same bandwidth the model gives {n1} -> {n2} a "
            f"marginal efficiency of {_against(eff, floor)} instead of {_against(rejected.marginal_efficiency, floor)}."
        )
    # 3. Input pipeline and 4. mixed precision, from the phases where measured.
    phased = [p for p in chosen.points if p.compute_s is not None and p.step_time_s]
    if phased:
        p = max(phased, key=lambda q: q.devices)
        step = p.step_time_s or 1.0
        parts = {
            "input": p.input_s or 0.0,
            "compute": p.compute_s or 0.0,
            "exchange": p.allreduce_s or 0.0,
            "apply": p.apply_s or 0.0,
        }
        largest = max(parts, key=lambda k: parts[k])
        if largest == "input" and parts["input"] > 0:
            rec.advice.append(
                f"Waiting for input is {_of_step(parts['input'], step)} of each step at {dev(p.devices)}, "
                f"the largest part: fix the input pipeline (prefetch, parallel map, cache, data on "
                f"the device) before adding devices; more devices only wait in parallel."
            )
        if largest == "apply" and _input_in_apply_dominates(p):
            rec.advice.append(
                f"{APPLY_WITH_INPUT.capitalize()} is {_of_step(parts['apply'], step)} of each "
                f"step at {dev(p.devices)}, the largest part: Keras's fit waits for each batch "
                "within the step, and gpuscale's callback cannot tell that wait from the "
                "optimizer update and Keras's own per-step work. If it is the input pipeline "
                "(time the dataset alone, e.g. a loop over dataset.take(100)), fix it "
                "(prefetch, a parallel map, cache, data on the device) before adding devices; "
                "more devices only wait in parallel."
            )
        if largest == "compute" and p.platform == "gpu" and not p.mixed_precision:
            rec.advice.append(
                f"Compute is {_of_step(parts['compute'], step)} of each step at {dev(p.devices)}: "
                "mixed precision (the built-in trainer's --mixed-precision; in your script, "
                "keras.mixed_precision.set_global_policy('mixed_float16') before building "
                "the model) shortens it on GPUs with Tensor Cores "
                f"(V100 and newer); the exchange then weighs more, so measure again."
            )
    elif (
        chosen.model.predicts
        and chosen.points[0].platform == "gpu"
        and chosen.model.comm_time_s(rec.devices) > 0
    ):
        split = _table_split(chosen, rec.devices)
        comm, step = split or (0.0, 0.0)
        share = metrics.share(max(step - comm, 0.0), step) if split else 0.0
        if share >= 0.5 and not chosen.points[0].mixed_precision:
            rec.advice.append(
                f"About {format_fraction_pct(share)} of each step at {dev(rec.devices)} is "
                f"{ALL_BUT_EXCHANGE} (all but the exchange; model): mixed precision shortens its compute on GPUs with Tensor "
                f"Cores (V100 and newer); the exchange then weighs more, so measure again."
            )


def _input_in_apply_dominates(p: SweepPoint) -> bool:
    """Whether ``p``'s apply holds the wait for the batch
    (:attr:`~gpuscale.analysis.sweep.SweepPoint.input_in_apply`) and is larger than
    its compute and exposed exchange beyond their noise (the 95 % half-widths of
    apply and compute added in quadrature): the run's summary says the same
    (:func:`gpuscale.analysis.phase_report.input_in_apply_note`)."""
    if not p.input_in_apply or p.input_s is not None or p.apply_s is None:
        return False
    noise = math.hypot(p.apply_err_s or 0.0, p.compute_err_s or 0.0)
    return p.apply_s - noise > max(p.compute_s or 0.0, p.allreduce_s or 0.0)


def _kind_comparison(worse: list[Group], better: list[Group], advice: str) -> str | None:
    if not worse or not better:
        return None
    best_line = None
    for gw in worse:
        for gb in better:
            common = sorted(set(gw.measured) & set(gb.measured))
            if not common:
                continue
            n = common[-1]
            xw, xb = gw.measured[n], gb.measured[n]
            if xb > xw:
                best_line = (
                    f"{advice[0].upper()}{advice[1:]}: at {dev(n)} '{gb.config}' gave "
                    f"{xb:,.0f} samples/s against {xw:,.0f} with '{gw.config}' ({xb / xw:.2f}x)."
                )
            else:
                best_line = (
                    f"Here '{gw.config}' was not slower than '{gb.config}' at {dev(n)} "
                    f"({xw:,.0f} vs {xb:,.0f} samples/s): the usual advice to {advice} did not "
                    f"hold at that count."
                )
    return best_line


def _why_guessed(g: Group) -> str:
    """Why a configuration's predicted ranges are a guess, in a few words: its
    measurements are superlinear or noisy, or its exchange is one the published
    tables lack (:mod:`gpuscale.analysis.predict`)."""
    if (superlinear := measured_superlinear(g.points)) is not None:
        return f" (superlinear measurements: {superlinear.text()})"
    if measured_noise(g.points) is not None:
        return " (noisy measurements)"
    return f" for a {g.model.exchange} exchange"


def _why_no_bet(g: Group, row: SweepPoint | None) -> str:
    """Why a predicted count of ``g`` has a range but no bet bound, in the words of
    its ``coverage_basis`` (:mod:`gpuscale.analysis.predict`): superlinear or noisy
    measurements make it a guess (a borrowed range said too), and an exchange the
    published tables lack has only the seed tables."""
    guessed = []
    if (superlinear := measured_superlinear(g.points)) is not None:
        guessed.append(f"the measurements scale superlinearly ({superlinear.text()})")
    if (noise := measured_noise(g.points)) is not None:
        guessed.append(f"the measured step times spread up to {format_fraction_pct(noise)} (noisy)")
    said = []
    if guessed:
        lacking = borrowed(row) if row is not None else None
        also = f", and it is borrowed (no published table has {lacking})" if lacking else ""
        said.append(f"{' and '.join(guessed)}, so its range is a guess{also}")
    if uncovered(g.points[0]):
        said.append(
            f"the published tables have no {g.model.exchange} exchange to calibrate its "
            "range on, and a handful of seed tables are too few for a bet"
        )
    return "; ".join(said) or "its range has no bet bound"


def _confidence(rec: Recommendation, groups: Sequence[Group], walk: Sequence[WalkStep]) -> None:
    lines = rec.confidence
    several = len(groups) > 1
    for g in groups:
        ns = sorted(g.measured)
        counts = (
            ", ".join(str(n) for n in ns)
            if len(ns) <= 12
            else f"{len(ns)} counts from {ns[0]} to {ns[-1]}"
        )
        steps = [p.steps for p in g.points if p.steps]
        spreads = [p.spread for p in g.points if p.spread is not None]
        bits = [f"measured at {counts} device{'s' if ns != [1] else ''}"]
        if not steps:
            bits.append("step counts not given")
        elif min(steps) == max(steps):
            bits.append(f"{plural(steps[0], 'step')} per point")
        else:
            bits.append(f"{min(steps)}-{max(steps)} steps per point")
        if steps and min(steps) < ENOUGH_STEPS:
            bits.append(f"fewer than {ENOUGH_STEPS} steps: preliminary")
        if spreads:
            bits.append(f"step-time spread (p10-p90) up to {format_fraction_pct(max(spreads))}")
            if max(spreads) > NOISY_SPREAD:
                bits.append(
                    "noisy: something else shares the machine, measure again when it is quiet"
                )
        else:
            bits.append("spread not given")
        if (superlinear := measured_superlinear(g.points)) is not None:
            bits.append(
                f"superlinear ({superlinear.text()}): cache or memory effects, or a "
                "measurement error; the calibrated ranges never saw it, so its predictions "
                "are a guess and never recommended"
            )
        m = g.model
        if not m.predicts and m.basis == IMPLAUSIBLE_PEAK:
            bits.append(
                "nothing predicted: the gradient exchange alone, at the link's given peak, "
                "would take the whole measured step or more, so the peak (or the payload) "
                "cannot be right"
            )
        elif not m.predicts:
            bits.append("nothing predicted (one device count and no link peak to go on)")
        elif m.fit_error is None:
            bits.append(
                f"the model ({m.basis}) passes through every measured point, so its predictions are unchecked"
            )
        else:
            bits.append(
                f"the model ({m.basis}) fits the measured points within {_fit_pct(m.fit_error)}"
            )
        lines.append(f"'{g.config}': " + "; ".join(bits) + ".")
    held = held_down_sentence(groups)
    if held:
        lines.append(held)
    placed = placement_sentence(rec.better_gpus, several)
    if placed:
        lines.append(placed)
    smallest = min(n for g in groups for n in g.measured)
    if smallest > 1:
        lines.append(
            f"No 1-device run: speedups are relative to {dev(smallest)}, and whether "
            f"{dev(smallest)} beat one is not measured."
        )
    limit = rec.device_limit
    above = sorted({n for g in groups for n in g.measured if limit is not None and n > limit})
    if above:
        lines.append(
            f"Also measured at {', '.join(map(str, above))} devices, above the limit of "
            f"{rec.device_limit} (--max-devices or the machine's devices): shown, not recommended."
        )
    if rec.platform_note:
        note = rec.platform_note
        if any(said in r for r in rec.reasons for said in CORES_SHARED_SAID):
            note = caveat_scope(note)  # the Why said the cores are shared
        lines.append(note[0].upper() + note[1:] + ".")
    far = sorted(
        {
            (g.config, max(g.measured))
            for g in groups
            for r in g.rows
            if r.predicted and r.devices > 2 * max(g.measured)
        }
    )
    if far:
        reach = ", ".join(f"'{c}' from {dev(n)}" if several else f"from {dev(n)}" for c, n in far)
        lines.append(
            f"Predictions beyond twice the largest measured count ({reach}) are long "
            "extrapolations: the model ignores topology (PCIe switches, sockets, NVLink "
            "islands) and changes in overlap; measure there before relying on them."
        )
    if rec.verdict == "none":
        lines.append("Nothing is recommended: one measured device count.")
    elif rec.predicted:
        lines.append(
            f"The recommended {dev(rec.devices)} is a PREDICTION: measure it before buying or booking."
        )
    else:
        lines.append("The recommended count was measured.")
    decisive = [s for s in walk if abs(s.marginal_efficiency - rec.floor) < 0.05]
    if len(decisive) > 2:  # a long walk creeping along the floor: the step that decided
        decisive = [_deciding_step(walk) or decisive[-1]]
    for s in decisive:
        lines.append(
            f"Close call: {s.devices_from} -> {s.devices_to} is {_against(s.marginal_efficiency, rec.floor)} against "
            f"a floor of {format_fraction_pct(rec.floor)}; a few percent of noise could flip it."
        )


def held_down_sentence(groups: Sequence[Group]) -> str | None:
    """One sentence on the measured counts whose run had a GPU held down
    (:attr:`SweepPoint.held_down`): ``At 8 devices GPU 3 was held down in 100% of
    its 38 busy samples (thermal): ...``; ``None``: none had."""
    several = len(groups) > 1
    said = [
        f"at {dev(p.devices)}{f' with {g.config!r}' if several else ''} {p.held_down}"
        for g in groups
        for p in sorted(g.points, key=lambda p: p.devices)
        if p.held_down and not p.predicted
    ]
    if not said:
        return None
    text = "; ".join(said)
    return (
        f"{text[0].upper()}{text[1:]}: a GPU held down runs slower and every replica "
        "waits for the slowest, so the throughput measured there is a lower figure than "
        "the machine can do (and so is what is predicted from it)."
    )


def _apart(value: float, bar: float) -> tuple[str, str]:
    """``value`` and ``bar`` (``value < bar``) with the fewest decimals (1 to 4)
    that print them apart: ``1.497`` and ``1.500``, never ``1.5`` below ``1.5``
    (closer than 4 decimals show: both alike, and the caller says "at")."""
    for digits in range(1, 5):
        shown, needed = f"{value:.{digits}f}", f"{bar:.{digits}f}"
        if shown != needed:
            break
    return shown, needed


def _against(efficiency: float, floor: float) -> str:
    """A marginal efficiency beside the floor, with the decimals that keep the
    verdict true on the page (59.96% fails 60%; never "60%" failing "60%")."""
    return format_pct_against_floor(efficiency, floor, passes_floor(efficiency, floor))


def _own(rec: Recommendation) -> str:
    """``; 5.07x over 'nccl' on 1 device, as in its table`` where the speedup above
    is over another configuration's row; empty otherwise."""
    own = own_speedup(rec)
    return f"; {own[0]} over {own[1]}, as in its table" if own else ""


def _fit_pct(fit_error: float) -> str:
    """A model's fit error to one decimal (``0.3%``, as the tables' captions say
    it), ``0.1%`` for anything smaller: never "within 0%"."""
    return format_fraction_pct(max(fit_error, 0.001), 1)


def _of_step(part_s: float, step_s: float) -> str:
    """A phase's share of the step it is set against, ``63%``; ``about all`` where
    the phase (probed at other moments than the steps' median) is no smaller than
    that step: never a share of 100 % or more."""
    if part_s >= step_s:
        return "about all"
    return format_fraction_pct(metrics.share(part_s, step_s))
