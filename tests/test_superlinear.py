"""Superlinear measurements (:func:`gpuscale.analysis.predict.measured_superlinear`):
the best pair of measured counts, found in one pass (a 20,000-count sweep took two
minutes when every pair was tried)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscale.analysis import metrics
from gpuscale.analysis.predict import SUPERLINEAR_EFFICIENCY, measured_superlinear
from gpuscale.analysis.sweep import SweepPoint


def _points(rows: list[tuple[int, float]]) -> list[SweepPoint]:
    return [SweepPoint(devices=n, scaling="weak", throughput=x) for n, x in rows]


def _every_pair(rows: list[tuple[int, float]]) -> float | None:
    per_n: dict[int, list[float]] = {}
    for n, x in rows:
        per_n.setdefault(n, []).append(x)
    x = {n: metrics.median(v) for n, v in per_n.items()}
    effs = [x[b] / x[a] / (b / a) for a in x for b in x if a < b]
    return max(effs) if effs else None


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 64), st.floats(1.0, 1e6, allow_nan=False)),
        max_size=12,
    )
)
def test_the_one_pass_finds_what_every_pair_finds(rows):
    found = measured_superlinear(_points(rows))
    best = _every_pair(rows)
    if best is None or best <= SUPERLINEAR_EFFICIENCY:
        assert found is None
    else:
        assert found is not None and abs(found.efficiency - best) <= 1e-9 * best
        assert found.devices_from < found.devices_to


def test_the_trial_table_names_its_pair():
    found = measured_superlinear(_points([(3, 360.0), (5, 700.0)]))
    assert found is not None and (found.devices_from, found.devices_to) == (3, 5)
    assert found.text() == "117% efficiency from 3 to 5 devices"
    assert measured_superlinear(_points([(1, 100.0), (2, 195.0), (4, 380.0)])) is None
