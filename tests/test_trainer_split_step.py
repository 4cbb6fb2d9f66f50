"""The fused step applies the mean gradient once, and the split step
(trainer/split_step.py) trains exactly as the fused step does: a tiny MLP on 2
logical CPU devices, each check in a child process of its own (the devices must be
set before TensorFlow starts), two at a time (they compare values, never
timings)."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

pytestmark = pytest.mark.tf

SAME_AS_TRAIN_FN = """
import numpy as np, keras
from gpuscale.events.schema import PhaseEvent, StepEvent
from gpuscale.trainer import loop
from gpuscale.trainer.options import TrainConfig
from gpuscale.trainer.split_step import with_skippable_sum

config = TrainConfig(devices=2, model="mlp", batch_per_replica=8, steps=7, warmup_steps=1, phase_every=2)
trainer = loop.Trainer(config, loop.setup_devices(config))
local = trainer.strategy.experimental_local_results

def replicas(v):  # every replica's copy of a variable
    v = loop._variable(v)
    return [c.numpy() for c in local(v)] if hasattr(v, "values") else [v.numpy()]

def snapshot(trainer):
    return [replicas(v) for v in trainer.split_step.state]

def restore(trainer, saved):
    for v, copies in zip(trainer.split_step.state, saved):
        v.assign(copies[0])

def check(trainer, name):
    split = trainer.split_step
    batch = next(trainer.batches())
    start = snapshot(trainer)
    assert split.prepare(batch), split.problem
    assert all(np.array_equal(a, b) for s, p in zip(start, snapshot(trainer)) for a, b in zip(s, p)), "prepare trained"
    trainer._sync(trainer.train_fn(batch))
    fused = snapshot(trainer)
    restore(trainer, start)
    reduce_s, apply_s = split.run(batch)
    assert reduce_s > 0 and apply_s > 0
    after = snapshot(trainer)
    iterations = [i for i, v in enumerate(split.state) if v is trainer.optimizer.iterations]
    assert iterations and all(after[i][0] == start[i][0] + 1 for i in iterations)
    moved = 0
    for v, s, f, a in zip(split.state, start, fused, after):
        assert len(a) == 2, (name, v.name)  # mirrored: a copy on each replica
        for copy in a:  # every replica holds the fused step's result
            assert np.allclose(copy, f[0], rtol=1e-6, atol=1e-7), (name, v.name, copy.ravel()[:3], f[0].ravel()[:3])
        moved += not np.array_equal(f[0], s[0])
    assert moved >= len(trainer.variables), (name, "the step moved too few variables")

# SGD(lr=1): the update is the gradient, so summing twice (2x) or never (each
# replica its own) cannot pass for once; then the trainer's own Adam.
with trainer.strategy.scope():
    trainer.optimizer = with_skippable_sum(keras.optimizers.SGD)(learning_rate=1.0)
    trainer.optimizer.build(trainer.variables)
trainer._compile_functions()
check(trainer, "sgd")

# mixed precision on a GPU wraps the optimizer in a LossScaleOptimizer: it unscales,
# its inner optimizer skips the sum (run here on CPU, where the trainer needs none)
with trainer.strategy.scope():
    inner = with_skippable_sum(keras.optimizers.SGD)(learning_rate=1.0)
    trainer.optimizer = keras.optimizers.LossScaleOptimizer(inner)
    trainer.optimizer.build(trainer.variables)
trainer._compile_functions()
check(trainer, "loss-scaled sgd")

trainer = loop.Trainer(config, loop.setup_devices(config))
check(trainer, "adam")

events = list(trainer.run())
phases = [e for e in events if isinstance(e, PhaseEvent)]
assert [p.step for p in phases] == [2, 4, 6], [p.step for p in phases]
assert {p.method for p in phases} == {"split-step"}
steps = {e.step: e for e in events if isinstance(e, StepEvent)}
usual = sorted(s.step_time_s for s in steps.values() if s.step not in {p.step for p in phases})
for p in phases:  # the phases split the usual step (the schedule's reference), not the split one
    assert p.step_time_s + p.input_s <= max(usual) + 1e-9, (p, usual)
    assert p.compute_allreduce_s is not None and p.allreduce_total_s is not None
    assert abs(p.apply_s - max(0.0, p.step_time_s - p.compute_allreduce_s)) < 1e-9
    assert p.probe_cost_s >= p.compute_s
# a split-step probe never runs the two-pass probe's compute + all-reduce pass: not compiled
assert trainer.probe.grads_fn.experimental_get_tracing_count() == 0
assert trainer.probe.compute_fn.experimental_get_tracing_count() == 1
assert phases[0].setup_s is not None and phases[0].setup_s > 0
print("ok")
"""

SUMMED_TWICE = """
import keras
from gpuscale.trainer import loop
from gpuscale.trainer.options import TrainConfig
config = TrainConfig(devices=2, model="mlp", batch_per_replica=8, steps=2, warmup_steps=0)
trainer = loop.Trainer(config, loop.setup_devices(config))
with trainer.strategy.scope():  # an optimizer that cannot skip its sum: no split step
    trainer.optimizer = keras.optimizers.SGD(learning_rate=1.0)
    trainer.optimizer.build(trainer.variables)
trainer._compile_functions()
assert not trainer.split_step.usable and "cannot skip" in trainer.split_step.problem
trainer.config = trainer.config.__class__(**{**{f: getattr(config, f) for f in config.__struct_fields__}, "steps": 4, "phase_every": 1})
from gpuscale.events.schema import PhaseEvent
methods = {e.method for e in trainer.run() if isinstance(e, PhaseEvent)}
assert methods == {"differenced"}, methods
assert trainer.probe.grads_fn.experimental_get_tracing_count() == 1  # the two-pass probe's
print("ok")
"""


AGGREGATION_CHECK = """
import numpy as np, tensorflow as tf, keras
from gpuscale.trainer import loop
from gpuscale.trainer.options import TrainConfig
config = TrainConfig(devices=2, model="mlp", batch_per_replica=8, steps=2, warmup_steps=0)
trainer = loop.Trainer(config, loop.setup_devices(config))
with trainer.strategy.scope():
    trainer.optimizer = keras.optimizers.SGD(learning_rate=1.0)
    trainer.optimizer.build(trainer.variables)
trainer._compile_functions()
batch = next(trainer.batches())
local = trainer.strategy.experimental_local_results
x, y = tf.concat(local(batch[0]), 0), tf.concat(local(batch[1]), 0)
with tf.GradientTape() as tape:
    loss = tf.reduce_mean(trainer.loss(y, trainer.model(x, training=True)))
grads = tape.gradient(loss, [loop._variable(v) for v in trainer.variables])
before = [v.numpy().copy() for v in trainer.variables]
trainer._sync(trainer.train_fn(batch))
for b, v, g in zip(before, trainer.variables, grads):
    update, g = b - v.numpy(), g.numpy()
    assert np.allclose(update, g, rtol=1e-4, atol=1e-6 * np.abs(g).max()), (v.name, update.ravel()[:3], g.ravel()[:3])
print("ok")
"""


def run_child(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )


@pytest.fixture(scope="module")
def children() -> dict[str, Future]:
    """Every check's child process, two at a time (one per core of a 2-core machine:
    more would only share them), the longest first; each test waits for its own."""
    checks = {"split": SAME_AS_TRAIN_FN, "mean": AGGREGATION_CHECK, "summed": SUMMED_TWICE}
    with ThreadPoolExecutor(2) as pool:
        yield {name: pool.submit(run_child, code) for name, code in checks.items()}


def test_train_step_applies_the_mean_gradient_once(children):
    """Keras 3 sums across replicas inside optimizer.apply; the trainer must not
    reduce again: with SGD(lr=1) one step on 2 replicas moves the variables by
    exactly the mean gradient of the whole global batch (twice it if gradients
    were aggregated twice)."""
    result = children["mean"].result()
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-2000:]


def test_the_split_step_leaves_every_variable_as_the_fused_step_does(children):
    """Same state, same batch: train_fn and the split step end with the same
    variables and optimizer state on every replica (SGD with lr=1, where a double
    or a missing sum shows as 2x or per-replica updates, also inside a
    LossScaleOptimizer; and Adam); a run probes
    on split steps, the step after each decision."""
    result = children["split"].result()
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-3000:]


def test_an_optimizer_that_cannot_skip_its_sum_keeps_the_two_pass_probe(children):
    result = children["summed"].result()
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-3000:]
