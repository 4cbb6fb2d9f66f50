"""A user's script for gpuscale's tests: ``steps_per_execution=5`` over epochs of 12
steps (11 of 32, the last of 8), so each epoch's last call runs 2 steps, under a
MirroredStrategy of one CPU device (of two it fails inside Keras 3.15 itself, with or
without validation: a placeholder of its multi-step loop is never fed). Recorded to
the file named by the first argument. With ``repeat``, 11 full batches repeat and each
epoch is ``steps_per_epoch=12``: Keras then runs every call whole (15 steps an epoch). With ``filter``, the data of the
first case, of a length Keras does not know (``filter-twice``: fitted twice with one
monitor; ``filter-batch``: the monitor given ``batch_size=32``).
Prints one JSON line: the steps' indices and samples, and the steps the optimizer
took.

    python train_multi_step.py RECORDING [repeat | filter | filter-twice | filter-batch]
"""

import json
import sys

import keras
import tensorflow as tf
from _shared import watched

from gpuscale.events.schema import StepEvent
from gpuscale.keras import ScalingMonitor

strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
with strategy.scope():
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(3)], name="multi")
    model.compile(
        "sgd",
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        steps_per_execution=5,
    )
n = 32 * 11 + 8
x = tf.random.normal((n, 8), seed=1)
y = tf.zeros((n,), tf.int32)
mode = sys.argv[2] if len(sys.argv) > 2 else ""
batch = 32 if mode == "filter-batch" else None
monitor = ScalingMonitor(record=sys.argv[1], warmup_steps=0, phases=False, batch_size=batch)
events = watched(monitor)
if mode.startswith("filter"):  # the same data, of unknown length to Keras
    data = tf.data.Dataset.from_tensor_slices((x, y)).filter(lambda a, b: True).batch(32)
    model.fit(data, epochs=2, verbose=0, callbacks=[monitor])
    if mode == "filter-twice":  # the monitor again, alone: a run of its own
        model.fit(data, epochs=2, verbose=0, callbacks=[monitor])
elif mode == "repeat":
    data = tf.data.Dataset.from_tensor_slices((x[:352], y[:352])).batch(32).repeat()
    model.fit(data, steps_per_epoch=12, epochs=2, verbose=0, callbacks=[monitor])
else:
    model.fit(x, y, batch_size=32, epochs=2, verbose=0, callbacks=[monitor])
steps = [e for e in events if isinstance(e, StepEvent)]
print(
    json.dumps(
        {
            "steps": [e.step for e in steps],
            "samples": [e.samples for e in steps],
            "optimizer_steps": int(model.optimizer.iterations.numpy()),
        }
    )
)
