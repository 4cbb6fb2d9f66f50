"""A user's script on one replica (MirroredStrategy over one CPU device), with the
callback probing every 2 steps: gpuscale's tests check it reports no exchange.

    python train_one_replica.py STEPS
"""

import sys

import keras
import tensorflow as tf

from gpuscale.keras import ScalingMonitor

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 8
strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
with strategy.scope():
    model = keras.Sequential(
        [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(3)],
        name="tiny",
    )
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
x = tf.random.normal((32 * steps, 8), seed=1)
y = tf.zeros((32 * steps,), tf.int32)
model.fit(x, y, batch_size=32, epochs=1, verbose=0, callbacks=[ScalingMonitor(every=2)])
