"""A split-step probe's halves are scaled to the usual step (imports TensorFlow
through gpuscale.trainer.probe): apply is T(apply) scaled, never a 0 forced by a
split step that ran longer than the usual one."""

from __future__ import annotations

import pytest

# TensorFlow is imported inside the tests (through gpuscale.trainer.probe), never at
# collection: the non-TF tests check that their own process never imports it.
pytestmark = pytest.mark.tf


def test_a_slow_split_step_keeps_its_measured_apply():
    from gpuscale.trainer.probe import ProbeTimes, phase_event, split_to_usual

    # a recording's probe: T(reduce) 1.224 s, T(apply) 0.051 s, the usual step 0.748 s;
    # apply as "usual - T(reduce)" was 0.0
    raw = ProbeTimes(compute_s=1.1, compute_allreduce_s=1.224, allreduce_alone_s=0.004, cost_s=1.2)
    scaled = split_to_usual(raw, 1.224 + 0.051, 0.748)
    event = phase_event(scaled, step=9, step_time_s=0.748, method="split-step")
    assert event.apply_s == pytest.approx(0.051 * 0.748 / 1.275)
    assert event.compute_allreduce_s == pytest.approx(1.224 * 0.748 / 1.275)
    assert event.compute_allreduce_s + event.apply_s == pytest.approx(0.748)
    assert event.compute_s == 1.1  # the compute pass, timed on its own, as measured
    assert scaled.cost_s == raw.cost_s


def test_one_replica_scales_its_first_half():
    from gpuscale.trainer.probe import ProbeTimes, phase_event, split_to_usual

    raw = ProbeTimes(compute_s=0.03, compute_allreduce_s=None, allreduce_alone_s=None, cost_s=0.0)
    event = phase_event(split_to_usual(raw, 0.04, 0.036), step=3, step_time_s=0.036)
    assert event.compute_s == pytest.approx(0.027)
    assert event.apply_s == pytest.approx(0.009)
    assert split_to_usual(raw, 0.0, 0.036) == raw
