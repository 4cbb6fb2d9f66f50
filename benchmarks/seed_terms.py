"""Point models tried for the exchanges the published corpus does not cover
(gather, host), on the only evidence there is: the seed tables' gather and host
series (:func:`benchmarks.calibrate.seed_series`: 5 series from 2 origin
documents), leaving one document out for whatever a term learns. The figures are
written up in :mod:`gpuscale.analysis.model` ("terms tried").

Every series is fitted on its 1, 2 (and 1, 2, 4) rows as the shipped model fits
step times, ``t(N) = compute(N) + beta V(N)`` (compute ``c0`` for weak scaling,
``p / N`` for strong; non-negative least squares on relative error), anchored at
the largest fitted count, and predicts its larger measured counts. The terms:

* ``shipped``: ``V`` as the model has it (gather ``N - 1``, host ``N``);
* ``ring-like``: ``V = 2 (N - 1) / N`` for both (nothing learned);
* ``power``: ``V = v(N) ** g`` with ``g`` (0 to 1 by 0.05) learned on the other
  document, minimising the median ``|log(published / predicted)|``;
* ``factor``: the shipped model times ``exp(median log(published / predicted))``
  of the other document's predictions of the same step (``top -> N``; none: 1).

Printed per term: each prediction's error ``predicted / published - 1``, then the
median and max ``|error|`` from 1, 2 (the seed line of ``benchmarks/prediction.py``)
and over both fitted sets.

Run: ``python benchmarks/seed_terms.py``.
"""

from __future__ import annotations

import math
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import calibrate, corpus  # noqa: E402
from gpuscale.analysis import metrics  # noqa: E402
from gpuscale.analysis.model import nnls  # noqa: E402

Volume = Callable[[str, int], float]
Case = tuple[str, str, tuple[int, ...], int, float, float]
"""(document, label, fitted counts, predicted count, published, predicted)"""

GRID = [i / 20 for i in range(21)]


def shipped_volume(exchange: str, n: int) -> float:
    return metrics.link_volume_factor(exchange, n)


def ring_like(exchange: str, n: int) -> float:
    return metrics.ring_volume_factor(n)


def power(g: float) -> Volume:
    return lambda exchange, n: shipped_volume(exchange, n) ** g


def _columns(exchange: str, scaling: str, volume: Volume, n: int) -> tuple[float, float]:
    """The compute and exchange columns of ``t(N)`` at ``n`` devices."""
    compute = 1.0 / n if scaling == "strong" else 1.0
    return compute, (volume(exchange, n) if n > 1 or exchange == "host" else 0.0)


def predictions(series: list[calibrate.Series], volume: Volume) -> list[Case]:
    out = []
    for document, label, pts in series:
        exchange, scaling = pts[0].exchange_kind, pts[0].scaling
        counts = sorted({p.devices for p in pts})
        step = {
            n: statistics.median(p.step_time_s or 0.0 for p in pts if p.devices == n)
            for n in counts
        }
        batch = {p.devices: p.global_batch or 1 for p in pts}
        for fit_on in corpus.FIT_SETS:
            if not all(n in step for n in fit_on):
                continue
            cols = {n: _columns(exchange, scaling, volume, n) for n in counts}
            a, b = nnls(
                [[cols[n][0] for n in fit_on], [cols[n][1] for n in fit_on]],
                [step[n] for n in fit_on],
            )
            modelled = {n: batch[n] / (a * cols[n][0] + b * cols[n][1]) for n in counts}
            top = max(fit_on)
            anchor = (batch[top] / step[top]) / modelled[top]
            for n in (c for c in counts if c > top):
                out.append((document, label, fit_on, n, batch[n] / step[n], modelled[n] * anchor))
    return out


def log_error(c: Case) -> float:
    return abs(math.log(c[4] / c[5]))


def leave_one_out(
    series: list[calibrate.Series],
    term: Callable[[list[calibrate.Series]], Callable[[list[calibrate.Series]], list[Case]]],
) -> list[Case]:
    """``term(training series)`` gives the predictor for the held-out series."""
    out = []
    for document in sorted({s[0] for s in series}):
        train = [s for s in series if s[0] != document]
        test = [s for s in series if s[0] == document]
        out += term(train)(test)
    return out


def fixed(volume: Volume):
    return lambda train: lambda test: predictions(test, volume)


def learned_power(train: list[calibrate.Series]):
    g = min(
        GRID, key=lambda g: statistics.median(log_error(c) for c in predictions(train, power(g)))
    )
    return lambda test: predictions(test, power(g))


def learned_factor(train: list[calibrate.Series]):
    by_step: dict[tuple[int, int], list[float]] = {}
    for c in predictions(train, shipped_volume):
        by_step.setdefault((max(c[2]), c[3]), []).append(math.log(c[4] / c[5]))

    def predict(test: list[calibrate.Series]) -> list[Case]:
        out = []
        for c in predictions(test, shipped_volume):
            logs = by_step.get((max(c[2]), c[3]))
            factor = math.exp(statistics.median(logs)) if logs else 1.0
            out.append((*c[:5], c[5] * factor))
        return out

    return predict


def summary(cases: list[Case]) -> str:
    errors = [abs(c[5] / c[4] - 1) for c in cases]
    return f"median {statistics.median(errors):.1%}, max {max(errors):.1%} ({len(cases)})"


def main() -> int:
    series = calibrate.seed_series()
    terms = {
        "shipped": fixed(shipped_volume),
        "ring-like": fixed(ring_like),
        "power (g learned)": learned_power,
        "factor (learned)": learned_factor,
    }
    for name, term in terms.items():
        cases = leave_one_out(series, term)
        print(f"{name}:")
        for c in cases:
            print(f"  {c[1]} {c[3]} from {','.join(map(str, c[2]))}: {c[5] / c[4] - 1:+.0%}")
        from12 = [c for c in cases if c[2] == (1, 2)]
        print(f"  from 1,2: {summary(from12)}; all: {summary(cases)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
