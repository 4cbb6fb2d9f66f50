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
"""

from __future__ import annotations

import math
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import corpus  # noqa: E402
from gpuscale.analysis.model import fit  # noqa: E402
from gpuscale.analysis.predict import (  # noqa: E402
    BET_RISK,
    DEFAULT_COVERAGE,
    Calibration,
    Stratum,
    anchor_of,
    calibration_to_json,
    interconnect_class,
    load_of,
)

MIN_TABLES = 20
"""Fewest predictions a stratum is learned from."""

SHRINK = 50
"""Pseudo-count pulling a stratum's factor toward 1."""

OUT = Path(__file__).resolve().parent.parent / "gpuscale" / "analysis" / "calibration.json"

Sample = tuple[str, str, str, int, int, float]
"""(fold, class, load, top, predicted count, published / model)"""


def samples(tables: list[dict]) -> list[Sample]:
    out = []
    for t in tables:
        rows = corpus.throughputs(t)
        for fitted, targets in corpus.cases(t):
            pts = corpus.points(t, fitted)
            model = fit(pts)
            klass = interconnect_class(pts[0])
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


def learn(
    tables: list[dict],
    coverage: float = DEFAULT_COVERAGE,
    point: Callable[[list[float]], float] = point_factor,
) -> Calibration:
    """The calibration learned from ``tables``; ``point`` gives a stratum's factor
    from its ratios ``published / predicted`` (:func:`point_factor`; other rules
    are compared by ``benchmarks/prediction_terms.py``)."""
    data = samples(tables)
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
    )


def main() -> int:
    cal = learn(corpus.load_tables())
    OUT.write_text(calibration_to_json(cal), encoding="utf-8")
    for s in cal.strata:
        print(
            f"{s.interconnect:9s} {s.load:7s} {s.top}->{s.devices:<2d} n={s.tables:4d} factor {s.factor:.3f} "
            f"range {s.q_low:+.1%} .. {s.q_high:+.1%}, bet bound {s.bet_bound:+.1%}"
        )
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
