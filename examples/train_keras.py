"""A user's Keras training script with gpuscale's callback (one added line).

gpuscale run --devices 2 -- python examples/train_keras.py     # progress bar and summary
gpuscale watch --devices 2 -- python examples/train_keras.py   # the dashboard
gpuscale recommend -- python examples/train_keras.py           # a sweep over 1, 2, ... devices
GPUSCALE_DEVICES=2 python examples/train_keras.py              # alone: writes a recording

``--devices N`` (or ``GPUSCALE_DEVICES=N``) gives the script N devices: the first N
GPUs, or, without a GPU, N logical devices the CPU is split into. It works through
``import gpuscale.keras``, which must come before the first TensorFlow operation,
and ``tf.distribute.MirroredStrategy()`` without a device list, which mirrors over
them. Without either, the script uses what TensorFlow finds (all GPUs, or one CPU).
"""

import keras
import tensorflow as tf

from gpuscale.keras import ScalingMonitor  # before any TensorFlow operation

strategy = tf.distribute.MirroredStrategy()  # every device there is
with strategy.scope():  # the model and its optimizer are built under the strategy
    model = keras.Sequential(
        [
            keras.Input((28, 28, 1)),  # a known input shape (for the phase breakdown)
            keras.layers.Conv2D(32, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(32, 3, activation="relu"),
            keras.layers.Flatten(),
            keras.layers.Dense(10),
        ],
        name="small-cnn",
    )
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))

x = tf.random.normal((64 * 60, 28, 28, 1))
y = tf.random.uniform((64 * 60,), 0, 10, tf.int32)
model.fit(x, y, batch_size=64, epochs=1, verbose=0, callbacks=[ScalingMonitor()])
