"""The split step (trainer/split_step.py) trains exactly as the fused step does:
a tiny MLP on 2 logical CPU devices, in a child process (the devices must be
set before TensorFlow starts)."""

from __future__ import annotations

import os
import subprocess
import sys

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


def test_the_split_step_leaves_every_variable_as_the_fused_step_does():
    """Same state, same batch: train_fn and the split step end with the same
    variables and optimizer state on every replica (SGD with lr=1, where a double
    or a missing sum shows as 2x or per-replica updates, also inside a
    LossScaleOptimizer; and Adam); a run probes
    on split steps, the step after each decision."""
    result = run_child(SAME_AS_TRAIN_FN)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-3000:]


def test_an_optimizer_that_cannot_skip_its_sum_keeps_the_two_pass_probe():
    result = run_child(SUMMED_TWICE)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-3000:]
