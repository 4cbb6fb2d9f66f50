"""Single or multi-GPU, how many, with which configuration, and why.

The rule (:func:`choose_devices`): walk the device counts upward and accept each
next count only while its *marginal efficiency* against the last accepted count
stays at or above the floor::

    marginal efficiency(N1 -> N2) = (X(N2) / X(N1)) ** (1 / log2(N2 / N1)) / 2

(the throughput gain per doubling, halved: 1.0 when doubling the devices doubles
the samples per second). The answer is the last accepted count.

Why marginal and why a floor of 0.6. The issue asked for the count with the most
throughput whose plain efficiency ``S(N) / N`` stays above 70 %. Checked against
the origin documents' own conclusions that rule fails twice: seed 002's NCCL
reaches 507 % at 8 GPUs, a plain efficiency of 63 %, so it would stop at 4
although the author found 8 worth it; and seed 000's M60, where the author found
more GPUs pay, is only 62-65 % efficient at 2 GPUs, so it would say "single".
No floor on plain efficiency gets both right while also stopping seed 002's
gather at 4 (4 -> 8 gives 1.06x). Marginal efficiency asks the question a user
with N GPUs asks: "is doubling again worth it?". With a floor of 0.6 all four
conclusions come out (measured, doubling steps): NCCL 4 -> 8 is 76 % (accept),
gather 4 -> 8 is 53 % (stop at 4), M60 1 -> 2 is 62 % (variables on CPU) and 65 %
(on GPU) then 87 % / 65 % to 4 (accept), V100 with variables on the GPU 1 -> 2 is
25 % (stay on one). A floor of 0.7 would turn the M60 into "single". So the
default is 0.6 (``--min-efficiency`` changes it).

Several configurations: at each device count the fastest configuration
measured there is taken (a prediction only where nothing was measured), and the
walk runs over that best-of curve, so the answer is a configuration AND a count
(seed 000's V100: one GPU with variables on the GPU beats four with either
placement). Predictions from :mod:`gpuscale.analysis.model` extend a curve only
beyond its largest measured count (up to ``max_devices`` or the machine's
``available_devices``); a recommendation that rests on one says so.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Literal

import msgspec

from gpuscale.analysis import metrics
from gpuscale.analysis.confidence import CPU_LOGICAL_CAVEAT, ENOUGH_STEPS, NOISY_SPREAD
from gpuscale.analysis.hierarchy import explain as explain_multi_worker
from gpuscale.analysis.hierarchy import fit_two_level
from gpuscale.analysis.model import (
    ScalingModel,
    compute_scale_for,
    fit,
    threshold_compute_scale,
)
from gpuscale.analysis.predict import (
    Calibration,
    default_calibration,
    interconnect_class,
    predicted_point,
    with_ratios,
)
from gpuscale.analysis.summary import RunSummary
from gpuscale.analysis.sweep import SweepPoint
from gpuscale.errors import GpuscaleError
from gpuscale.events.schema import StartEvent
from gpuscale.formatting import format_bytes, format_fraction_pct, format_rate_bytes_s

DEFAULT_MAX_DEVICES = 8
"""How far predictions go when neither ``--max-devices`` nor the machine says."""

ABSURD_RATIO = 1000.0
"""Step times of one configuration that differ more than this between device
counts are refused: no data-parallel step grows or shrinks a thousand-fold by
adding devices, so the units or the batch are wrong."""

WALK_SHOWN = 4
"""Steps of the walk told at each end when it is long (the rest are all accepted)."""

DEFAULT_MIN_EFFICIENCY = 0.6
"""Floor on marginal efficiency; see the module docstring for why not 0.7."""


class WalkStep(msgspec.Struct, kw_only=True):
    """One step of the walk: from the last accepted count to the next."""

    devices_from: int
    devices_to: int
    config_from: str
    config_to: str
    throughput_gain: float
    """``X(to) / X(from)``."""
    marginal_efficiency: float
    accepted: bool
    predicted: bool
    """The ``to`` point is a model prediction."""
    marginal_efficiency_low: float | None = None
    """Predicted ``to``: the marginal efficiency at the low end of its range."""
    uncertain: bool = False
    """Predicted ``to`` that passes the floor on its value but not at the low end
    of its range: rejected, and worth measuring (:attr:`Recommendation.measure_next`)."""


class ConfigResult(msgspec.Struct, kw_only=True):
    """The walk over one configuration alone."""

    config: str
    scaling: str
    exchange: str
    devices: int
    throughput: float
    speedup: float | None
    predicted: bool
    measured_devices: list[int]
    walk: list[WalkStep]


class Recommendation(msgspec.Struct, kw_only=True):
    """The answer, with the numbers behind it."""

    verdict: Literal["single", "multi", "none"]
    """``none``: one device count measured, nothing to compare; ``devices`` is the
    measured count, and ``measure_next`` says what to measure."""
    devices: int
    config: str
    scaling: str
    predicted: bool
    """The recommended count was not measured: it rests on the model."""
    throughput: float
    """Samples per second at the recommended count and configuration."""
    speedup: float | None
    """Over the best configuration at the smallest count (normally one device)."""
    efficiency: float | None
    baseline: str
    """What the speedup is relative to."""
    min_efficiency: float
    device_limit: int | None = None
    """Most devices considered (``--max-devices`` or the machine's), ``None`` when
    neither was given; measured rows above it stay in ``table`` but are not
    recommended."""
    platform_note: str | None = None
    """One clause to show next to predictions when they rest on runs that cannot
    stand for GPUs (CPU logical devices sharing the same cores)."""
    reasons: list[str]
    advice: list[str]
    confidence: list[str]
    walk: list[WalkStep]
    configs: list[ConfigResult]
    table: list[SweepPoint]
    """Every measured and predicted point, sorted by configuration then devices,
    with speedup, efficiency and exposed comm share filled in."""
    models: list[ScalingModel]
    measure_next: str | None = None
    """``measure N next: predicted X (low-high)`` when one more run would change
    or settle the answer (a predicted count rejected only for its range, or one
    measured count)."""
    coverage: float | None = None
    """Stated coverage of the predicted rows' ranges."""


class _Candidate(msgspec.Struct):
    devices: int
    throughput: float
    config: str
    predicted: bool
    low: float | None = None
    """Predicted: low end of the throughput range."""
    high: float | None = None


def choose_devices(
    candidates: Sequence[_Candidate], floor: float
) -> tuple[_Candidate, list[WalkStep]]:
    """The walk (module docstring): candidates sorted by devices, one per count.
    It stops at the first step below the floor: a later count is not judged
    against an earlier one across the gap, because per-doubling efficiency over a
    long jump averages a bad doubling with later ones (a ring's exchange stops
    growing at large N, so 1 -> 8 can average 61 % per doubling while 1 -> 2 alone
    is 33 %)."""
    ordered = sorted(candidates, key=lambda c: c.devices)
    current = ordered[0]
    steps = []
    for nxt in ordered[1:]:
        eff = metrics.marginal_efficiency(
            current.throughput, current.devices, nxt.throughput, nxt.devices
        )
        eff_low = None
        if nxt.predicted and nxt.low is not None:
            # decide with the range: the low end must pass too
            eff_low = metrics.marginal_efficiency(
                current.throughput, current.devices, max(nxt.low, 1e-12), nxt.devices
            )
        ok = eff >= floor and (eff_low is None or eff_low >= floor)
        steps.append(
            WalkStep(
                devices_from=current.devices,
                devices_to=nxt.devices,
                config_from=current.config,
                config_to=nxt.config,
                throughput_gain=nxt.throughput / current.throughput,
                marginal_efficiency=eff,
                accepted=ok,
                predicted=nxt.predicted,
                marginal_efficiency_low=eff_low,
                uncertain=eff >= floor and not ok,
            )
        )
        if not ok:
            break
        current = nxt
    return current, steps


class _Group(msgspec.Struct):
    config: str
    scaling: str
    points: list[SweepPoint]
    model: ScalingModel
    rows: list[SweepPoint] = []
    measured: dict[int, float] = {}
    """Median measured throughput per device count."""


def _group(points: Sequence[SweepPoint]) -> list[_Group]:
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
        ps = [msgspec.structs.replace(p, config=name) for p in ps]
        groups.append(_Group(config=name, scaling=scaling, points=ps, model=fit(ps)))
    return groups


def _counts(limit: int, measured: Iterable[int]) -> list[int]:
    """Device counts shown: measured ones, and powers of two up to ``limit`` and
    ``limit`` itself above the smallest measured count (a model fitted at 8 and
    more devices says little about one)."""
    have = set(measured)
    counts = have | {2**i for i in range(int(math.log2(limit)) + 1)} | {limit}
    low = min(have)
    return sorted(c for c in counts if c in have or low < c <= limit)


def recommend(
    points: Sequence[SweepPoint],
    *,
    min_efficiency: float = DEFAULT_MIN_EFFICIENCY,
    max_devices: int | None = None,
    available_devices: int | None = None,
    calibration: Calibration | None = None,
) -> Recommendation:
    """Recommend a device count and configuration from measured sweep points
    (normalized :class:`SweepPoint`; predicted points are ignored).

    ``max_devices`` (the user's limit) and ``available_devices`` (the machine's)
    cap everything recommended, measured counts included; the smaller one wins.
    Without either, measured counts are all candidates and predictions go up to
    :data:`DEFAULT_MAX_DEVICES`."""
    measured_points = [p for p in points if not p.predicted]
    if not measured_points:
        raise GpuscaleError("no measured points to recommend from")
    if not 0 < min_efficiency <= 1:
        raise GpuscaleError(f"--min-efficiency must be in (0, 1], got {min_efficiency}")
    _check_one_workload(measured_points)
    caps = [x for x in (max_devices, available_devices) if x]
    limit = max(1, min(caps)) if caps else None
    groups = _group(measured_points)
    cal = calibration or default_calibration()
    for g in groups:
        _fill_rows(g, limit or DEFAULT_MAX_DEVICES, cal)
    if limit is not None and all(n > limit for g in groups for n in g.measured):
        raise GpuscaleError(
            f"every measured device count is above the limit of {limit} "
            "(--max-devices or the sweep file's available_devices); raise the limit"
        )
    configs = [_walk_config(g, min_efficiency, limit) for g in groups if _candidates(g, limit)]
    envelope = _envelope(groups, limit)
    chosen, walk = choose_devices(envelope, min_efficiency)
    base = min(envelope, key=lambda c: c.devices)
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
    )
    rec.measure_next = _measure_next(rec, groups, walk)
    if any(p.platform == "cpu-logical" for p in measured_points):
        rec.platform_note = CPU_LOGICAL_CAVEAT
    _explain(rec, groups, by_name, walk)
    # multi-worker sweeps: communication inside a machine and between machines, fitted apart
    rec.reasons.extend(explain_multi_worker(measured_points))
    return rec


def _range_text(low: float | None, value: float, high: float | None) -> str:
    if low is None or high is None:
        return f"{value:,.0f}"
    return f"{value:,.0f} ({low:,.0f}\u2013{high:,.0f})"


def _measure_next(
    rec: Recommendation, groups: Sequence[_Group], walk: Sequence[WalkStep]
) -> str | None:
    """The one run that would change or settle the answer: a predicted count the
    walk rejected only for the low end of its range, else (one measured count) the
    next count the model predicts, else the count below the only one measured."""
    by_name = {g.config: g for g in groups}
    for step in walk:
        if step.uncertain:
            row = _row(by_name[step.config_to], step.devices_to)
            if row is not None:
                return (
                    f"measure {step.devices_to} next: predicted "
                    f"{_range_text(row.throughput_low, row.throughput or 0.0, row.throughput_high)} samples/s"
                )
    if rec.verdict != "none":
        return None
    g = by_name[rec.config]
    (n,) = g.measured
    if n > 1:
        return f"measure 1 device next: the baseline that {_dev(n)} must beat"
    nxt = [r for r in g.rows if r.predicted and r.devices > n]
    if nxt and g.model.predicts:
        r = min(nxt, key=lambda row: row.devices)
        return (
            f"measure {r.devices} next: predicted "
            f"{_range_text(r.throughput_low, r.throughput or 0.0, r.throughput_high)} samples/s"
        )
    return "measure 2 devices next: one count alone has nothing to compare with"


def _row(g: _Group, devices: int) -> SweepPoint | None:
    return next((r for r in g.rows if r.devices == devices), None)


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
at most this (relative to the fastest), or by their own step-time spread if
that is larger; beyond it they are refused (:func:`combine_runs`)."""


def combine_runs(points: Sequence[SweepPoint], config: str) -> SweepPoint:
    """One row for the runs of one configuration at one count. The rule: the
    median step time of the runs (throughput = samples per step / that), with the
    runs' range folded into ``spread``; refused (:class:`GpuscaleError`) when the
    slowest run is more than ``max(REPEAT_TOLERANCE, their largest spread)``
    slower than the fastest: then something other than the configuration changed
    between them, and no single number stands for both."""
    if len(points) == 1:
        return points[0]
    times = sorted(p.step_time_s or 0.0 for p in points)
    step = metrics.median(times)
    noise = max([REPEAT_TOLERANCE] + [p.spread or 0.0 for p in points])
    n = points[0].devices
    if times[0] <= 0 or times[-1] / times[0] - 1 > noise:
        raise GpuscaleError(
            f"the {len(points)} runs of '{config}' at {_dev(n)} disagree beyond their noise "
            f"(step times {', '.join(f'{t * 1000:.1f}' for t in times)} ms, allowed "
            f"{format_fraction_pct(noise)} apart): measure again on a quiet machine, or give "
            "them different config labels"
        )
    first = points[0]
    samples = first.global_batch or (first.per_replica_batch or 1) * n
    across = (times[-1] - times[0]) / step
    steps = sum(p.steps or 0 for p in points) or None
    return msgspec.structs.replace(
        first,
        step_time_s=step,
        throughput=metrics.throughput(samples, step),
        spread=max([across] + [p.spread or 0.0 for p in points]),
        steps=steps,
        compute_s=_median_known([p.compute_s for p in points]),
        allreduce_s=_median_known([p.allreduce_s for p in points]),
        input_s=_median_known([p.input_s for p in points]),
        apply_s=_median_known([p.apply_s for p in points]),
        note=f"median of {len(points)} runs (step times {times[0] * 1000:.1f}-"
        f"{times[-1] * 1000:.1f} ms)",
    )


def _median_known(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return metrics.median(known) if known else None


def _fill_rows(g: _Group, limit: int, calibration: Calibration | None) -> None:
    per_n: dict[int, list[SweepPoint]] = defaultdict(list)
    for p in g.points:
        per_n[p.devices].append(p)
    combined = {n: combine_runs(ps, g.config) for n, ps in per_n.items()}
    g.measured = {n: p.throughput or 0.0 for n, p in combined.items()}
    template = g.points[0]
    rows = list(combined.values())
    top = max(per_n)
    klass = interconnect_class(template)
    if g.model.predicts:
        for n in _counts(limit, per_n.keys()):
            if n not in per_n:
                rows.append(
                    predicted_point(
                        g.model, n, template, top=top, interconnect=klass, calibration=calibration
                    )
                )
    rows.sort(key=lambda r: (r.devices, r.predicted))
    base_n = 1 if 1 in per_n else min(per_n)
    base_x = g.measured[base_n] or 1.0
    # Several workers: the exposed exchange is the two-level model's, the same one
    # the explanation quotes (one model, one set of numbers); the flat ring over
    # all devices would put the whole step into "communication".
    several_workers = any(p.workers > 1 for p in g.points)
    two_level = fit_two_level(g.points) if several_workers else None
    filled = []
    for r in rows:
        share = r.comm_share
        if share is None and r.allreduce_s is not None and r.step_time_s:
            share = metrics.share(r.allreduce_s, r.step_time_s)
        elif share is None and several_workers:
            if two_level is not None and r.workers > 1 and not r.predicted:
                share = metrics.share(
                    two_level.inter_s(r.workers), two_level.step_time_s(r.workers)
                )
        elif share is None and g.model.predicts and g.model.basis != "none":
            share = g.model.comm_share(r.devices)  # estimated: shown as "(model)"
        filled.append(with_ratios(msgspec.structs.replace(r, comm_share=share), base_x, base_n))
    g.rows = filled


def _candidates(g: _Group, limit: int | None) -> list[_Candidate]:
    """Measured counts up to ``limit``, then predictions beyond the largest
    measured one, the latter only when the model was fitted to 2+ device counts
    (one count says nothing about how the step grows with N: its predictions are
    shown, not used). Measured counts above ``limit`` stay in the table, marked,
    but are not candidates: the user cannot have them."""
    cap = limit if limit is not None else max(g.measured)
    out = [_Candidate(n, x, g.config, False) for n, x in g.measured.items() if n <= cap]
    top = max(g.measured)
    if len(g.measured) < 2:
        return out
    out += [
        _Candidate(
            r.devices, r.throughput or 0.0, g.config, True, r.throughput_low, r.throughput_high
        )
        for r in g.rows
        if r.predicted and r.devices > top and (limit is None or r.devices <= limit)
    ]
    return out


def _walk_config(g: _Group, floor: float, limit: int | None) -> ConfigResult:
    cands = _candidates(g, limit)
    chosen, walk = choose_devices(cands, floor)
    base = min(cands, key=lambda c: c.devices)
    return ConfigResult(
        config=g.config,
        scaling=g.scaling,
        exchange=g.model.exchange,
        devices=chosen.devices,
        throughput=chosen.throughput,
        speedup=metrics.speedup(chosen.throughput, base.throughput),
        predicted=chosen.predicted,
        measured_devices=sorted(g.measured),
        walk=walk,
    )


def _envelope(groups: Sequence[_Group], limit: int | None) -> list[_Candidate]:
    """At each count up to ``limit``, the fastest measured configuration (a
    prediction only where nothing was measured at that count)."""
    by_n: dict[int, list[_Candidate]] = defaultdict(list)
    for g in groups:
        for c in _candidates(g, limit):
            by_n[c.devices].append(c)
    best = []
    for _n, cands in sorted(by_n.items()):
        measured = [c for c in cands if not c.predicted]
        pool = measured or cands
        best.append(max(pool, key=lambda c: c.throughput))
    return best


# ---------------------------------------------------------------- explanation


def _dev(n: int) -> str:
    return f"{n} device{'s' if n != 1 else ''}"


def _explain(
    rec: Recommendation,
    groups: Sequence[_Group],
    by_name: dict[str, _Group],
    walk: Sequence[WalkStep],
) -> None:
    floor = rec.min_efficiency
    several = len(groups) > 1
    what = f"{_dev(rec.devices)}" + (f" with '{rec.config}'" if several else "")
    pred = " (predicted, not measured)" if rec.predicted else ""
    chosen_row = _row(by_name[rec.config], rec.devices)
    if rec.verdict == "none":
        rec.reasons.append(
            f"Measured at {_dev(rec.devices)} only: {rec.throughput:,.0f} samples/s. One device "
            f"count has nothing to compare with, so there is no recommendation yet: "
            f"{rec.measure_next}."
        )
    elif rec.predicted and chosen_row is not None and chosen_row.throughput_low is not None:
        rec.reasons.append(
            f"{what}{pred}: "
            f"{_range_text(chosen_row.throughput_low, rec.throughput, chosen_row.throughput_high)} "
            f"samples/s ({format_fraction_pct(rec.coverage or 0)} range), {rec.speedup or 0:.2f}x "
            f"{rec.baseline} (efficiency {format_fraction_pct(rec.efficiency or 0)})."
        )
    elif rec.speedup is not None and rec.devices > 1:
        rec.reasons.append(
            f"{what}{pred}: {rec.throughput:,.0f} samples/s, {rec.speedup:.2f}x {rec.baseline} "
            f"(efficiency {format_fraction_pct(rec.efficiency or 0)})."
        )
    else:
        rec.reasons.append(f"{what}{pred}: {rec.throughput:,.0f} samples/s.")
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
        tag = " [predicted]" if step.predicted else ""
        verdict = "worth it" if step.accepted else "not worth it"
        low = ""
        if step.marginal_efficiency_low is not None:
            low = (
                f", {format_fraction_pct(step.marginal_efficiency_low)} at the low end of its "
                f"{format_fraction_pct(rec.coverage or 0)} range"
            )
        if step.uncertain:
            verdict = "not a safe bet: " + (rec.measure_next or f"measure {step.devices_to} next")
        rec.reasons.append(
            f"{step.devices_from} -> {step.devices_to}{label}{tag}: {step.throughput_gain:.2f}x the "
            f"samples/s, marginal efficiency {format_fraction_pct(step.marginal_efficiency)}{low} "
            f"(floor {format_fraction_pct(floor)}): {verdict}."
        )
    _comm_reason(rec, by_name, walk)
    for g in groups:
        if rec.verdict != "none":
            _one_count_outlook(rec, g)
    if several:
        alone = "; ".join(
            f"'{c.config}' -> {_dev(c.devices)}"
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


def _one_count_outlook(rec: Recommendation, g: _Group) -> None:
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
    rec.reasons.append(
        f"Only {_dev(n)} measured for '{g.config}': the model, from {basis}, expects "
        f"{n} -> {r.devices} to reach a marginal efficiency of {format_fraction_pct(eff)}; measure "
        f"{_dev(r.devices)} to know (a prediction from one count does not decide)."
    )


def _deciding_step(walk: Sequence[WalkStep]) -> WalkStep | None:
    """The first rejected step, else the last accepted one."""
    for step in walk:
        if not step.accepted:
            return step
    return walk[-1] if walk else None


def _comm_reason(rec: Recommendation, by_name: dict[str, _Group], walk: Sequence[WalkStep]) -> None:
    step = _deciding_step(walk)
    if step is None:
        return
    g = by_name[step.config_to]
    m = g.model
    if m.shared_cores and m.predicts and not step.accepted:
        rec.reasons.append(_shared_cores_reason(m))
        return
    if not m.predicts or m.beta_s == 0 and m.alpha_s == 0:
        return
    n1, n2 = step.devices_from, step.devices_to
    comm = m.comm_time_s(n2)
    measured = [p for p in g.points if p.devices == n2 and p.allreduce_s is not None]
    if not measured and any(p.workers > 1 for p in g.points):
        return  # one ring over all devices misreads machines; explain_multi_worker says it
    if measured:
        comm = metrics.median([p.allreduce_s or 0.0 for p in measured])
        step_t = metrics.median([p.step_time_s or 0.0 for p in measured])
        how = "measured"
    else:
        step_t = m.step_time_s(n2)
        how = f"estimated by the model from {m.basis}"
    if comm <= 0:
        return
    detail = ""
    if m.payload_bytes and measured:
        rate = metrics.algbw_bytes_s(m.payload_bytes, comm)
        detail = f" ({format_bytes(m.payload_bytes)} per step at an effective {format_rate_bytes_s(rate)}"
        peaks = [p.interconnect_bytes_s for p in measured if p.interconnect_bytes_s]
        if peaks and n2 > 1:
            bus = metrics.busbw_bytes_s(rate, n2, m.exchange)
            detail += f", busbw {format_rate_bytes_s(bus)} against a link peak of {format_rate_bytes_s(min(peaks))}"
        detail += ")"
    elif m.payload_bytes and m.bandwidth_bytes_s:
        detail = (
            f" ({format_bytes(m.payload_bytes)} per step over a link the model puts at "
            f"{format_rate_bytes_s(m.bandwidth_bytes_s)})"
        )
    compute = max(step_t - comm, 0.0)
    ratio = compute / comm
    text = (
        f"Gradient exchange takes {format_fraction_pct(metrics.share(comm, step_t))} of each step at "
        f"{_dev(n2)}{detail}, {how}; compute:communication is {ratio:.1f}"
    )
    k = threshold_compute_scale(m, n1, n2, rec.min_efficiency)
    if step.uncertain:
        text += f"; whether {n1} -> {n2} pays is within the prediction's range, not known"
    elif k is None:
        text += f", and no batch size makes {n1} -> {n2} reach {format_fraction_pct(rec.min_efficiency)} per the model"
    elif k > 1.0:
        text += (
            f", below the {ratio * k:.1f} at which {n1} -> {n2} reaches "
            f"{format_fraction_pct(rec.min_efficiency)} marginal efficiency (model)"
        )
    elif k * ratio < 0.05:  # shown as 0.0: the exchange alone does not stop this step
        text += f"; {n1} -> {n2} pays at any compute:communication ratio (model)"
    else:
        text += f", above the {ratio * k:.1f} needed for {n1} -> {n2} to pay (model)"
    rec.reasons.append(text + ".")


def _shared_cores_reason(m: ScalingModel) -> str:
    """Why devices that share one machine's cores do not pay (the model's
    ``shared_cores`` compute, :mod:`gpuscale.analysis.model`)."""
    fitted = [n for n in m.fitted_devices if n > 1] or m.fitted_devices
    at = f"fitted at {', '.join(map(str, fitted))} devices"
    since = f"from {fitted[0]} devices on, " if fitted[0] > 1 else ""
    if m.scaling == "weak":
        how = (
            f"{since}N devices' batches take N times as long (weak scaling: about "
            f"{m.compute_time_s(1) * 1000:.1f} ms of compute per device per step, {at})"
        )
    else:
        how = (
            f"{since}the same global batch takes as long whatever N (strong scaling: about "
            f"{m.compute_time_s(1) * 1000:.1f} ms of compute per step, {at})"
        )
    return (
        f"The devices are CPU logical devices sharing the same cores: {how}, so neither "
        f"the exchange nor a bigger batch makes more of them pay on this machine."
    )


def _compare_configs(rec: Recommendation, groups: Sequence[_Group]) -> None:
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
        rec.reasons.append(f"At {_dev(n)}: '{best}' {best_x:,.0f} samples/s; {others}.")


def _kind_label(exchange: str) -> str:
    return {
        "ring": "an all-reduce between the devices (NCCL)",
        "gather": "gathering gradients on one device",
        "host": "variables on the CPU",
    }[exchange]


def _advice(
    rec: Recommendation,
    groups: Sequence[_Group],
    by_name: dict[str, _Group],
    walk: Sequence[WalkStep],
) -> None:
    floor = rec.min_efficiency
    chosen = by_name[rec.config]
    # 1. A bigger batch, when the exchange is what stops the walk.
    rejected = next((s for s in walk if not s.accepted), None)
    if rejected is not None:
        g = by_name[rejected.config_to]
        m = g.model
        if m.predicts and (m.beta_s > 0 or m.alpha_s > 0):
            k = compute_scale_for(m, rejected.devices_from, rejected.devices_to, floor)
            if k is not None and k > 1.0:
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
    kinds: dict[str, list[_Group]] = defaultdict(list)
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
            f"marginal efficiency of {format_fraction_pct(eff)} instead of {format_fraction_pct(rejected.marginal_efficiency)}."
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
                f"Waiting for input is {format_fraction_pct(parts['input'] / step)} of each step at {_dev(p.devices)}, "
                f"the largest part: fix the input pipeline (prefetch, parallel map, cache, data on "
                f"the device) before adding devices; more devices only wait in parallel."
            )
        if largest == "compute" and p.platform == "gpu" and not p.mixed_precision:
            rec.advice.append(
                f"Compute is {format_fraction_pct(parts['compute'] / step)} of each step at {_dev(p.devices)}: "
                f"mixed precision (--mixed-precision) shortens it on GPUs with Tensor Cores "
                f"(V100 and newer); the exchange then weighs more, so measure again."
            )
    elif (
        chosen.model.predicts
        and chosen.points[0].platform == "gpu"
        and chosen.model.comm_time_s(rec.devices) > 0
    ):
        m = chosen.model
        share = metrics.share(m.compute_time_s(rec.devices), m.step_time_s(rec.devices))
        if share >= 0.5 and not chosen.points[0].mixed_precision:
            rec.advice.append(
                f"Compute is about {format_fraction_pct(share)} of each step at {_dev(rec.devices)} (model): "
                f"mixed precision shortens it on GPUs with Tensor Cores (V100 and newer); the "
                f"exchange then weighs more, so measure again."
            )


def _kind_comparison(worse: list[_Group], better: list[_Group], advice: str) -> str | None:
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
                    f"{advice[0].upper()}{advice[1:]}: at {_dev(n)} '{gb.config}' gave "
                    f"{xb:,.0f} samples/s against {xw:,.0f} with '{gw.config}' ({xb / xw:.2f}x)."
                )
            else:
                best_line = (
                    f"Here '{gw.config}' was not slower than '{gb.config}' at {_dev(n)} "
                    f"({xw:,.0f} vs {xb:,.0f} samples/s): the usual advice to {advice} did not "
                    f"hold at that count."
                )
    return best_line


def _confidence(rec: Recommendation, groups: Sequence[_Group], walk: Sequence[WalkStep]) -> None:
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
        bits = [f"measured at {counts} devices"]
        if not steps:
            bits.append("step counts not given")
        elif min(steps) == max(steps):
            bits.append(f"{steps[0]} steps per point")
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
        m = g.model
        if not m.predicts:
            bits.append("nothing predicted (one device count and no link peak to go on)")
        elif m.fit_error is None:
            bits.append(
                f"the model ({m.basis}) passes through every measured point, so its predictions are unchecked"
            )
        else:
            bits.append(
                f"the model ({m.basis}) fits the measured points within {format_fraction_pct(m.fit_error)}"
            )
        lines.append(f"'{g.config}': " + "; ".join(bits) + ".")
    smallest = min(n for g in groups for n in g.measured)
    if smallest > 1:
        lines.append(
            f"No 1-device run: speedups are relative to {_dev(smallest)}, and whether "
            f"{_dev(smallest)} beat one is not measured."
        )
    limit = rec.device_limit
    above = sorted({n for g in groups for n in g.measured if limit is not None and n > limit})
    if above:
        lines.append(
            f"Also measured at {', '.join(map(str, above))} devices, above the limit of "
            f"{rec.device_limit} (--max-devices or the machine's devices): shown, not recommended."
        )
    if rec.platform_note:
        lines.append(rec.platform_note[0].upper() + rec.platform_note[1:] + ".")
    far = sorted(
        {
            (g.config, max(g.measured))
            for g in groups
            for r in g.rows
            if r.predicted and r.devices > 2 * max(g.measured)
        }
    )
    if far:
        reach = ", ".join(f"'{c}' from {_dev(n)}" if several else f"from {_dev(n)}" for c, n in far)
        lines.append(
            f"Predictions beyond twice the largest measured count ({reach}) are long "
            "extrapolations: the model ignores topology (PCIe switches, sockets, NVLink "
            "islands) and changes in overlap; measure there before relying on them."
        )
    if rec.verdict == "none":
        lines.append("Nothing is recommended: one measured device count.")
    elif rec.predicted:
        lines.append(
            f"The recommended {_dev(rec.devices)} is a PREDICTION: measure it before buying or booking."
        )
    else:
        lines.append("The recommended count was measured.")
    decisive = [s for s in walk if abs(s.marginal_efficiency - rec.min_efficiency) < 0.05]
    if len(decisive) > 2:  # a long walk creeping along the floor: the step that decided
        decisive = [_deciding_step(walk) or decisive[-1]]
    for s in decisive:
        lines.append(
            f"Close call: {s.devices_from} -> {s.devices_to} is {format_fraction_pct(s.marginal_efficiency)} against "
            f"a floor of {format_fraction_pct(rec.min_efficiency)}; a few percent of noise could flip it."
        )


def recommend_from_run(start: StartEvent | None, summary: RunSummary) -> Recommendation | None:
    """What :func:`recommend` says from one run alone (its predictions for other
    device counts rest on this one count); ``None`` while there is not enough to
    say anything (no start, no counted step, no usable timing). Errors other than
    "not enough evidence" (:class:`GpuscaleError`) are bugs and propagate."""
    if start is None or not summary.steps_counted or not summary.step_time_s:
        return None
    from gpuscale.analysis.sweep import point_from_summary

    try:
        return recommend([point_from_summary(summary, start, "live")])
    except GpuscaleError:
        return None
