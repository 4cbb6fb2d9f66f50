"""A user's Keras training script with gpuscale's callback (one added line).

python examples/train_keras.py            # writes a recording; gpuscale replay shows it
gpuscale run -- python examples/train_keras.py
gpuscale watch -- python examples/train_keras.py
"""

import keras
import tensorflow as tf

from gpuscale.keras import ScalingMonitor

gpus = tf.config.list_physical_devices("GPU")
if not gpus:  # no GPU: split the CPU into 2 logical devices, so there are 2 replicas
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
devices = [d.name for d in tf.config.list_logical_devices("GPU" if gpus else "CPU")]
strategy = tf.distribute.MirroredStrategy(devices)

with strategy.scope():
    model = keras.Sequential(
        [
            keras.Input((28, 28, 1)),
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
