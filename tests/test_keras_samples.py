"""The Keras callback's sample count: read every few steps, not every step, and still
exact at every read (a short batch shows on the next read)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.tf


def _monitor():
    """A ScalingMonitor whose sample counter is a list's first item (the total so
    far), and the values it read."""
    from gpuscale.keras.callback import ScalingMonitor

    monitor = ScalingMonitor(record=None)
    total = [0]
    reads: list[int] = []

    def seen() -> int:
        reads.append(total[0])
        return total[0]

    monitor._samples_seen = seen  # the counter stands in for the strategy's variable
    monitor._last_samples = 0
    return monitor, total, reads


def test_uniform_batches_read_every_few_steps_report_each_step():
    from gpuscale.keras.callback import SAMPLES_READ_EVERY

    monitor, total, reads = _monitor()
    reported = []
    for _ in range(3 * SAMPLES_READ_EVERY):
        total[0] += 32
        reported.append(monitor._step_samples(1))
    assert reported == [32] * len(reported)
    assert len(reads) == 3  # the first step, then every SAMPLES_READ_EVERY steps


def test_a_short_batch_shows_on_the_next_read_and_the_sum_is_exact():
    from gpuscale.keras.callback import SAMPLES_READ_EVERY

    monitor, total, _reads = _monitor()
    batches = [32] * 5 + [4] + [32] * (2 * SAMPLES_READ_EVERY)  # a short batch mid-run
    reported = []
    for i, batch in enumerate(batches):
        total[0] += batch
        reported.append(monitor._step_samples(1, last_of_epoch=i == len(batches) - 1))
    assert reported[5] == 32  # not read there: the usual batch
    assert reported[SAMPLES_READ_EVERY] == 32 - 28  # the next read owns up
    assert set(reported[SAMPLES_READ_EVERY + 1 :]) == {32}  # and the usual batch goes on
    assert sum(reported) == sum(batches)  # exact at the epoch's last step


def test_several_steps_per_call_report_per_step():
    monitor, total, _reads = _monitor()
    reported = []
    for i in range(12):
        total[0] += 2 * 32
        reported.append(monitor._step_samples(2, last_of_epoch=i == 11))
    assert reported == [32] * 12
    assert sum(r * 2 for r in reported) == total[0]
