"""Single or multi-GPU, how many, with which configuration, and why: the
pipeline fit -> predict -> decide -> explain, one module per step:

* fit: :mod:`gpuscale.analysis.model` (one :class:`ScalingModel` per configuration);
* predict: :mod:`gpuscale.analysis.predict` (predicted rows with calibrated ranges);
* decide: :mod:`gpuscale.analysis.decide` (the marginal-efficiency walk, the rule
  and why it is what it is);
* explain: :mod:`gpuscale.analysis.explain` (reasons, advice, confidence).

This module groups the measured points into configurations, combines repeated
runs (:func:`combine_runs`), and runs the four steps.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Literal

import msgspec

from gpuscale.analysis import metrics
from gpuscale.analysis.confidence import (
    LOCAL_WORKERS_CAVEAT,
    cpu_logical_caveat,
    live_predictions,
)
from gpuscale.analysis.cost import (
    Cost,
    cost_line,
    cost_of,
    pace_words,
    per_million_samples,
    relative_text,
)
from gpuscale.analysis.decide import (
    DEFAULT_MIN_EFFICIENCY,
    Candidate,
    ConfigResult,
    Group,
    Recommendation,
    WalkStep,
    beyond_own_walk,
    candidates,
    choose_devices,
    dev,
    envelope,
    measure_next,
    row_at,
    walk_config,
)
from gpuscale.analysis.explain import explain
from gpuscale.analysis.hierarchy import anchor_of_two_level, fit_two_level
from gpuscale.analysis.hierarchy import explain as explain_multi_worker
from gpuscale.analysis.placement import gpus_to_use, worse_placed
from gpuscale.analysis.pooled import pooled_phases
from gpuscale.analysis.predict import (
    Calibration,
    anchor_of,
    default_calibration,
    fit_calibrated,
    interconnect_class,
    link_class,
    predicted_point,
    two_level_point,
    widened_if_noisy,
    with_ratios,
)
from gpuscale.analysis.summary import RunSummary
from gpuscale.analysis.sweep import SweepPoint, phases_unresolved
from gpuscale.errors import GpuscaleError
from gpuscale.events.schema import StartEvent, Topology
from gpuscale.formatting import (
    format_cost,
    format_cost_range,
    format_fraction_pct,
    format_with_range,
)

__all__ = [
    "DEFAULT_MIN_EFFICIENCY",
    "ConfigResult",
    "Recommendation",
    "WalkStep",
    "choose_devices",
    "combine_runs",
    "recommend",
    "recommend_from_run",
]

_Candidate = Candidate  # the name tests and older callers use

DEFAULT_MAX_DEVICES = 8
"""How far predictions go when neither ``--max-devices`` nor the machine says."""

ABSURD_RATIO = 1000.0
"""Step times of one configuration that differ more than this between device
counts are refused: no data-parallel step grows or shrinks a thousand-fold by
adding devices, so the units or the batch are wrong."""


def _group(
    points: Sequence[SweepPoint],
    warnings: list[str] | None = None,
    calibration: Calibration | None = None,
) -> list[Group]:
    """The configurations of ``points``, each with its runs at one count combined
    into the row its table shows (:func:`combine_runs`; a disagreement is added to
    ``warnings``) and its model fitted to those rows (with the ring growth
    ``calibration`` learned for their interconnect class, :func:`fit_calibrated`):
    what ``--json`` writes is then what everything was judged on, and reads back
    to the same answer."""
    by_key: dict[tuple[str, str], list[SweepPoint]] = defaultdict(list)
    for p in points:
        by_key[(p.config, p.scaling)].append(p)
    labels = defaultdict(set)
    for config, scaling in by_key:
        labels[config].add(scaling)
    groups = []
    for (config, scaling), ps in by_key.items():
        name = config or next((p.model for p in ps if p.model), None) or "(unnamed)"
        if len(labels[config]) > 1:
            name = f"{name} ({scaling} scaling)"
        exchanges = {p.exchange_kind for p in ps}
        if len(exchanges) > 1:
            raise GpuscaleError(
                f"configuration '{name}' mixes exchanges {sorted(exchanges)}; give each its own config label"
            )
        times = [p.step_time_s for p in ps if p.step_time_s]
        if not times or not all(math.isfinite(t) and t > 0 for t in times):
            raise GpuscaleError(
                f"configuration '{name}' has step times that are not positive numbers"
            )
        if max(times) / min(times) > ABSURD_RATIO:
            raise GpuscaleError(
                f"configuration '{name}': step times from {min(times):.3g} s to {max(times):.3g} s "
                f"differ more than {ABSURD_RATIO:,.0f}-fold between device counts; check the units "
                "(seconds per step) and the batch sizes"
            )
        per_n: dict[int, list[SweepPoint]] = defaultdict(list)
        for p in ps:
            per_n[p.devices].append(msgspec.structs.replace(p, config=name))
        runs = [p for at_n in per_n.values() for p in at_n]
        ps = [combine_runs(at_n, name, warnings) for at_n in per_n.values()]
        groups.append(
            Group(
                config=name,
                scaling=scaling,
                points=ps,
                model=fit_calibrated(ps, calibration),
                runs=runs,
            )
        )
    return groups


def _counts(limit: int, measured: Iterable[int]) -> list[int]:
    """Device counts shown: measured ones, and powers of two up to ``limit`` and
    ``limit`` itself above the smallest measured count (a model fitted at 8 and
    more devices says little about one)."""
    have = set(measured)
    counts = have | {2**i for i in range(int(math.log2(limit)) + 1)} | {limit}
    low = min(have)
    return sorted(c for c in counts if c in have or low < c <= limit)


def cores_used(points: Sequence[SweepPoint]) -> list[tuple[int, float]]:
    """(device count, median CPU use of its runs in percent of one core) of the
    measured CPU logical device counts whose recordings said it
    (:attr:`SweepPoint.proc_cpu_pct`): how many of the machine's cores each kept busy."""
    by_count: dict[int, list[float]] = defaultdict(list)
    for p in points:
        if p.platform in ("cpu-logical", "cpu") and p.proc_cpu_pct is not None:
            by_count[p.devices].append(p.proc_cpu_pct)
    return [(n, metrics.median(v)) for n, v in sorted(by_count.items())]


def recommend(
    points: Sequence[SweepPoint],
    *,
    min_efficiency: float = DEFAULT_MIN_EFFICIENCY,
    max_devices: int | None = None,
    available_devices: int | None = None,
    calibration: Calibration | None = None,
    price_per_device_hour: float | None = None,
    topology: Topology | None = None,
) -> Recommendation:
    """Recommend a device count and configuration from measured sweep points
    (normalized :class:`SweepPoint`; predicted points are ignored).

    ``max_devices`` (the user's limit) and ``available_devices`` (the machine's)
    cap everything recommended, measured counts included; the smaller one wins.
    Without either, measured counts are all candidates and predictions go up to
    :data:`DEFAULT_MAX_DEVICES`. ``topology``: the machine the points were
    measured on (:attr:`~gpuscale.analysis.sweep.Sweep.topology`), to name the
    GPUs to use and the counts measured on worse-connected ones
    (:mod:`gpuscale.analysis.placement`)."""
    measured_points = [p for p in points if not p.predicted]
    if not measured_points:
        raise GpuscaleError("no measured points to recommend from")
    if not 0 < min_efficiency <= 1:
        raise GpuscaleError(f"--min-efficiency must be in (0, 1], got {min_efficiency}")
    _check_one_workload(measured_points)
    caps = [x for x in (max_devices, available_devices) if x]
    limit = max(1, min(caps)) if caps else None
    warnings: list[str] = []
    cal = calibration or default_calibration()
    groups = _group(measured_points, warnings, cal)
    for g in groups:
        _fill_rows(g, limit or DEFAULT_MAX_DEVICES, cal)
    if limit is not None and all(n > limit for g in groups for n in g.measured):
        raise GpuscaleError(
            f"every measured device count is above the limit of {limit} "
            "(--max-devices or the sweep file's available_devices); raise the limit"
        )
    configs = [walk_config(g, min_efficiency, limit) for g in groups if candidates(g, limit)]
    curve = envelope(groups, limit)
    beyond_own_walk(curve, configs)
    chosen, walk = choose_devices(curve, min_efficiency)
    base = min(curve, key=lambda c: c.devices)
    speedup = metrics.speedup(chosen.throughput, base.throughput)
    eff = metrics.efficiency(speedup, chosen.devices, base.devices)
    by_name = {g.config: g for g in groups}
    one_count = len({n for g in groups for n in g.measured}) == 1
    verdict: Literal["single", "multi", "none"] = "single" if chosen.devices == 1 else "multi"
    if one_count:
        verdict = "none"
    rec = Recommendation(
        verdict=verdict,
        devices=chosen.devices,
        config=chosen.config,
        scaling=by_name[chosen.config].scaling,
        predicted=chosen.predicted,
        throughput=chosen.throughput,
        speedup=speedup,
        efficiency=eff,
        baseline=(f"'{base.config}' on " if len(groups) > 1 else "")
        + f"{base.devices} device{'s' if base.devices > 1 else ''}",
        min_efficiency=min_efficiency,
        device_limit=limit,
        reasons=[],
        advice=[],
        confidence=[],
        walk=walk,
        configs=configs,
        table=[row for g in groups for row in g.rows],
        models=[g.model for g in groups],
        coverage=cal.coverage,
        warnings=warnings,
    )
    row = row_at(by_name[chosen.config], chosen.devices)
    if chosen.predicted and row is not None and row.throughput_low is not None:
        rec.speedup_low = metrics.speedup(row.throughput_low, base.throughput)
        rec.speedup_high = metrics.speedup(
            row.throughput_high or row.throughput_low, base.throughput
        )
    rec.measure_next = measure_next(rec, groups, walk, topology)
    if any(p.platform == "cpu-logical" for p in measured_points):
        predicted = any(row.predicted for row in rec.table)  # no note on predictions not made
        rec.platform_note = cpu_logical_caveat(predicted, cores_used(measured_points))
    elif any(g.model.local_workers for g in groups):
        rec.platform_note = LOCAL_WORKERS_CAVEAT
    if price_per_device_hour is not None and not (
        math.isfinite(price_per_device_hour) and price_per_device_hour > 0
    ):
        raise GpuscaleError(
            f"--price-per-device-hour must be a positive number, got {price_per_device_hour}"
        )
    prices = {g.config: price_per_device_hour or _price_of(g) for g in groups}
    if rec.verdict != "none":
        use = gpus_to_use(rec.devices, by_name[rec.config].points, topology)
        if use is not None:
            rec.gpus, rec.gpus_note = use
    rec.better_gpus = worse_placed(groups, topology)
    explain(rec, groups, by_name, walk)
    if any(p is not None for p in prices.values()):
        _costs(rec, groups, prices)
    # multi-worker sweeps: communication inside a machine and between machines, fitted apart
    rec.reasons.extend(explain_multi_worker(measured_points, {g.config: g.rows for g in groups}))
    rec.confidence.extend(w[0].upper() + w[1:] + "." for w in warnings)
    return rec


def _price_of(g: Group) -> float | None:
    """The price per device-hour the sweep file gives this configuration's points
    (``None`` when none does); points of one configuration that disagree are refused."""
    prices = {p.price_per_device_hour for p in g.points if p.price_per_device_hour is not None}
    if len(prices) > 1:
        raise GpuscaleError(
            f"configuration '{g.config}' gives {len(prices)} prices per device-hour "
            f"({', '.join(f'{p:g}' for p in sorted(prices))}); give one per configuration"
        )
    return prices.pop() if prices else None


def _costs(rec: Recommendation, groups: Sequence[Group], prices: dict[str, float | None]) -> None:
    """Cost per million samples of every row of every configuration with a price,
    relative to its configuration's base row (a predicted row's with the range of
    its throughput); one line per priced configuration (at the count its own walk
    chose) goes into the reasons, the recommended configuration's first."""
    known = {p for p in prices.values() if p is not None}
    rec.price_per_device_hour = known.pop() if len(known) == 1 else None
    for g in groups:
        price = prices.get(g.config)
        if price is None:
            continue
        base = min((r for r in g.rows if not r.predicted), key=lambda r: r.devices)
        base_cost = per_million_samples(base.devices, price, base.throughput or 0.0)
        rec.costs.extend(cost_of(r, g.config, price, base_cost) for r in g.rows)
    if rec.verdict == "none":
        return
    chosen = {c.config: c.devices for c in rec.configs}
    chosen[rec.config] = rec.devices
    several = len(groups) > 1
    for g in sorted(groups, key=lambda g: g.config != rec.config):
        price = prices.get(g.config)
        costs = [c for c in rec.costs if c.config == g.config]
        cost = next((c for c in costs if c.devices == chosen.get(g.config)), None)
        if price is None or cost is None:
            continue
        base = min((r for r in g.rows if not r.predicted), key=lambda r: r.devices)
        row = next(r for r in g.rows if r.devices == cost.devices)
        label = "Cost" + (f" ('{g.config}')" if several else "") + ": "
        if cost.devices == base.devices:
            # nothing to compare with itself: its own cost, and what one more step costs
            rec.reasons.append(label + _base_cost_line(g, cost, costs, price) + ".")
            continue
        speedup = format_with_range(
            row.speedup or 1.0, row.speedup_low, row.speedup_high, ".2f", "x"
        )
        rec.reasons.append(
            label
            + cost_line(
                row.speedup or 1.0,
                speedup,
                base.devices,
                cost,
                f"{_per_million(cost)} at {price:g} per device-hour",
            )
            + "."
        )


def _per_million(cost: Cost) -> str:
    """``0.41 per million``; predicted, with its range: ``0.47 per million, range
    0.46\u20130.55,`` (said inside brackets)."""
    text = f"{format_cost(cost.per_million_samples)} per million"
    span = format_cost_range(cost.per_million_samples_low, cost.per_million_samples_high)
    return f"{text}, range {span}," if span else text


def _base_cost_line(g: Group, cost: Cost, costs: Sequence[Cost], price: float) -> str:
    """The cost line of an answer at the base count: ``1 device: 0.46 per million
    samples at 1.2 per device-hour; 2 devices would cost 1.30x that (1.54x
    faster)`` (the next count's figures predicted, with their ranges, when it
    was not measured)."""
    text = f"{dev(cost.devices)}: {_per_million(cost)} samples at {price:g} per device-hour"
    nxt = min((c for c in costs if c.devices > cost.devices), key=lambda c: c.devices, default=None)
    row = row_at(g, nxt.devices) if nxt is not None else None
    if nxt is None or row is None or row.speedup is None:
        return text
    speedup = format_with_range(row.speedup, row.speedup_low, row.speedup_high, ".2f", "x")
    pred = " (predicted)" if nxt.predicted else ""
    pace = pace_words(row.speedup, speedup)
    return f"{text}; {dev(nxt.devices)}{pred} would cost {relative_text(nxt)} that ({pace})"


def _workload(p: SweepPoint) -> str:
    batch = (
        f"{p.per_replica_batch} per device" if p.scaling == "weak" else f"global {p.global_batch}"
    )
    return f"{p.model or 'unnamed model'}, {p.scaling} scaling, batch {batch}"


def _check_one_workload(points: Sequence[SweepPoint]) -> None:
    """Configurations are compared on one workload: the same model, scaling mode
    and batch. Anything else compares apples with oranges, so it is refused."""
    workloads = sorted({_workload(p) for p in points})
    if len(workloads) > 1:
        raise GpuscaleError(
            "the inputs mix workloads ("
            + "; ".join(workloads)
            + "); recommend compares configurations of one workload, give them separately"
        )


REPEAT_TOLERANCE = 0.15
"""Runs of one configuration at one count agree when their step times differ by
at most this (relative to the fastest), whatever their own step-time spread;
beyond it they are combined with a warning (:func:`combine_runs`)."""


def combine_runs(
    points: Sequence[SweepPoint], config: str, warnings: list[str] | None = None
) -> SweepPoint:
    """One row for the runs of one configuration at one count. The rule: the
    median step time of the runs (throughput = samples per step / that), with the
    runs' range folded into ``spread`` and their phase probes pooled
    (:func:`gpuscale.analysis.pooled.pooled_phases`). When the slowest run is more
    than ``REPEAT_TOLERANCE`` slower than the fastest (a noisy run's own spread
    does not excuse it), something other than the configuration may have changed
    between them (a busy machine): they are combined all the same, their whole
    range in the spread shown, and a line saying so is added to ``warnings``. Runs
    of different workloads never get here (:func:`recommend` refuses them)."""
    if len(points) == 1:
        return points[0]
    times = sorted(p.step_time_s or 0.0 for p in points)
    if times[0] <= 0:
        raise GpuscaleError(f"the runs of '{config}' include a step time of 0")
    step = metrics.median(times)
    n = points[0].devices
    first = points[0]
    samples = first.global_batch or (first.per_replica_batch or 1) * n
    across = (times[-1] - times[0]) / step
    if times[-1] / times[0] - 1 > REPEAT_TOLERANCE and warnings is not None:
        noisy = max(p.spread or 0.0 for p in points)
        warnings.append(
            f"the {len(points)} runs of '{config}' at {dev(n)} disagree "
            f"(step times {', '.join(f'{t * 1000:.1f}' for t in times)} ms, "
            f"{format_fraction_pct(times[-1] / times[0] - 1)} apart, more than "
            f"{format_fraction_pct(REPEAT_TOLERANCE)}"
            + (
                f"; one run's own spread is {format_fraction_pct(noisy)}"
                if noisy > REPEAT_TOLERANCE
                else ""
            )
            + f"): combined at their median, with a spread of {format_fraction_pct(across)}; "
            "something else changed between them (a busy machine?): measure again on a "
            "quiet machine for a firmer answer"
        )
    steps = sum(p.steps or 0 for p in points) or None
    phases = _combined_phases(points, step)
    # a run whose apply holds fit's wait for the batch makes the combined one hold it
    phases["input_in_apply"] = phases.get("apply_s") is not None and any(
        p.input_in_apply for p in points if p.apply_s is not None
    )
    return msgspec.structs.replace(
        first,
        step_time_s=step,
        throughput=metrics.throughput(samples, step),
        spread=max([across] + [p.spread or 0.0 for p in points]),
        steps=steps,
        **phases,
        # a run held down among them: said, whichever run it was
        held_down="; ".join(dict.fromkeys(p.held_down for p in points if p.held_down)) or None,
        # the GPUs they used, where they all used the same ones
        gpus=first.gpus if all(p.gpus == first.gpus for p in points) else None,
        note=f"median of {len(points)} runs (step times {times[0] * 1000:.1f}-"
        f"{times[-1] * 1000:.1f} ms)",
    )


_PHASE_TIMES = ("compute_s", "allreduce_s", "allreduce_err_s", "apply_s", "input_s")


def _combined_phases(points: Sequence[SweepPoint], step: float) -> dict:
    """The phases of the combined row: the probes of the runs that resolved them,
    pooled (:func:`gpuscale.analysis.pooled.pooled_phases`), as shares of those
    runs' own steps (probe-weighted), laid over the combined ``step``: the exposed
    share shown is the probed runs', over their step, with their probe count."""
    probed = [p for p in points if p.probes and p.allreduce_s is not None and p.step_time_s]
    if not probed:  # nothing resolved: what the runs say, no share to pool
        return {
            "compute_s": _median_known([p.compute_s for p in points]),
            "allreduce_s": _median_known([p.allreduce_s for p in points]),
            "input_s": _median_known([p.input_s for p in points]),
            "apply_s": _median_known([p.apply_s for p in points]),
            "probes": sum(p.probes or 0 for p in points) or None,
        }
    weight = sum(p.probes or 0 for p in probed)
    own_step = sum((p.probes or 0) * (p.step_time_s or 0.0) for p in probed) / weight
    if len(probed) == 1:
        only = probed[0]
        phases = {
            field: getattr(only, field)
            for field in (*_PHASE_TIMES, "allreduce_total_s", "probes", "comm_share_err")
        }
    else:
        phases = pooled_phases(probed, own_step) or {}
    scale = step / own_step
    # allreduce_total_s is the all-reduce timed alone, not a part of the step: as timed
    for field in _PHASE_TIMES:
        if phases.get(field) is not None:
            phases[field] *= scale
    if abs(scale - 1) > 1e-9:  # the share shown is of the probed runs' step: say which
        phases["share_step_s"] = own_step
    return phases


def _median_known(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return metrics.median(known) if known else None


def _fill_rows(g: Group, limit: int, calibration: Calibration | None) -> None:
    combined = {p.devices: p for p in g.points}  # one row a count (:func:`_group`)
    g.measured = {n: p.throughput or 0.0 for n, p in combined.items()}
    template = g.points[0]
    if g.model.local_workers:  # predicted counts are more workers on the same machine
        template = max((p for p in g.points if p.local_cpu_workers), key=lambda p: p.devices)
    rows = list(combined.values())
    top = max(combined)
    klass = interconnect_class(template) if g.model.local_workers else link_class(g.points)
    # Several workers: the exposed exchange is the two-level model's, the same one
    # the explanation quotes (one model, one set of numbers); the flat ring over
    # all devices would put the whole step into "communication". Not for workers
    # sharing one machine's cores (fit_two_level: None): the one-machine model is theirs.
    several_workers = any(p.workers > 1 for p in g.points)
    two_level = fit_two_level(g.points) if several_workers else None
    if two_level is not None:
        anchor = anchor_of_two_level(two_level, combined[top])
        for n in _counts(limit, combined.keys()):
            if n not in combined:
                row = two_level_point(
                    two_level, n, template, top=top, calibration=calibration, anchor=anchor
                )
                if row is not None:
                    rows.append(row)
    elif g.model.predicts:
        anchor = anchor_of(g.model, top, g.measured[top])
        for n in _counts(limit, combined.keys()):
            if n not in combined:
                rows.append(
                    predicted_point(
                        g.model,
                        n,
                        template,
                        top=top,
                        interconnect=klass,
                        calibration=calibration,
                        anchor=anchor,
                    )
                )
    rows = widened_if_noisy(rows, g.points)  # noisy: the calibrated coverage does not apply
    rows.sort(key=lambda r: (r.devices, r.predicted))
    base_n = 1 if 1 in combined else min(combined)
    base_x = g.measured[base_n] or 1.0
    filled = []
    for r in rows:
        share = r.comm_share
        if share is None and r.devices == 1 and r.workers <= 1 and not r.predicted:
            share = 0.0  # one device exchanges nothing, probed or not (a script's run)
        if share is None and r.allreduce_s is not None and r.step_time_s:
            share = metrics.share(r.allreduce_s, r.step_time_s)
        elif share is None and several_workers and not g.model.local_workers:
            if two_level is not None and r.workers > 1 and not r.predicted:
                share = metrics.share(
                    two_level.inter_s(r.workers), two_level.step_time_s(r.workers)
                )
        elif share is None and r.probes and not r.predicted:
            pass  # probed, but the phases did not add up: not resolved, not the model's guess
        elif share is None and g.model.predicts and g.model.basis != "none":
            share = g.model.comm_share(r.devices)  # estimated: shown as "(model)"
        filled.append(with_ratios(msgspec.structs.replace(r, comm_share=share), base_x, base_n))
    if two_level is None and phases_unresolved(filled):
        # nothing measured says what the exchange exposes: neither does the model
        # (a modelled 0 % beside "not resolved" is false precision)
        filled = [msgspec.structs.replace(r, comm_share=None) if r.predicted else r for r in filled]
    g.rows = filled


def recommend_from_run(
    start: StartEvent | None, summary: RunSummary, *, final: bool = False
) -> Recommendation | None:
    """What :func:`recommend` says from one run alone (its predictions for other
    device counts rest on this one count, as :func:`live_predictions` rules;
    ``final``: the run is over, and then the answer is ``gpuscale recommend --from``'s
    on its recording); ``None`` while there is not enough to say anything (no start,
    no counted step, no usable timing). Errors other than "not enough evidence"
    (:class:`GpuscaleError`) are bugs and propagate."""
    if start is None or not summary.steps_counted or not summary.step_time_s:
        return None
    from gpuscale.analysis.sweep import point_from_summary

    try:
        point = point_from_summary(summary, start, "live")
        rec = recommend([point])
    except GpuscaleError:
        return None
    live = live_predictions(summary, final=final)
    if live.level == "wait":  # nothing to fit yet: the measured rows only
        rec.table = [r for r in rec.table if not r.predicted]
    elif live.level == "guess":
        rec.table = _guessed(rec.table, point, live.reason)
    return rec


def _guessed(rows: list[SweepPoint], point: SweepPoint, reason: str) -> list[SweepPoint]:
    """``rows`` with every predicted one's range spanning the predictions from the
    exposed all-reduce at either end of its 95 % interval (``point``: the one
    measured point), stated as a guess (``reason``) with no coverage and no bet bound."""
    a, err = point.allreduce_s or 0.0, point.allreduce_err_s or 0.0
    ends = []
    for shifted in (max(a - err, 0.0), a + err):
        try:
            ends.append(recommend([msgspec.structs.replace(point, allreduce_s=shifted)]).table)
        except GpuscaleError:
            continue
    base = [r for r in rows if not r.predicted]
    out = []
    for r in rows:
        if not r.predicted or r.throughput_low is None or r.throughput_high is None:
            out.append(r)
            continue
        at = [e.throughput_low for t in ends for e in t if e.devices == r.devices and e.predicted]
        up = [e.throughput_high for t in ends for e in t if e.devices == r.devices and e.predicted]
        low = min([r.throughput_low, *(x for x in at if x is not None)])
        high = max([r.throughput_high, *(x for x in up if x is not None)])
        r = msgspec.structs.replace(
            r,
            throughput_low=low,
            throughput_high=high,
            throughput_safe=None,
            coverage=None,
            # already a guess (noisy steps): both reasons, "a guess" once
            coverage_basis=(
                f"{r.coverage_basis}; {reason.split(': ', 1)[-1]}"
                if r.coverage is None and r.coverage_basis
                else reason
            ),
        )
        if base and base[0].throughput:
            r = with_ratios(r, base[0].throughput, base[0].devices)
        out.append(r)
    return out
