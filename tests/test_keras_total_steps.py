"""The Keras callback's steps say where their ``fit`` is planned to end
(``StepEvent.total_steps``): Keras's steps per epoch times the epochs the fit runs
(from ``initial_epoch``), from where the fit began; a ``fit`` on data of unknown
length and a custom loop say none. In process, real fits of a tiny model, no
recording (the events as the monitor sends them)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.tf


def test_a_fits_steps_say_its_steps_per_epoch_times_the_epochs_it_runs():
    import keras
    import tensorflow as tf

    from gpuscale.events.schema import StepEvent
    from gpuscale.keras.callback import ScalingMonitor

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)], name="planned")
    model.compile("sgd", "mse")
    x, y = tf.random.normal((40, 4), seed=0), tf.zeros((40, 2))
    monitor = ScalingMonitor(record=None, phases=False)
    sent: list = []
    monitor._emit = sent.append

    def totals() -> list:
        said = [e.total_steps for e in sent if isinstance(e, StepEvent)]
        sent.clear()
        return said

    # 5 steps an epoch; from epoch 1 to 4: 3 epochs, 15 steps
    model.fit(x, y, batch_size=8, epochs=4, initial_epoch=1, verbose=0, callbacks=[monitor])
    assert totals() == [15] * 15
    # the same monitor's next fit is a run of its own (outside gpuscale): from 0 again
    model.fit(x, y, batch_size=8, epochs=2, verbose=0, callbacks=[monitor])
    assert totals() == [10] * 10
    # data of unknown length (a filter): Keras knows no steps, nor does the total
    data = tf.data.Dataset.from_tensor_slices((x, y)).filter(lambda a, b: True).batch(8)
    model.fit(data, epochs=1, verbose=0, callbacks=[monitor])
    assert totals() == [None] * 5
