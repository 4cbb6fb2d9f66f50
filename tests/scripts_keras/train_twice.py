"""A user's script for gpuscale's tests, run alone (not under gpuscale): one
ScalingMonitor given to two ``fit`` calls, the model compiled again between them.
Each fit is a run of its own, recorded where GPUSCALE_DATA_DIR says.

    GPUSCALE_DATA_DIR=/tmp/x python train_twice.py
"""

import keras
import tensorflow as tf

from gpuscale.keras import ScalingMonitor

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
with strategy.scope():
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(3)], name="twice")
    model.compile("sgd", loss)
n = 32 * 11 + 8
x = tf.random.normal((n, 8), seed=1)
y = tf.zeros((n,), tf.int32)
monitor = ScalingMonitor(warmup_steps=0)
model.fit(x, y, batch_size=32, epochs=1, verbose=0, callbacks=[monitor])
with strategy.scope():
    model.compile("adam", loss)
model.fit(x, y, batch_size=32, epochs=2, verbose=0, callbacks=[monitor])

# a custom loop started twice with one monitor: two runs, each ended by its close()
loop = ScalingMonitor(batch_size=32, warmup_steps=0, phases=False, name="loop")
for _ in range(2):
    loop.start(model, strategy, scaling="strong")
    for _ in range(3):
        with loop.step() as step:
            step.sync(tf.constant(1.0))
    loop.close()
