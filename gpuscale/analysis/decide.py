"""Decide: the device count and configuration to recommend, from measured and
predicted points (the third step of fit -> predict -> decide -> explain).

The rule (:func:`choose_devices`): walk the device counts upward and accept each
next count only while its *marginal efficiency* against the last accepted count
stays at or above the floor::

    marginal efficiency(N1 -> N2) = (X(N2) / X(N1)) ** (1 / log2(N2 / N1)) / 2

(the throughput gain per doubling, halved: 1.0 when doubling the devices doubles
the samples per second). The answer is the last accepted count.

More devices must also gain: whatever the floor asked for, a step is accepted
only when it adds at least :data:`MIN_GAIN_PER_DOUBLING` (4 %) samples per
second per doubling, a marginal efficiency of at least :data:`GAIN_FLOOR`
(52 %; :func:`effective_floor`). A marginal efficiency of 50 % is no gain at
all (1.00x the samples/s), so a ``--min-efficiency`` of 0.5 or below would
otherwise call adding devices that do nothing, or that slow training down, worth
it; the margin keeps a gain within measurement noise from counting as one. At
the default floor it never binds.

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

Deciding with the range: a predicted count is accepted only when its *bet
bound* (``throughput_safe``, :mod:`gpuscale.analysis.predict`: the throughput 95 %
of held-out corpus predictions of its stratum reached, at or below the low end of
its 80 % range) still passes the floor; one that passes on its value but not at
that bound stops the walk and becomes :attr:`Recommendation.measure_next`
("measure N next: predicted X (low-high)"). Why not the 80 % range's low end: a
10 % chance of a wrong bet per predicted step made 15 of 880 recommendations of a
predicted count wrong on the published corpus (grouped cross-validation,
``benchmarks/prediction.py``); at the 5 % bound 4 are.

A predicted count with a range but no bet bound is never bet on: that is an
exchange the corpus does not cover (gather, host), whose range is learned from a
handful of seed tables, too few for a bound at 5 % (:class:`~gpuscale.analysis.predict.SeedRange`).
It stops the walk like one that fails at its bound: "measure N next" when it
passes on its value. (Without any range, as in ``--baseline`` of the prediction
benchmark, the walk decides on the value.)
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Literal

import msgspec

from gpuscale.analysis import metrics
from gpuscale.analysis.cost import Cost
from gpuscale.analysis.model import ScalingModel
from gpuscale.analysis.placement import BetterGpus, gpus_to_use, listed
from gpuscale.analysis.sweep import SweepPoint
from gpuscale.events.schema import Topology
from gpuscale.formatting import format_with_range, plural

DEFAULT_MIN_EFFICIENCY = 0.6
"""Floor on marginal efficiency; see the module docstring for why not 0.7."""


MIN_GAIN_PER_DOUBLING = 0.04
"""Least throughput gain per doubling that counts as one: above the noise of a
median step time (module docstring)."""
GAIN_FLOOR = (1 + MIN_GAIN_PER_DOUBLING) / 2
"""The marginal efficiency of :data:`MIN_GAIN_PER_DOUBLING`: 0.52."""


def effective_floor(min_efficiency: float) -> float:
    """The floor the walk applies: ``max(min_efficiency, GAIN_FLOOR)``, so that a
    step to more devices is worth it only when it gains throughput."""
    return max(min_efficiency, GAIN_FLOOR)


def passes_floor(efficiency: float, floor: float) -> bool:
    """``efficiency >= floor`` up to floating-point rounding (1e-9): a 1.20x gain
    over a doubling is a marginal efficiency of 60 %, and passes a floor of 60 %
    even when the arithmetic gives 0.59999999999."""
    return efficiency >= floor - 1e-9


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
    """Predicted ``to``: the marginal efficiency at its bet bound (``throughput_safe``,
    else the low end of its range)."""
    uncertain: bool = False
    """Predicted ``to`` that passes the floor on its value but not at its bet bound
    (or has no bet bound: :attr:`uncalibrated`): rejected, and worth measuring
    (:attr:`Recommendation.measure_next`)."""
    uncalibrated: bool = False
    """Predicted ``to`` whose range has no bet bound (an exchange the published
    tables do not cover): never accepted; ``uncertain`` when it passes on its value."""
    own_stop: int | None = None
    """Predicted ``to`` beyond the count at which its configuration's own walk stops
    (that count): never accepted, whatever the step from another configuration's
    row gains; ``uncertain`` when the own walk stopped on a step that was (its
    :attr:`own_next` is then what to measure)."""
    own_next: int | None = None
    """With :attr:`own_stop`: the count of ``config_to`` whose measurement would
    settle its own walk (the step it stopped on was not a safe bet)."""


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
    speedup_low: float | None = None
    """A predicted count with a range: :attr:`speedup` at the low end of its
    throughput's range (and ``speedup_high`` at the high end); ``None`` measured."""
    speedup_high: float | None = None
    min_efficiency: float
    """The floor asked for (``--min-efficiency``); the walk applies :attr:`floor`."""
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
    price_per_device_hour: float | None = None
    """The price per device-hour when every priced configuration has the same one
    (``--price-per-device-hour`` or the sweep file's); ``None`` when they differ
    (each :class:`~gpuscale.analysis.cost.Cost` carries its own)."""
    costs: list[Cost] = []
    """With a price: the cost per million samples of every row (:mod:`.cost`)."""
    warnings: list[str] = []
    """What the user should know before trusting the table: runs of one count that
    are more than 15% apart, combined all the same (:func:`.recommend.combine_runs`)."""
    gpus: list[int] | None = None
    """The GPUs to use for the recommended count (``--gpus``) on the machine the runs
    were recorded on: its best-connected ``devices`` by the recordings' topology, as
    ``gpuscale devices`` lists them (:func:`.placement.gpus_to_use`); ``None``
    without a topology, for one device, for every GPU of the machine, off GPUs,
    several workers, and without a recommendation."""
    gpus_note: str | None = None
    """:attr:`gpus` in words, said under the verdict."""
    better_gpus: list[BetterGpus] = []
    """Measured counts whose run used worse-connected GPUs than the machine offers
    (:func:`.placement.worse_placed`), said once under Confidence."""

    @property
    def floor(self) -> float:
        """The floor the walk applied: :func:`effective_floor` of ``min_efficiency``."""
        return effective_floor(self.min_efficiency)

    @property
    def floor_raised(self) -> bool:
        """``min_efficiency`` was below :data:`GAIN_FLOOR`, so the walk used that."""
        return self.floor > self.min_efficiency


class Candidate(msgspec.Struct):
    devices: int
    throughput: float
    config: str
    predicted: bool
    low: float | None = None
    """Predicted: the throughput a bet must still pass at (its ``throughput_safe``,
    else the low end of its range)."""
    high: float | None = None
    bettable: bool = True
    """False for a predicted count with a range but no bet bound (module docstring)."""
    own_stop: int | None = None
    """Predicted: where its configuration's own walk stops, when below this count
    (:func:`beyond_own_walk`); the walk over several configurations never bets past it."""
    own_next: int | None = None
    """With :attr:`own_stop`: the count the own walk stopped at was only not a safe
    bet (it passed on its value), so measuring that count of this configuration
    would settle the answer (:attr:`WalkStep.own_next`)."""


def choose_devices(
    candidates: Sequence[Candidate], floor: float
) -> tuple[Candidate, list[WalkStep]]:
    """The walk (module docstring): candidates sorted by devices, one per count.
    It stops at the first step below the floor: a later count is not judged
    against an earlier one across the gap, because per-doubling efficiency over a
    long jump averages a bad doubling with later ones (a ring's exchange stops
    growing at large N, so 1 -> 8 can average 61 % per doubling while 1 -> 2 alone
    is 33 %). ``floor`` is raised to :func:`effective_floor`: a step must gain."""
    floor = effective_floor(floor)
    ordered = sorted(candidates, key=lambda c: c.devices)
    current = ordered[0]
    steps = []
    for nxt in ordered[1:]:
        eff = metrics.marginal_efficiency(
            current.throughput, current.devices, nxt.throughput, nxt.devices
        )
        eff_low = None
        uncalibrated = nxt.predicted and not nxt.bettable
        if nxt.predicted and nxt.low is not None and not uncalibrated:
            # decide with the range: its bet bound must pass too
            eff_low = metrics.marginal_efficiency(
                current.throughput, current.devices, max(nxt.low, 1e-12), nxt.devices
            )
        ok = (
            passes_floor(eff, floor)
            and not uncalibrated
            and (eff_low is None or passes_floor(eff_low, floor))
        )
        uncertain = passes_floor(eff, floor) and not ok
        # the step from another configuration's row passes, but this configuration's
        # own curve does not reach the count: no bet on it (only then the reason said;
        # a step that fails on its own is said as such)
        beyond = ok and nxt.predicted and nxt.own_stop is not None
        if beyond:
            ok, uncertain = False, nxt.own_next is not None
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
                uncertain=uncertain,
                uncalibrated=uncalibrated,
                own_stop=nxt.own_stop if beyond else None,
                own_next=nxt.own_next if beyond else None,
            )
        )
        if not ok:
            break
        current = nxt
    return current, steps


class Group(msgspec.Struct):
    config: str
    scaling: str
    points: list[SweepPoint]
    model: ScalingModel
    rows: list[SweepPoint] = []
    measured: dict[int, float] = {}
    """Median measured throughput per device count."""
    runs: list[SweepPoint] = []
    """The measured points before the runs of one count were combined into
    :attr:`points` (each run's own GPUs, :mod:`.placement`)."""


SHARED_CORES_NEXT = (
    "more CPU logical devices only share one machine's cores (they add no cores, and "
    "'gpuscale run' gives no more of them than there are cores), so measuring more "
    "would not tell: GPUs are what the question needs"
)
"""What to measure next said instead of "measure N next" for devices that share one
machine's cores (the model's ``shared_cores``): no count of them would answer it."""

LOCAL_WORKERS_NEXT = (
    "more workers on this machine only share its cores (they add no cores), so "
    "measuring more would not tell: workers on separate machines (a TF_CONFIG "
    "cluster) or GPUs are what the question needs"
)
""":data:`SHARED_CORES_NEXT` for several workers on one machine's CPUs (the
model's ``local_workers``)."""


def shared_cores_next(model: ScalingModel) -> str:
    """What to measure next instead of more devices sharing one machine's cores."""
    return LOCAL_WORKERS_NEXT if model.local_workers else SHARED_CORES_NEXT


def measure_next(
    rec: Recommendation,
    groups: Sequence[Group],
    walk: Sequence[WalkStep],
    topology: Topology | None = None,
) -> str | None:
    """The one run that would change or settle the answer: a predicted count the
    walk rejected only for its bet bound (or for having none), else (one measured count) the
    next count the model predicts, else the count below the only one measured. A
    predicted count of CPU logical devices sharing the cores is never it
    (:data:`SHARED_CORES_NEXT` instead). With the recordings' ``topology``, the GPUs
    to measure it on where there is a choice (:func:`~gpuscale.analysis.placement.gpus_to_use`,
    the rule ``devices`` lists): ``measure 2 on GPUs 0,1 (gpuscale run --gpus 0,1) next``."""
    by_name = {g.config: g for g in groups}

    def on(devices: int, g: Group) -> str:
        use = gpus_to_use(devices, g.points, topology)
        return f" on GPUs {listed(use[0])} (gpuscale run --gpus {listed(use[0])})" if use else ""

    for step in walk:
        if step.uncertain and by_name[step.config_to].model.shared_cores:
            return shared_cores_next(by_name[step.config_to].model)
        if step.uncertain:
            # beyond where its configuration's own walk stops: the count that stop is at
            devices = step.own_next or step.devices_to
            row = row_at(by_name[step.config_to], devices)
            if row is not None:
                # which configuration, where the sweep has several
                which = f" with '{step.config_to}'" if len(groups) > 1 else ""
                which += on(devices, by_name[step.config_to])
                return (
                    f"measure {devices}{which} next: predicted "
                    f"{format_with_range(row.throughput, row.throughput_low, row.throughput_high, ',.0f')} samples/s"
                )
    if rec.verdict != "none":
        return None
    g = by_name[rec.config]
    (n,) = g.measured
    if n > 1:
        return f"measure 1 device next: the baseline that {dev(n)} must beat"
    nxt = [r for r in g.rows if r.predicted and r.devices > n]
    if nxt and g.model.predicts and g.model.shared_cores:
        return shared_cores_next(g.model)
    if nxt and g.model.predicts:
        r = min(nxt, key=lambda row: row.devices)
        return (
            f"measure {r.devices}{on(r.devices, g)} next: predicted "
            f"{format_with_range(r.throughput, r.throughput_low, r.throughput_high, ',.0f')} samples/s"
        )
    return f"measure 2 devices{on(2, g)} next: one count alone has nothing to compare with"


def row_at(g: Group, devices: int) -> SweepPoint | None:
    return next((r for r in g.rows if r.devices == devices), None)


def candidates(g: Group, limit: int | None) -> list[Candidate]:
    """Measured counts up to ``limit``, then predictions beyond the largest
    measured one, the latter only when the model was fitted to 2+ device counts
    (one count says nothing about how the step grows with N: its predictions are
    shown, not used). Measured counts above ``limit`` stay in the table, marked,
    but are not candidates: the user cannot have them."""
    cap = limit if limit is not None else max(g.measured)
    out = [Candidate(n, x, g.config, False) for n, x in g.measured.items() if n <= cap]
    top = max(g.measured)
    if len(g.measured) < 2:
        return out
    out += [
        Candidate(
            r.devices,
            r.throughput or 0.0,
            g.config,
            True,
            r.throughput_safe if r.throughput_safe is not None else r.throughput_low,
            r.throughput_high,
            bettable=r.throughput_low is None or r.throughput_safe is not None,
        )
        for r in g.rows
        if r.predicted and r.devices > top and (limit is None or r.devices <= limit)
    ]
    return out


def walk_config(g: Group, floor: float, limit: int | None) -> ConfigResult:
    cands = candidates(g, limit)
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


def beyond_own_walk(curve: Sequence[Candidate], configs: Sequence[ConfigResult]) -> None:
    """Mark the predicted candidates of ``curve`` (the :func:`envelope`) that lie
    beyond where their configuration's own walk stops (:attr:`Candidate.own_stop`):
    from another configuration's row a step to one can pass (a slower configuration
    measured at 4, a faster one predicted at 8), while its own configuration's
    doubling to it does not, and a recommendation of it would contradict that
    configuration's own answer."""
    by_name = {c.config: c for c in configs}
    for cand in curve:
        own = by_name.get(cand.config)
        if not cand.predicted or own is None or cand.devices <= own.devices:
            continue
        cand.own_stop = own.devices
        # the step the own walk stopped on (its last), where measuring would settle it
        last = own.walk[-1] if own.walk else None
        cand.own_next = (
            last.devices_to if last is not None and not last.accepted and last.uncertain else None
        )


def envelope(groups: Sequence[Group], limit: int | None) -> list[Candidate]:
    """At each count up to ``limit``, the fastest measured configuration (a
    prediction only where nothing was measured at that count)."""
    by_n: dict[int, list[Candidate]] = defaultdict(list)
    for g in groups:
        for c in candidates(g, limit):
            by_n[c.devices].append(c)
    best = []
    for _n, cands in sorted(by_n.items()):
        measured = [c for c in cands if not c.predicted]
        pool = measured or cands
        best.append(max(pool, key=lambda c: c.throughput))
    return best


def dev(n: int) -> str:
    return plural(n, "device")


def table_base(rows: Sequence[SweepPoint]) -> int | None:
    """The device count a configuration's table rows are relative to (their
    ``speedup`` and ``efficiency``): 1 device when measured, else the smallest
    measured count; ``None`` without a measured row."""
    measured = {r.devices for r in rows if not r.predicted}
    if not measured:
        return None
    return 1 if 1 in measured else min(measured)


def own_speedup(rec: Recommendation) -> tuple[str, str] | None:
    """Where the recommendation's speedup is over another configuration (the
    fastest at the smallest count, :attr:`Recommendation.baseline`), the speedup
    its own table shows (with its range where predicted) and that table's
    baseline, e.g. ``("5.07x", "'nccl' on 1 device")``; ``None`` where both are
    the same."""
    rows = [r for r in rec.table if r.config == rec.config]
    row = next((r for r in rows if r.devices == rec.devices), None)
    base = table_base(rows)
    if row is None or row.speedup is None or base is None:
        return None
    text = f"'{rec.config}' on {dev(base)}"
    if len(rec.models) < 2 or text == rec.baseline:
        return None
    return format_with_range(row.speedup, row.speedup_low, row.speedup_high, ".2f", "x"), text


def speedup_text(rec: Recommendation) -> str:
    """``7.88x (6.61\u20138.00x)``: the recommendation's speedup with its range
    where it is predicted, as the table prints it."""
    return format_with_range(rec.speedup, rec.speedup_low, rec.speedup_high, ".2f", "x")


def expected_speedup(rec: Recommendation) -> str | None:
    """The line under the verdict (``recommend`` and the scaling view):
    ``Expected speedup 1.99x over 1 device``, and for a predicted count
    ``Expected speedup 7.88x (6.61\u20138.00x) over 1 device, predicted (80%
    range)``; ``None`` at one device or without an answer."""
    if rec.speedup is None or rec.devices <= 1 or rec.verdict == "none":
        return None
    own = own_speedup(rec)
    also = f" ({own[0]} over {own[1]}, as in its table)" if own else ""
    text = f"Expected speedup {speedup_text(rec)} over {rec.baseline}{also}"
    if rec.predicted:
        row = next(
            (r for r in rec.table if r.config == rec.config and r.devices == rec.devices), None
        )
        if rec.speedup_low is None:
            text += ", predicted"
        elif row is not None and row.coverage is not None:
            text += f", predicted ({row.coverage * 100:.0f}% range)"
        else:
            text += ", predicted (its range a guess)"
    return text
