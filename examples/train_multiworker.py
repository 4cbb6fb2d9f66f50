"""A custom training loop under MultiWorkerMirroredStrategy, timed by gpuscale.

Keras 3's model.fit does not run under MultiWorkerMirroredStrategy with more
than one worker (keras-team/keras#20585), so multi-worker scripts use a loop:

    gpuscale run --local-workers 2 -- python examples/train_multiworker.py
"""

import keras
import tensorflow as tf

from gpuscale.keras import ScalingMonitor

strategy = tf.distribute.MultiWorkerMirroredStrategy()  # the cluster comes from TF_CONFIG
with strategy.scope():
    model = keras.Sequential(
        [keras.Input((784,)), keras.layers.Dense(256, activation="relu"), keras.layers.Dense(10)],
        name="mlp",
    )
    optimizer = keras.optimizers.SGD(0.01)

global_batch = 64 * strategy.num_replicas_in_sync
data = tf.data.Dataset.from_tensors(
    (tf.random.normal((global_batch, 784)), tf.zeros((global_batch,), tf.int32))
).repeat()
batches = iter(strategy.experimental_distribute_dataset(data))
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="sum")


@tf.function
def train_step(batches):
    def replica_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True)) / global_batch
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    return strategy.run(replica_step, args=next(batches))


monitor = ScalingMonitor(batch_size=global_batch)
monitor.start(model, strategy, scaling="weak")  # 64 per replica times the replicas
train_step = monitor.wrap(train_step)  # one timed step per call, synchronised on its loss
for _ in range(100):
    train_step(batches)
monitor.close()
