"""A user's training script for gpuscale's tests (run as a separate process).

    python train_tiny.py STEPS [SLEEP_S] [budget]

Without TF_CONFIG: Keras ``fit`` under MirroredStrategy on 2 logical CPU devices
with the ScalingMonitor callback, then 4 steps with ``steps_per_execution=2``,
then 3 steps of a custom loop with ``monitor.step()`` (which says it is weak scaling). With TF_CONFIG: a custom loop under
MultiWorkerMirroredStrategy with ``monitor.wrap()`` (Keras 3's ``fit`` does not
support MultiWorkerMirroredStrategy: keras-team/keras#20585), sleeping SLEEP_S
after each step so a test can kill a worker mid-run; probing every 3rd step, or
with ``budget`` within the default probe budget.
"""

import os
import sys
import time

import keras
import tensorflow as tf

from gpuscale.keras import ScalingMonitor

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 8
sleep_s = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
every = None if sys.argv[3:4] == ["budget"] else 3


def tiny_model() -> keras.Model:
    return keras.Sequential(
        [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(3)],
        name="tiny",
    )


if "TF_CONFIG" not in os.environ:
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        model = tiny_model()
        model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = tf.random.normal((32 * steps, 8), seed=1)
    y = tf.zeros((32 * steps,), tf.int32)
    model.fit(x, y, batch_size=32, epochs=1, verbose=0, callbacks=[ScalingMonitor(every=3)])

    # Keras running 2 steps per call: one event per call, the mean of its 2 steps
    # (without a strategy: Keras 3.15's multi-step function fails under MirroredStrategy)
    plain = tiny_model()
    plain.compile(
        "sgd",
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        steps_per_execution=2,
    )
    plain.fit(x[:128], y[:128], batch_size=32, verbose=0, callbacks=[ScalingMonitor(phases=False)])

    loop = ScalingMonitor(batch_size=4, phases=False)
    loop.start(scaling="weak")  # the loop says its batch is per replica times the replicas
    dense = keras.layers.Dense(2)
    for _ in range(3):
        with loop.step() as step:
            step.sync(dense(tf.ones((4, 8))))
    loop.close()
else:
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = tiny_model()
        optimizer = keras.optimizers.SGD(0.01)
    batch = 16 * strategy.num_replicas_in_sync
    data = (tf.random.normal((batch, 8), seed=1), tf.zeros((batch,), tf.int32))
    iterator = iter(
        strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensors(data).repeat())
    )
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="sum")

    @tf.function
    def train_step(iterator):
        def replica(x, y):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True)) / batch
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            return loss

        return strategy.run(replica, args=next(iterator))

    monitor = ScalingMonitor(every=every, batch_size=batch)
    monitor.start(model, strategy)
    step = monitor.wrap(train_step)
    for _ in range(steps):
        step(iterator)
        time.sleep(sleep_s)
    monitor.close()
print("trained", steps, "steps", flush=True)
