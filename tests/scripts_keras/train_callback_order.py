"""A user's script for gpuscale's tests: ``callbacks=[Begins(), Spy(), ScalingMonitor()]``,
Spy with an end-of-batch hook (work between steps, as a logger or a checkpoint does),
Begins with only a begin hook. Each notes, at each of its hooks, whether the monitor
was timing a step then. Fitted twice (a new CallbackList each fit), under a
MirroredStrategy of one CPU device, no probes. Prints one JSON line.

    python train_callback_order.py
"""

import json

import keras
import tensorflow as tf

from gpuscale.keras import ScalingMonitor


class Spy(keras.callbacks.Callback):
    def __init__(self, monitor):
        super().__init__()
        self.monitor, self.timing_at_end = monitor, []

    def on_train_batch_end(self, batch, logs=None):
        self.timing_at_end.append(self.monitor._batch_start is not None)


class Begins(keras.callbacks.Callback):
    def __init__(self, monitor):
        super().__init__()
        self.monitor, self.timing_at_begin = monitor, []

    def on_train_batch_begin(self, batch, logs=None):
        self.timing_at_begin.append(self.monitor._batch_start is not None)


strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
with strategy.scope():
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(3)], name="order")
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
x = tf.random.normal((96, 8), seed=1)
y = tf.zeros((96,), tf.int32)
monitor = ScalingMonitor(record=None, phases=False)
spy, begins = Spy(monitor), Begins(monitor)
callbacks = [begins, spy, monitor]
for _ in range(2):
    model.fit(x, y, batch_size=32, epochs=1, verbose=0, callbacks=callbacks)
print(
    json.dumps(
        {
            "timing_at_spy_end": spy.timing_at_end,
            "timing_at_begin_hook": begins.timing_at_begin,
            "script_list": [type(c).__name__ for c in callbacks],
        }
    )
)
