"""The order of a probe's two passes (``PhaseEvent.compute_first``, format 1.7): the
first pass after a training step runs slower, whichever it is, so every median of a
probed timing is balanced over the two orders (:func:`metrics.balanced_median`).

Measured on 2 CPU logical devices (a Keras fit, 4,000-6,000 steps at the 2 % budget):
probes whose compute pass ran first read the exposed all-reduce as 0.00-0.18 ms, those
whose fused pass ran first 0.36-0.68 ms; pooled, the median landed on either cluster
by chance (0.0 in 4 of 5 runs one day, 7.7 % of the step another) while dense probes,
one a step, read 0.15-0.20 ms in both orders."""

from __future__ import annotations

import pytest

from gpuscale.analysis import metrics
from gpuscale.analysis.summary import summarize
from gpuscale.events.schema import PhaseEvent, StartEvent, StepEvent
from gpuscale.trainer.schedule import ProbeScheduler

# the exposed all-reduce of sparse probes, by order (ms), as measured
COMPUTE_FIRST = [0.00, 0.02, -0.03, 0.01, 0.00]
FUSED_FIRST = [0.68, 0.66, 0.70, 0.69]


def _alternating(first: list[float], second: list[float]) -> tuple[list[float], list[bool]]:
    values, orders = [], []
    for i in range(len(first) + len(second)):
        take_first = i % 2 == 0
        values.append((first if take_first else second)[i // 2])
        orders.append(take_first)
    return values, orders


def test_two_orders_are_balanced_not_pooled():
    values, orders = _alternating(COMPUTE_FIRST, FUSED_FIRST)
    pooled = metrics.median(values)
    assert pooled == pytest.approx(0.02)  # one cluster's, by chance of the counts
    b = metrics.balanced_median(values, orders)
    assert b.median == pytest.approx((0.00 + 0.685) / 2)
    # the noise is each value's distance from its own order's median, not the gap
    assert b.halfwidth is not None and b.halfwidth < 0.05
    # pooled, the median's stated half-width is as narrow around the wrong cluster
    assert metrics.median_halfwidth(values) < 0.07
    # an odd order's middle value (0 by construction) is left out of the noise
    assert len(b.residuals) == len(values) - 1 and max(abs(r) for r in b.residuals) < 0.04


def test_the_halfwidth_of_the_balanced_median():
    a, b = [1.0, 2.0, 3.0], [11.0, 12.0, 13.0, 14.0]
    result = metrics.balanced_median(a + b, [True] * 3 + [False] * 4)
    assert result.median == pytest.approx((2.0 + 12.5) / 2)
    # residuals -1 1 (the middle 0 left out) x sqrt(3/2) | -1.5 -0.5 0.5 1.5 x sqrt(4/3)
    residuals = [1.5**0.5] * 2 + [0.5 * (4 / 3) ** 0.5] * 2 + [1.5 * (4 / 3) ** 0.5] * 2
    mad = sorted(residuals)[2:4]
    expected = 1.96 * 1.2533 * 1.4826 * sum(mad) / 2 * (1 / 3 + 1 / 4) ** 0.5 / 2
    assert result.halfwidth == pytest.approx(expected)


@pytest.mark.parametrize(
    "orders",
    [
        [None] * 9,  # recorded before format 1.7, or one replica
        [True] * 9,  # one order only
        [True, False, None, True, False, True, False, True, False],  # one unknown
    ],
)
def test_without_both_orders_twice_it_is_the_plain_median(orders):
    values = [0.1 * i for i in range(9)]
    b = metrics.balanced_median(values, orders)
    assert b.median == metrics.median(values)
    assert b.halfwidth == metrics.median_halfwidth(values)


def test_one_value_of_an_order_balances_the_median_but_not_the_halfwidth():
    values = [0.7, 0.0, 0.01, 0.02]  # the first probe alone ran its fused pass first
    b = metrics.balanced_median(values, [False, True, True, True])
    assert b.median == pytest.approx((0.7 + 0.01) / 2)  # not the compute-first cluster's
    assert b.halfwidth == metrics.median_halfwidth(values)  # no noise of one value


@pytest.mark.parametrize(
    "sizes", [(2, 2), (3, 3), (2, 3), (3, 4), (4, 4), (5, 5), (4, 7), (10, 10)]
)
def test_the_balanced_range_holds_about_as_often_as_it_says(sizes):
    """Normal noise around two order means: the stated 95 % range holds for at least
    84 % of draws even with few probes, as the plain median's does at 6 (its MAD
    taken with each odd order's middle value, 0 by construction, in it and no
    correction for the fitted medians held for 70 % at 3 + 3)."""
    import random

    rng = random.Random(sum(sizes))
    n_a, n_b = sizes
    hits = trials = 0
    for _ in range(4000):
        a = [rng.gauss(0.0, 1.0) for _ in range(n_a)]
        b = [rng.gauss(5.0, 1.0) for _ in range(n_b)]
        result = metrics.balanced_median(a + b, [True] * n_a + [False] * n_b)
        trials += 1
        hits += abs(result.median - 2.5) <= result.halfwidth
    assert hits / trials >= 0.82  # 85 % at 4 + 4 over 20,000 draws


def _run(exposed_ms: list[float], orders: list[bool | None]) -> list:
    step_s, compute_s = 0.0045, 0.0020
    events: list = [
        StartEvent(
            t=0.0,
            gpuscale_version="0",
            host="h",
            pid=1,
            model="m",
            strategy="mirrored",
            num_replicas=2,
            per_replica_batch=32,
            global_batch=64,
            platform="cpu-logical",
        )
    ]
    for step in range(200):
        events.append(StepEvent(t=step * 0.01, step=step, step_time_s=step_s, samples=64))
    for i, (e, first) in enumerate(zip(exposed_ms, orders, strict=True)):
        fused = compute_s + e / 1000
        events.append(
            PhaseEvent(
                t=i * 0.4 + 0.005,
                step=10 + 20 * i,
                step_time_s=step_s,
                compute_s=compute_s,
                allreduce_s=max(0.0, fused - compute_s),
                apply_s=step_s - fused,
                compute_allreduce_s=fused,
                probe_cost_s=0.006,
                method="callback-probe",
                compute_first=first,
            )
        )
    return events


def test_a_runs_exposed_all_reduce_is_balanced_over_the_orders():
    values, orders = _alternating(COMPUTE_FIRST, FUSED_FIRST)
    s = summarize(_run(values, orders))
    assert s.phase_steps == 9
    assert s.allreduce_s == pytest.approx(0.000_342_5)
    assert s.allreduce_err_s is not None and s.allreduce_err_s < 0.000_05
    assert s.apply_s == pytest.approx(0.0045 - 0.0020 - 0.000_342_5)
    # a recording before format 1.7 (no order) reads as it did: the pooled median
    old = summarize(_run(values, [None] * len(values)))
    assert old.allreduce_s == pytest.approx(0.000_02)


def test_the_phases_are_judged_on_the_balanced_exposed_all_reduce():
    """Compute-first probes reading the exposed part below 0 and fused-first ones above
    it (a review's case): the pooled median, -0.6 ms, made compute alone 'longer than
    compute + all-reduce, beyond their noise' and the whole breakdown not resolved,
    beside a balanced all-reduce of +0.5 ms."""
    values, orders = _alternating([-0.60, -0.62, -0.58, -0.61, -0.59], [1.60, 1.62, 1.58, 1.61])
    s = summarize(_run(values, orders))
    assert s.allreduce_s == pytest.approx(0.000_502_5)
    assert s.unsplit_why is None and s.phase_consistent is not False


def test_the_scheduler_knows_a_two_order_share_as_well_as_the_summary_does():
    values, orders = _alternating(COMPUTE_FIRST, FUSED_FIRST)
    schedule = ProbeScheduler(0.02)
    for share, first in zip(values, orders, strict=True):
        phases = PhaseEvent(
            t=0.0,
            step=1,
            step_time_s=1.0,
            compute_s=0.5,
            allreduce_s=0.0,
            apply_s=0.5,
            compute_first=first,
        )
        schedule.add_probe(0.001, share / 4.5, phases=phases)
    # the half-width of the balanced median, as the summary states it
    balanced = metrics.balanced_median([v / 4.5 for v in values], orders)
    assert schedule.share_halfwidth == pytest.approx(balanced.halfwidth)
    assert schedule.share_halfwidth != pytest.approx(
        metrics.median_halfwidth([v / 4.5 for v in values])
    )
