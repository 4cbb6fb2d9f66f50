"""A user's script for gpuscale's tests: fits on data of unknown length (a
``tf.data`` pipeline with a ``filter``: Keras's params say no steps), the sample
counter's clock frozen (it is read only where it must be: a fit's first step, an
epoch's end, a short batch to pay back). One monitor fits two models, on 3 full
batches, then on 12 whose last is short; a new monitor fits one epoch of those
12, recorded to the file named by the first argument. Prints one JSON line: for
each fit, its steps' samples and after how many of its steps the counter was read.

    python train_unknown_length.py RECORDING
"""

import json
import sys

import keras
import tensorflow as tf

from gpuscale.events.schema import StepEvent
from gpuscale.keras import ScalingMonitor

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def model() -> keras.Model:
    with strategy.scope():
        m = keras.Sequential([keras.Input((8,)), keras.layers.Dense(3)], name="unknown")
        m.compile("sgd", loss)
    return m


def data(n: int) -> tf.data.Dataset:
    x = tf.random.normal((n, 8), seed=1)
    y = tf.zeros((n,), tf.int32)
    return tf.data.Dataset.from_tensor_slices((x, y)).filter(lambda a, b: True).batch(32)


def watched(monitor: ScalingMonitor) -> dict:
    """The monitor's steps' samples and reads, kept in the returned dict (per fit)."""
    seen = {"samples": [], "reads": [], "batches": 0}
    monitor._clock = lambda: 0.0  # frozen: no read is due by time
    emit, read, batch_end = monitor._emit, monitor._samples_seen, monitor.on_train_batch_end

    def keep(event):
        if isinstance(event, StepEvent):
            seen["samples"].append(event.samples)
        emit(event)

    def counted():
        seen["reads"].append(seen["batches"])
        return read()

    def ended(batch, logs=None):
        seen["batches"] += 1
        batch_end(batch, logs)

    monitor._emit, monitor._samples_seen, monitor.on_train_batch_end = keep, counted, ended
    return seen


def fit(m: keras.Model, n: int, monitor: ScalingMonitor, seen: dict) -> dict:
    seen.update(samples=[], reads=[], batches=0)
    m.fit(data(n), epochs=1, verbose=0, callbacks=[monitor])
    return dict(seen)


out = {}
monitor = ScalingMonitor(record=None, warmup_steps=0, phases=False)
seen = watched(monitor)
out["three_batches"] = fit(model(), 3 * 32, monitor, seen)
out["then_twelve"] = fit(model(), 32 * 11 + 8, monitor, seen)
monitor = ScalingMonitor(record=sys.argv[1], warmup_steps=0, phases=False)
out["recorded"] = fit(model(), 32 * 11 + 8, monitor, watched(monitor))
print(json.dumps(out))
