"""A user's script for gpuscale's tests: the samples a ScalingMonitor reports where
Keras's own train step counts them (its loss tracker, reset every epoch and by
validation): data of unknown length with validation, a monitor used again after the
model is compiled again, and a subclassed model fitted before the monitor (its input
shape known only from the trace). Prints one JSON line of the cases' step samples
and probes.

    python train_counts.py
"""

import json

import keras
import tensorflow as tf
from _shared import watched

from gpuscale.events.schema import PhaseEvent, StepEvent
from gpuscale.keras import ScalingMonitor

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
n = 32 * 11 + 8  # 12 steps an epoch: 11 of 32, the last of 8
x = tf.random.normal((n, 8), seed=1)
y = tf.zeros((n,), tf.int32)
loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def sequential() -> keras.Model:
    with strategy.scope():
        model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(3)], name="tiny")
        model.compile("sgd", loss)
    return model


class Sub(keras.Model):
    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(3)

    def call(self, x, training=False):
        return self.dense(x)


def report(events: list) -> dict:
    return {
        "samples": [e.samples for e in events if isinstance(e, StepEvent)],
        "probes": sum(isinstance(e, PhaseEvent) for e in events),
    }


out = {}
# data of unknown length (Keras's params say no steps), with validation every epoch
model = sequential()
data = tf.data.Dataset.from_tensor_slices((x, y)).filter(lambda a, b: True).batch(32)
monitor = ScalingMonitor(record=None, warmup_steps=0, phases=False)
events = watched(monitor)
model.fit(data, epochs=3, verbose=0, validation_data=(x[:50], y[:50]), callbacks=[monitor])
out["unknown_length"] = report(events)
# the same monitor again after compile() (a new loss tracker)
model = sequential()
monitor = ScalingMonitor(record=None, warmup_steps=0, phases=False)
events = watched(monitor)
model.fit(x, y, batch_size=32, epochs=1, verbose=0, callbacks=[monitor])
with strategy.scope():
    model.compile("adam", loss)
del events[:]
model.fit(x, y, batch_size=32, epochs=2, verbose=0, callbacks=[monitor])
out["compiled_again"] = report(events)
# a subclassed model (no keras.Input) fitted before the monitor came
with strategy.scope():
    sub = Sub()
    sub.compile("sgd", loss)
sub.fit(x, y, batch_size=32, epochs=1, verbose=0)
monitor = ScalingMonitor(every=5, record=None, warmup_steps=0)
events = watched(monitor)
sub.fit(x, y, batch_size=32, epochs=2, verbose=0, callbacks=[monitor])
out["subclassed_fitted_before"] = report(events)
print(json.dumps(out))
