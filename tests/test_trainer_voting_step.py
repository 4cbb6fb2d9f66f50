"""The multi-worker step that carries the probe ballot (trainer/loop.py,
``Trainer._voting_step``) trains exactly as the fused step does and sums worker
0's ballot alone: two local workers (TF_CONFIG on loopback, one CPU device each),
each a child process running the same code (their collectives must match)."""

from __future__ import annotations

import pytest

from tests.local_workers import run_workers

pytestmark = pytest.mark.tf

SAME_AS_TRAIN_FN = """
import numpy as np, keras, tensorflow as tf
from gpuscale.trainer import loop
from gpuscale.trainer.options import TrainConfig
from gpuscale.trainer.split_step import with_skippable_sum

config = TrainConfig(strategy="multi-worker", model="mlp", batch_per_replica=8, steps=4, warmup_steps=1)
trainer = loop.Trainer(config, loop.setup_devices(config))
# SGD(lr=1): the update is the gradient, so a double sum (2x) or none (each
# worker its own) cannot pass for the fused step's one sum
with trainer.strategy.scope():
    trainer.optimizer = with_skippable_sum(keras.optimizers.SGD)(learning_rate=1.0)
    trainer.optimizer.build(trainer.variables)
trainer._compile_functions()
state = [*trainer.variables, *trainer.optimizer.variables]
local = trainer.strategy.experimental_local_results

def snapshot():
    return [local(loop._variable(v))[0].numpy() for v in state]

def restore(saved):
    for v, value in zip(state, saved):
        v.assign(value)

batch = next(trainer.batches())
start = snapshot()
trainer._sync(trainer.train_fn(batch))
fused = snapshot()
restore(start)
total = trainer._voting_step(batch, tf.constant(1.0))  # every worker casts 1: one counts
assert trainer.voting_train_fn is not trainer._separate_voting_fn, "the ballot did not ride"
assert total == 1.0, total
after = snapshot()
moved = 0
for v, s, f, a in zip(state, start, fused, after):
    assert np.allclose(a, f, rtol=1e-6, atol=1e-7), (v.name, a.ravel()[:3], f.ravel()[:3])
    moved += not np.array_equal(f, s)
assert moved >= len(trainer.variables), "the step moved too few variables"
assert trainer._voting_step(batch, tf.constant(0.0)) == 0.0
print("ok")
"""


def test_the_voting_step_trains_as_the_fused_step_and_counts_worker_0s_ballot():
    results = run_workers(SAME_AS_TRAIN_FN, timeout=240)
    for returncode, out, err in results:
        assert returncode == 0 and out.strip().endswith("ok"), err[-3000:]
