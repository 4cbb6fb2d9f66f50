"""A user's script for gpuscale's tests: one ScalingMonitor given to the fits of two
models, as in a notebook: first a model with a ``train_step`` of its own (gpuscale
counts its samples in a variable of its own) and two hidden layers, then a smaller
model of another input shape that was fitted before without gpuscale (Keras's loss
tracker counts its samples). Prints one JSON line: for each monitored fit, its
steps' samples and, for each phase probe, the gradient tensors it exchanged and
the per-replica input shape it ran.

    python train_reuse.py
"""

import json

import keras
import tensorflow as tf
from _shared import OwnStep, watched

from gpuscale.events.schema import PhaseEvent, StepEvent
from gpuscale.keras import ScalingMonitor

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
n = 32 * 11 + 8  # 12 steps an epoch: 11 of 32, the last of 8
y = tf.zeros((n,), tf.int32)
loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


with strategy.scope():
    inputs = keras.Input((8,))
    hidden = keras.layers.Dense(16, activation="relu")(inputs)
    first = OwnStep(inputs, keras.layers.Dense(3)(hidden), name="first")  # 4 tensors
    first.compile("sgd", loss)
    second = keras.Sequential([keras.Input((5,)), keras.layers.Dense(3)], name="second")
    second.compile("sgd", loss)  # 2 tensors
x8 = tf.random.normal((n, 8), seed=1)
x5 = tf.random.normal((n, 5), seed=2)
second.fit(x5, y, batch_size=32, epochs=1, verbose=0)  # built before the monitor came

monitor = ScalingMonitor(every=5, record=None, warmup_steps=0)
events = watched(monitor)
out = {}
for model, x in ((first, x8), (second, x5)):
    del events[:]
    model.fit(x, y, batch_size=32, epochs=1, verbose=0, callbacks=[monitor])
    out[model.name] = {
        "samples": [e.samples for e in events if isinstance(e, StepEvent)],
        "probe_tensors": [e.num_tensors for e in events if isinstance(e, PhaseEvent)],
        "probe_input": [list(t.shape) for t in tf.nest.flatten(monitor._probe_batch)],
        "warnings": [
            getattr(e, "message", "") for e in events if getattr(e, "level", "") == "warning"
        ],
    }
print(json.dumps(out))
