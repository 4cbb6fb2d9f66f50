"""A user's script for gpuscale's tests: one model trained by several ``fit``
calls, as in a notebook: first without gpuscale, then with a ScalingMonitor (two
epochs whose last batch is short), then with a second ScalingMonitor; then a model
with a ``train_step`` of its own (which does not update Keras's loss tracker), with
a monitor. Prints one JSON line: for each monitored fit, the samples of its steps,
the steps it probed after, the probes and replicas its scheduler was given, and
whether Keras's train function was built again for it.

    python train_refit.py
"""

import json

import keras
import tensorflow as tf
from _shared import OwnStep

from gpuscale.events.schema import PhaseEvent, StepEvent
from gpuscale.keras import ScalingMonitor

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
    model = keras.Sequential(
        [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(3)],
        name="tiny",
    )
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
n = 32 * 11 + 8  # 12 steps an epoch: 11 of 32, the last of 8
x = tf.random.normal((n, 8), seed=1)
y = tf.zeros((n,), tf.int32)


with strategy.scope():
    inputs = keras.Input((8,))
    own = OwnStep(inputs, keras.layers.Dense(3)(inputs))
    own.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))


def fit(monitor: ScalingMonitor | None, model=model) -> dict:
    before = model.train_function
    events: list = []
    if monitor is not None:
        emit = monitor._emit

        def keep(event):
            events.append(event)
            emit(event)

        monitor._emit = keep
    model.fit(x, y, batch_size=32, epochs=2, verbose=0, callbacks=[monitor] if monitor else [])
    return {
        "samples": [e.samples for e in events if isinstance(e, StepEvent)],
        "probed_after": [e.step for e in events if isinstance(e, PhaseEvent)],
        # what its probe scheduler judges the breakdown on (as the summary will)
        "scheduled_phases": len(monitor.schedule._phases) if monitor else 0,
        "replicas": monitor.schedule.replicas if monitor else 0,
        "built_again": before is not None and model.train_function is not before,
    }


fit(None)  # Keras builds its train function without gpuscale's count
first = fit(ScalingMonitor(every=5, record=None, warmup_steps=0))
second = fit(ScalingMonitor(every=5, record=None, warmup_steps=0))
own_fit = fit(ScalingMonitor(every=5, record=None, warmup_steps=0), own)
print(json.dumps({"first": first, "second": second, "own": own_fit}))
