"""Learn the prediction calibration (``gpuscale/analysis/calibration.json``)
from the published scaling corpus: the interconnect-class factors and the
split-conformal range quantiles of :mod:`gpuscale.analysis.predict`.

For every table and fitted set (:data:`benchmarks.corpus.FIT_SETS`), the bare
model (:func:`gpuscale.analysis.model.fit`), anchored at the largest fitted count
(:func:`gpuscale.analysis.predict.anchor_of`), predicts each larger published count.
Per stratum ``(interconnect class, largest fitted count, predicted count)`` and
pooled over classes (``*``):

* ``factor = exp(median(log(published / predicted)) x n / (n + SHRINK))``: the
  median log ratio shrunk toward 1 by the stratum's size ``n`` (a stratum of 28
  tables from three machines should not move a prediction by 20 %), and
* ``q_low``/``q_high``: the conformal quantiles of ``published / (predicted x
  factor) - 1`` at ``(1 -/+ coverage) / 2`` with the ``(n + 1)`` finite-sample
  correction, and ``q_bet``, the one-sided lower quantile at
  :data:`gpuscale.analysis.predict.BET_RISK` that a recommended predicted count
  must clear. (Honest coverage is what ``benchmarks/prediction.py`` measures: it
  learns all of this without the source it checks.)

Strata with fewer than :data:`MIN_TABLES` predictions are left out (lookups fall
back to the pooled stratum). Run ``python benchmarks/calibrate.py`` to rewrite the
file; ``benchmarks/prediction.py`` calls :func:`learn` per cross-validation fold.

Exchanges the corpus does not cover (gather, host: every corpus table is a ring)
get their range from the only evidence there is, the seed tables of
``sample_runs/`` (:func:`learn_seeds`, :class:`gpuscale.analysis.predict.SeedRange`):
the same fitted sets predict their larger measured counts, and the residuals per
doubling ``log(published / predicted) / log2(N / top)`` give the range, as
conformal quantiles from :data:`gpuscale.analysis.predict.MIN_FOR_COVERAGE`
predictions on, below that their full spread with no stated coverage (a guess),
and a bet bound only from :data:`gpuscale.analysis.predict.MIN_FOR_BET` on. How
such ranges hold is checked leaving one origin document out (a document's tables
never calibrate their own range) and written beside them (``held_out``).
"""

from __future__ import annotations

import math
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import corpus  # noqa: E402
from gpuscale.analysis.model import fit  # noqa: E402
from gpuscale.analysis.predict import (  # noqa: E402
    BET_RISK,
    DEFAULT_COVERAGE,
    MIN_FOR_BET,
    MIN_FOR_COVERAGE,
    UNCOVERED_EXCHANGES,
    Calibration,
    SeedRange,
    Stratum,
    anchor_of,
    calibration_to_json,
    link_class,
    load_of,
    uncovered,
)
from gpuscale.analysis.sweep import SweepPoint, read_sweep_file  # noqa: E402

MIN_TABLES = 20
"""Fewest predictions a stratum is learned from."""

SHRINK = 50
"""Pseudo-count pulling a stratum's factor toward 1."""

OUT = Path(__file__).resolve().parent.parent / "gpuscale" / "analysis" / "calibration.json"

SAMPLES = Path(__file__).resolve().parent.parent / "sample_runs"
"""Where the seed tables are (``seedDDD_*.json``: DDD is the origin document)."""

Sample = tuple[str, str, str, int, int, float]
"""(fold, class, load, top, predicted count, published / model)"""

GROWTH_CLASSES = ("nvlink",)
"""Interconnect classes whose ring growth (:attr:`gpuscale.analysis.model.ScalingModel.ring_growth`)
is learned: NVLink meshes without a switch, where more GPUs bring more links into
the exchange (:mod:`gpuscale.analysis.model`). Every other class keeps the ring's
``2 (N - 1) / N``: the exponent the corpus would give them differs in sign between
its sources (``python benchmarks/prediction_terms.py``, the model's docstring)."""

GROWTH_GRID = [i / 100 for i in range(151)]
"""Exponents tried (0 to 1.5): 0 is an exchange that does not grow past 2 devices."""


def ring_growth(tables: list[dict]) -> dict[str, float]:
    """The ring growth exponent per class of :data:`GROWTH_CLASSES`: the one that
    minimizes ``sum |log(published / predicted)|`` over the class's predictions
    from 1 and 2 GPUs whose exchange is visible there (at least 5 % of the 2-GPU
    step: a light one says nothing of its growth). From 1 and 2 counts the fit
    does not depend on the exponent (``v(1) = 0``, ``v(2) = 1``), so each table is
    fitted once and its predictions re-evaluated per exponent."""
    out: dict[str, float] = {}
    for klass in GROWTH_CLASSES:
        cases = []
        for t in tables:
            rows = corpus.throughputs(t)
            for fitted, targets in corpus.cases(t):
                pts = corpus.points(t, fitted)
                if fitted != (1, 2) or link_class(pts) != klass:
                    continue
                model = fit(pts)
                if load_of(model, 2) != "light":
                    cases.extend((model, n, rows[n]) for n in targets)
        if not cases:
            continue

        def loss(g: float, cases: list = cases) -> float:
            return math.fsum(
                abs(math.log(x / msgspec.structs.replace(m, ring_growth=g).throughput(n)))
                for m, n, x in cases
            )

        out[klass] = min(GROWTH_GRID, key=lambda g: (loss(g), abs(g - 1)))
    return out


def samples(tables: list[dict], growth: dict[str, float] | None = None) -> list[Sample]:
    """Every corpus prediction's ratio ``published / predicted``, fitted with
    ``growth`` (the ring growth per class, :func:`ring_growth`)."""
    growth = growth or {}
    out = []
    for t in tables:
        rows = corpus.throughputs(t)
        for fitted, targets in corpus.cases(t):
            pts = corpus.points(t, fitted)
            klass = link_class(pts)
            model = fit(pts, ring_growth=growth.get(klass, 1.0))
            top = max(fitted)
            load = load_of(model, top)
            anchor = anchor_of(model, top, rows[top])
            for n in targets:
                predicted = model.throughput(n) * anchor
                out.append((corpus.fold_of(t), klass, load, top, n, rows[n] / predicted))
    return out


def conformal(residuals: list[float], coverage: float) -> tuple[float, float]:
    """Equal-tailed split-conformal quantiles (``(n + 1)`` correction)."""
    r = sorted(residuals)
    n = len(r)
    tail = (1 - coverage) / 2
    lo = max(0, math.floor(tail * (n + 1)) - 1)
    hi = min(n - 1, math.ceil((1 - tail) * (n + 1)) - 1)
    return r[lo], r[hi]


def lower_bound(residuals: list[float], risk: float) -> float:
    """The one-sided split-conformal lower quantile at ``risk`` (``(n + 1)``
    correction; the smallest residual when the stratum is too small for it)."""
    r = sorted(residuals)
    return r[max(0, math.floor(risk * (len(r) + 1)) - 1)]


def point_factor(ratios: list[float]) -> float:
    """``exp(median(log(ratios)) x n / (n + SHRINK))``: a stratum's shift of the
    point, the median log ratio ``published / predicted`` shrunk toward 1 by size."""
    shrink = len(ratios) / (len(ratios) + SHRINK)
    return math.exp(statistics.median(math.log(r) for r in ratios) * shrink)


Series = tuple[str, str, list[SweepPoint]]
"""(origin document, label, measured points of one configuration)"""


def seed_series(root: Path = SAMPLES) -> list[Series]:
    """Every configuration of the seed tables whose exchange the corpus does not
    cover, with its origin document (``seed000_m60.json`` -> ``000``)."""
    out = []
    for path in sorted(root.glob("seed*_*.json")):
        document = path.name[len("seed") :].split("_", 1)[0]
        by_config: dict[str, list[SweepPoint]] = defaultdict(list)
        for p in read_sweep_file(path).points:
            by_config[p.config].append(p)
        for config, pts in sorted(by_config.items()):
            if uncovered(pts[0]):
                out.append((document, f"{path.name}: {config}", pts))
    return out


SeedSample = tuple[str, int, int, float]
"""(origin document, top, predicted count, log(published / predicted) per doubling)"""


def seed_samples(series: list[Series]) -> list[SeedSample]:
    """The bare model's (anchored, no factor: as :mod:`gpuscale.analysis.predict`
    predicts these exchanges) residuals per doubling over every fitted set."""
    out = []
    for document, _label, pts in series:
        counts = {p.devices for p in pts}
        measured = {
            n: statistics.median(p.throughput or 0.0 for p in pts if p.devices == n) for n in counts
        }
        for fit_on in corpus.FIT_SETS:
            if not all(n in counts for n in fit_on):
                continue
            model = fit([p for p in pts if p.devices in fit_on])
            top = max(fit_on)
            anchor = anchor_of(model, top, measured[top])
            for n in sorted(c for c in counts if c > top):
                predicted = model.throughput(n) * anchor
                per_doubling = math.log(measured[n] / predicted) / math.log2(n / top)
                out.append((document, top, n, per_doubling))
    return out


def seed_range(samples: list[SeedSample], coverage: float = DEFAULT_COVERAGE) -> SeedRange | None:
    """The range learned from ``samples`` (``None`` without any): conformal
    quantiles with a stated coverage from :data:`MIN_FOR_COVERAGE` samples,
    else the full spread with none (a guess); a bet bound from :data:`MIN_FOR_BET`."""
    if not samples:
        return None
    r = [s[3] for s in samples]
    if len(r) >= MIN_FOR_COVERAGE:
        lo, hi = conformal(r, coverage)
        stated: float | None = coverage
    else:
        lo, hi, stated = min(r), max(r), None
    return SeedRange(
        exchanges=list(UNCOVERED_EXCHANGES),
        series=0,
        documents=len({s[0] for s in samples}),
        predictions=len(r),
        low_per_doubling=round(min(lo, 0.0), 4),
        high_per_doubling=round(max(hi, 0.0), 4),
        bet_per_doubling=round(lower_bound(r, BET_RISK), 4) if len(r) >= MIN_FOR_BET else None,
        coverage=stated,
    )


def learn_seeds(
    series: list[Series] | None = None, leave_out: str | None = None
) -> SeedRange | None:
    """The seed range from ``series`` (the seed tables when ``None``) without the
    document ``leave_out``; with none left out, also how ranges learned without
    each document held on that document's predictions (``held_out``)."""
    series = seed_series() if series is None else series
    kept = [s for s in series if s[0] != leave_out]
    learned = seed_range(seed_samples(kept))
    if learned is None:
        return None
    learned.series = len(kept)
    if leave_out is None:
        held = total = 0
        for document in sorted({s[0] for s in series}):
            other = seed_range(seed_samples([s for s in series if s[0] != document]))
            mine = seed_samples([s for s in series if s[0] == document])
            total += len(mine)
            if other is not None:
                held += sum(other.low_per_doubling <= s[3] <= other.high_per_doubling for s in mine)
        learned.held_out = f"which held for {held} of {total} when learned without their document"
    return learned


def learn(
    tables: list[dict],
    coverage: float = DEFAULT_COVERAGE,
    point: Callable[[list[float]], float] = point_factor,
    seeds: SeedRange | None | bool = True,
) -> Calibration:
    """The calibration learned from ``tables``; ``point`` gives a stratum's factor
    from its ratios ``published / predicted`` (:func:`point_factor`; other rules
    are compared by ``benchmarks/prediction_terms.py``)."""
    growth = ring_growth(tables)
    data = samples(tables, growth)
    keyed: dict[tuple[str, str, int, int], list[Sample]] = defaultdict(list)
    for s in data:
        for klass in (s[1], "*"):
            for load in (s[2], "*"):
                keyed[(klass, load, s[3], s[4])].append(s)
    strata = []
    for (klass, load, top, n), ss in sorted(keyed.items()):
        if len(ss) < MIN_TABLES:
            continue
        factor = point([s[5] for s in ss])
        residuals = [s[5] / factor - 1 for s in ss]
        q_low, q_high = conformal(residuals, coverage)
        q_bet = lower_bound(residuals, BET_RISK)
        strata.append(
            Stratum(
                interconnect=klass,
                load=load,
                top=top,
                devices=n,
                tables=len(ss),
                factor=round(factor, 4),
                q_low=round(q_low, 4),
                q_high=round(q_high, 4),
                q_bet=round(q_bet, 4),
            )
        )
    return Calibration(
        coverage=coverage,
        source="published-scaling.json (532 tables; benchmarks/calibrate.py)",
        strata=strata,
        seeds=learn_seeds() if seeds is True else (seeds or None),
        ring_growth=growth,
    )


def main() -> int:
    cal = learn(corpus.load_tables())
    OUT.write_text(calibration_to_json(cal), encoding="utf-8")
    for s in cal.strata:
        print(
            f"{s.interconnect:9s} {s.load:7s} {s.top}->{s.devices:<2d} n={s.tables:4d} factor {s.factor:.3f} "
            f"range {s.q_low:+.1%} .. {s.q_high:+.1%}, bet bound {s.bet_bound:+.1%}"
        )
    for klass, g in cal.ring_growth.items():
        print(f"{klass}: the ring's exchange grows as (2(N-1)/N)^{g:g}")
    if cal.seeds is not None:
        sd = cal.seeds
        print(
            f"{'/'.join(sd.exchanges)}: {sd.predictions} seed predictions of {sd.series} series "
            f"from {sd.documents} documents, range per doubling {math.expm1(sd.low_per_doubling):+.1%} "
            f".. {math.expm1(sd.high_per_doubling):+.1%}, "
            + ("a guess" if sd.coverage is None else f"{sd.coverage:.0%}")
            + (", no bet bound" if sd.bet_per_doubling is None else "")
            + f"; {sd.held_out}"
        )
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
