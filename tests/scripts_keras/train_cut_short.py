"""A user's script for gpuscale's tests, run alone (no gpuscale parent): its run ends
before the monitor's own end. ``MODE``: ``interrupt`` (Ctrl-C in ``fit``: a callback
raises KeyboardInterrupt at the 3rd step of the 2nd epoch), ``error`` (a ValueError
there), ``exit`` (``sys.exit(0)`` there), ``exit3`` (``sys.exit(3)`` there), ``loop`` (a custom loop of 7 steps never
closed, in a function). Nothing refers to the monitor but gpuscale (``fit``'s is
made in its ``callbacks`` list, as the README writes it). Records to the file named by the second argument.

    python train_cut_short.py MODE RECORDING
"""

import sys

import keras
import tensorflow as tf

from gpuscale.keras import ScalingMonitor

mode, path = sys.argv[1], sys.argv[2]
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)], name="cut")
model.compile("sgd", "mse")
x = tf.random.normal((64, 4), seed=0)
y = tf.zeros((64, 2))


def loop() -> None:
    monitor = ScalingMonitor(record=path, phases=False)
    monitor.start(model)
    for _ in range(7):
        with monitor.step(samples=8) as step:
            step.sync(model.train_on_batch(x[:8], y[:8]))
    # no monitor.close(), and nothing refers to the monitor once this returns


if mode == "loop":
    loop()
    sys.exit(0)


class CutShort(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if self.epoch == 1 and batch == 2:
            if mode == "interrupt":
                raise KeyboardInterrupt
            if mode == "exit":
                sys.exit(0)
            if mode == "exit3":
                sys.exit(3)
            raise ValueError("the data went bad")

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch


# the monitor made in the list, no reference kept, as the README writes it
model.fit(
    x,
    y,
    batch_size=8,
    epochs=3,
    verbose=0,
    callbacks=[ScalingMonitor(record=path, phases=False), CutShort()],
)
