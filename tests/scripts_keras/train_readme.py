"""A user's script written the README's way (for gpuscale's tests, run as a process).

    python train_readme.py [--no-callback] [--epochs N] [--verbose]

``tf.distribute.MirroredStrategy()`` with no arguments (it mirrors over whatever
devices there are: ``gpuscale run --devices N`` decides), a Keras model left with
its default name, ``model.fit`` with the one added line.
"""

import sys

import keras
import tensorflow as tf

from gpuscale.keras import ScalingMonitor

callback = "--no-callback" not in sys.argv
epochs = int(sys.argv[sys.argv.index("--epochs") + 1]) if "--epochs" in sys.argv else 1
verbose = 1 if "--verbose" in sys.argv else 0

strategy = tf.distribute.MirroredStrategy()
print(f"replicas: {strategy.num_replicas_in_sync}", flush=True)
with strategy.scope():
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16), keras.layers.Dense(3)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
x = tf.random.normal((32 * 6, 8), seed=1)
y = tf.zeros((32 * 6,), tf.int32)
callbacks = [ScalingMonitor(every=3)] if callback else []
model.fit(x, y, batch_size=32, epochs=epochs, verbose=verbose, callbacks=callbacks)
