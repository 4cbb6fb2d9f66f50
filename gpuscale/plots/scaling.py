"""What a scaling chart shows, taken from a
:class:`~gpuscale.analysis.recommend.Recommendation`: no drawing here.

Both drawings (:mod:`gpuscale.plots.terminal` for the terminal and the dashboard,
:mod:`gpuscale.plots.figure` for an SVG or PNG file) read a :class:`ScalingChart`,
so the two always show the same points, ranges and marks.

- Throughput (samples per second, all devices together) against the device count
  on a log2 axis: one series per configuration; measured points, predicted points
  with their range when the prediction has one (``throughput_low``/``_high``).
- The ideal line: the baseline's throughput times ``N / base count`` (linear scaling
  from the fastest configuration at the smallest count, the recommendation's baseline).
- The recommended count, marked.
- One stacked bar per device count of the recommended configuration, as tall as
  its measured step time: compute, exposed all-reduce, apply and input wait (the
  measured phase medians, scaled to add up to that step), or the whole step,
  unsplit, where a count has no phase breakdown (or one that did not add up to
  the step, which is not resolved); no bars at all
  (:data:`NO_SPLIT_NOTE` instead) where no count has one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuscale.analysis import metrics
from gpuscale.analysis.recommend import Recommendation
from gpuscale.analysis.summary import APPLY_WITH_INPUT
from gpuscale.formatting import format_samples_s, plural

PHASES = ("compute", "exposed all-reduce", "apply", "input wait")
"""The parts of a step, in the order the bars stack them (bottom first)."""
NO_SPLIT_NOTE = "no phase breakdown in this input: step times only"
"""Said in place of the bars when no count of the configuration has a breakdown
(a published table): bars of the whole step, unsplit, would tell nothing."""
UNRESOLVED_SPLIT_NOTE = "phases measured but not resolved ({probes}): step times only"
"""Said instead of :data:`NO_SPLIT_NOTE` when the counts were probed but no
breakdown added up to its step (recordings whose probes stayed within their noise)."""
UNRESOLVED_SHORT_NOTE = "phases not resolved: step times only"
""":data:`UNRESOLVED_SPLIT_NOTE` where one line has no room for its probes per count
(the scaling view's chart border at 80 columns): the detail is in its recommendation."""


@dataclass(frozen=True)
class ChartPoint:
    devices: int
    throughput: float
    """Samples per second."""
    predicted: bool
    low: float | None = None
    """Low end of the prediction range (samples/s), when the prediction has one."""
    high: float | None = None

    @property
    def has_range(self) -> bool:
        return self.low is not None and self.high is not None


@dataclass(frozen=True)
class ChartSeries:
    config: str
    points: list[ChartPoint]

    @property
    def measured(self) -> list[ChartPoint]:
        return [p for p in self.points if not p.predicted]

    @property
    def predicted(self) -> list[ChartPoint]:
        return [p for p in self.points if p.predicted]


@dataclass(frozen=True)
class PhaseBar:
    devices: int
    step_time_s: float
    phases_s: tuple[float, float, float, float] | None
    """compute, exposed all-reduce, apply, input wait (seconds per step); ``None``
    when this count has no measured breakdown (predicted, or a typed-in table)."""
    predicted: bool
    probes: int = 0
    """Phase probes behind this count (0: never probed, as a typed-in table)."""
    input_in_apply: bool = False
    """Its apply holds the wait for the batch, not measured apart (a Keras ``fit``
    timed by the callback: :attr:`~gpuscale.analysis.sweep.SweepPoint.input_in_apply`)."""


@dataclass(frozen=True)
class ScalingChart:
    series: list[ChartSeries]
    ideal: list[tuple[int, float]]
    """(devices, samples/s) of linear scaling from the baseline."""
    recommended: ChartPoint
    recommended_config: str
    bars: list[PhaseBar]
    """Of the recommended configuration, by device count."""
    scaling: str
    """``weak`` or ``strong``."""
    coverage: float | None = None
    """Stated coverage of the drawn ranges (e.g. 0.8), when every drawn range has
    the same one (``None`` when one is a guess: the legend says "range")."""
    platform_note: str | None = None
    counts: list[int] = field(default_factory=list)
    """Every device count on the x axis, ascending."""
    decided: bool = True
    """``False`` when nothing is recommended (one measured count): ``recommended``
    is then only the configuration the bars show, and is not marked."""
    measure_next: str | None = None
    """The recommendation's next count to measure, in its words
    (``measure 2 devices next: one count alone has nothing to compare with``)."""

    @property
    def one_count(self) -> bool:
        """One measured point and nothing predicted: a throughput chart would be a
        single dot (and the ideal line through it); :attr:`one_count_note` is said
        instead."""
        points = [p for s in self.series for p in s.points]
        return len(points) == 1 and not points[0].predicted

    @property
    def one_count_note(self) -> str:
        """What is said in place of a throughput chart of one dot
        (:attr:`one_count`): ``One count measured: 1 device, 918 samples/s. A
        scaling curve needs a second: measure 2 devices next.``"""
        point = next(p for s in self.series for p in s.points)
        said = (
            f"One count measured: {plural(point.devices, 'device')}, "
            f"{format_samples_s(point.throughput)}. A scaling curve needs a second"
        )
        if self.measure_next:
            head = self.measure_next.split(":")[0]
            return f"{said}: {head}."
        return f"{said}."

    @property
    def title(self) -> str:
        return f"Throughput vs devices ({self.scaling} scaling)"

    @property
    def has_ranges(self) -> bool:
        return any(p.has_range for s in self.series for p in s.points)

    @property
    def phase_names(self) -> tuple[str | None, ...]:
        """:data:`PHASES` as the legend names them: where the apply of every split bar
        holds the wait for the batch (:attr:`PhaseBar.input_in_apply`), ``apply +
        input`` and no input wait of its own (``None``: not in the legend), as the
        run's summary says it."""
        split = [b for b in self.bars if b.phases_s]
        if split and all(b.input_in_apply for b in split):
            waits = any(b.phases_s and b.phases_s[3] > 0 for b in split)  # a file gave one
            return (*PHASES[:2], APPLY_WITH_INPUT, PHASES[3] if waits else None)
        return PHASES

    @property
    def has_split(self) -> bool:
        """Some count of the recommended configuration has a phase breakdown: the bars
        are drawn (a count without one as its whole step, "not split")."""
        return any(b.phases_s for b in self.bars)

    @property
    def split_note(self) -> str:
        """What is said in place of the bars when there are none (``has_split`` is
        false): probed counts whose phases did not resolve say so, with their probes
        per device count, as the table counts them (:func:`probes_per_count`); an
        input without probes has step times only."""
        probed = self._probed
        if probed:
            return UNRESOLVED_SPLIT_NOTE.format(probes=probes_per_count(probed))
        return NO_SPLIT_NOTE

    @property
    def split_note_short(self) -> str:
        """:attr:`split_note` without the probes per count (:data:`UNRESOLVED_SHORT_NOTE`)."""
        return UNRESOLVED_SHORT_NOTE if self._probed else NO_SPLIT_NOTE

    @property
    def _probed(self) -> list[tuple[int, int]]:
        return [(b.devices, b.probes) for b in self.bars if not b.predicted and b.probes]

    @property
    def several_configs(self) -> bool:
        return len(self.series) > 1


def probes_per_count(probed: list[tuple[int, int]]) -> str:
    """``(devices, probes)`` of the probed counts, said per count as ``recommend``'s
    table says each row's (``not resolved (1 probe)``), never summed across counts
    (the trial read "2 probes" under a table whose 2-device row said "1 probe"):
    ``1 probe at 2 devices``, ``1 probe at each of 1 and 2 devices``, ``3 probes at
    1 device, 5 at 2 devices``."""
    probed = sorted(probed)
    counts = [n for n, _ in probed]
    where = [f"{n} device{'s' if n != 1 else ''}" for n in counts]
    if len(probed) == 1:
        return f"{plural(probed[0][1], 'probe')} at {where[0]}"
    if len({p for _, p in probed}) == 1:
        names = ", ".join(map(str, counts[:-1])) + f" and {counts[-1]}"
        return f"{plural(probed[0][1], 'probe')} at each of {names} devices"
    first = f"{plural(probed[0][1], 'probe')} at {where[0]}"
    rest = [f"{p:,} at {w}" for (_, p), w in zip(probed[1:], where[1:], strict=True)]
    return ", ".join([first, *rest])


def build_scaling_chart(rec: Recommendation) -> ScalingChart:
    """The chart's content from a recommendation's table (measured and predicted rows)."""
    by_config: dict[str, list[ChartPoint]] = {}
    coverages: set[float | None] = set()
    for row in rec.table:
        if row.throughput is None:
            continue
        by_config.setdefault(row.config, []).append(
            ChartPoint(
                devices=row.devices,
                throughput=row.throughput,
                predicted=row.predicted,
                low=row.throughput_low,
                high=row.throughput_high,
            )
        )
        if row.throughput_low is not None:
            coverages.add(row.coverage)
    series = [
        ChartSeries(config, sorted(points, key=lambda p: p.devices))
        for config, points in by_config.items()
    ]
    # one stated coverage for the legend only when every drawn range has it (a
    # guessed range, for an exchange the published tables lack, has none)
    coverage = next(iter(coverages)) if len(coverages) == 1 else None
    counts = sorted({p.devices for s in series for p in s.points})
    base = _baseline(series)
    ideal = [(n, base.throughput * n / base.devices) for n in counts if n >= base.devices]
    chosen = next(
        (p for s in series if s.config == rec.config for p in s.points if p.devices == rec.devices),
        ChartPoint(rec.devices, rec.throughput, rec.predicted),
    )
    bars = [
        PhaseBar(
            devices=row.devices,
            step_time_s=row.step_time_s,
            phases_s=_phases(row),
            predicted=row.predicted,
            probes=(row.probes or 0) if not row.predicted else 0,
            input_in_apply=row.input_in_apply,
        )
        for row in sorted(rec.table, key=lambda r: r.devices)
        if row.config == rec.config and row.step_time_s is not None
    ]
    return ScalingChart(
        series=series,
        ideal=ideal,
        recommended=chosen,
        recommended_config=rec.config,
        bars=bars,
        scaling=rec.scaling,
        coverage=coverage,
        platform_note=rec.platform_note,
        counts=counts,
        decided=rec.verdict != "none",
        measure_next=rec.measure_next,
    )


def _baseline(series: list[ChartSeries]) -> ChartPoint:
    """The fastest measured point at the smallest measured count (predicted points
    only when nothing was measured)."""
    points = [p for s in series for p in s.measured] or [p for s in series for p in s.points]
    smallest = min(p.devices for p in points)
    return max((p for p in points if p.devices == smallest), key=lambda p: p.throughput)


def _phases(row) -> tuple[float, float, float, float] | None:
    """The measured split of the row's step, scaled so the bar is the measured step
    time (the parts' medians add up to it only within their noise; a breakdown that
    does not add up reaches no row: :func:`gpuscale.analysis.sweep.point_from_summary`)."""
    if row.predicted or row.compute_s is None:
        return None
    parts = (row.compute_s, row.allreduce_s or 0.0, row.apply_s or 0.0, row.input_s or 0.0)
    if not row.step_time_s:
        return parts
    compute, exchange, apply, wait = metrics.scaled_parts(parts, row.step_time_s)
    return compute, exchange, apply, wait


def log_ticks(low: float, high: float, *, widen: bool = False) -> list[float]:
    """Round tick values (1, 2, 5 x 10^k) between ``low`` and ``high`` for a log
    axis, at least two: where fewer than two round values fall between, the ends
    themselves. With ``widen`` (the terminal chart, whose axis is drawn from the
    first tick to the last) data spanning less than that gets evenly spaced round
    ticks that hug it (:func:`hugging_ticks`: ``86.2``, ``182`` -> ``50 100 150
    200``; ``900``, ``1300`` -> ``900 1,000 ... 1,300``), not the round values of
    the decades either side (``500 1,000 2,000``, ``5k`` for data around 1k)."""
    import math

    if low <= 0 or high <= 0:
        return [low, high]
    ticks = []
    for exp in range(math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 2):
        for mantissa in (1, 2, 5):
            value = mantissa * 10.0**exp
            if low <= value <= high:
                ticks.append(value)
    if widen and len(ticks) < 3:
        hugging = hugging_ticks(low, high)
        if len(hugging) >= 2:
            return hugging
    if len(ticks) < 2:
        ticks = sorted({low, high, *ticks})
    return ticks


def hugging_ticks(low: float, high: float, most: int = 5) -> list[float]:
    """Evenly spaced round ticks (1, 2, 5 x 10^k apart), the first at or below
    ``low`` and the last at or above ``high``, at most ``most`` of them and as
    close together as that allows; none at or below zero (a log axis). One value
    (``low == high``) gets the round values either side of it."""
    import math

    if high <= low:
        spread = abs(low) * 0.1 or 1.0
        low, high = low - spread, high + spread
    raw = (high - low) / (most - 1)
    exp = 10.0 ** math.floor(math.log10(raw))
    for step in (m * exp for m in (1, 2, 5, 10, 20, 50)):
        first, last = math.floor(low / step + 1e-9), math.ceil(high / step - 1e-9)
        if last - first + 1 <= most:
            return [round(n * step, 12) for n in range(first, last + 1) if n > 0]
    return [low, high]  # not reached: a step of ten times ``raw`` fits


def short_number(value: float) -> str:
    """``37481`` -> ``37k``, ``1500000`` -> ``1.5M``, ``0.5`` -> ``0.5``: tick labels."""
    for divisor, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= divisor:
            scaled = value / divisor
            return f"{scaled:.0f}{suffix}" if scaled >= 10 else f"{scaled:.3g}{suffix}"
    return f"{value:.3g}"


def linear_ticks(high: float, count: int = 4) -> list[float]:
    """Ticks from 0 in round steps (1, 2, 2.5, 5 x 10^k), the last at or above ``high``."""
    import math

    if high <= 0:
        return [0.0, 1.0]
    raw = high / count
    exp = 10.0 ** math.floor(math.log10(raw))
    step = next(m * exp for m in (1, 2, 2.5, 5, 10) if m * exp >= raw)
    return [step * i for i in range(math.ceil(high / step - 1e-9) + 1)]
