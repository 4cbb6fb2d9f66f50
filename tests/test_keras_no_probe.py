"""A fit whose probe cannot run (no ``tf.distribute`` strategy, or a probe that failed)
stops asking the schedule at every step: the schedule, which never sees a probe, is
due at every step, and asking it and the probe cost 2-3 us a step (warm) for nothing."""

from __future__ import annotations

import numpy as np


def _fit_counting(monkeypatch, fits: int = 2):
    import keras

    from gpuscale.keras.callback import ScalingMonitor

    monitor = ScalingMonitor(record=None, name="no-strategy", batch_size=8)
    monitor._emit = lambda event: None
    asked, probes = [], []
    due = monitor.schedule.due
    monkeypatch.setattr(monitor.schedule, "due", lambda: asked.append(1) or due())
    run_probe = monitor._run_probe
    monkeypatch.setattr(monitor, "_run_probe", lambda s: probes.append(1) or run_probe(s))
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile("sgd", "mse")
    x, y = np.zeros((8 * 40, 4), "float32"), np.zeros((8 * 40, 2), "float32")
    per_fit = []
    for _ in range(fits):
        before = (len(asked), len(probes))
        model.fit(x, y, batch_size=8, epochs=1, verbose=0, callbacks=[monitor])
        per_fit.append((len(asked) - before[0], len(probes) - before[1]))
    return monitor, per_fit


def test_without_a_strategy_the_steps_stop_asking_once_no_probe_can_run(monkeypatch):
    monitor, per_fit = _fit_counting(monkeypatch)
    assert monitor.steps_said == 80
    for asked, probes in per_fit:
        assert probes == 1  # tried once a fit (a later fit may bring a strategy)
        assert asked < 20  # until the first due step (after the warm-up), not all 40
    assert monitor._no_probe
