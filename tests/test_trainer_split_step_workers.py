"""The multi-worker steps (trainer/split_step.py, and ``Trainer._voting_step`` in
trainer/loop.py) train exactly as the fused step does, on every worker alike: two
local workers (TF_CONFIG on loopback, one CPU device each), each a child process
running the same code (their collectives must match), once for the module: the
split step, a budgeted run whose probes are split steps at the same steps on both
workers, then the step that carries the probe ballot, summing worker 0's alone.
(A process makes one MultiWorkerMirroredStrategy, so one cluster checks all.)"""

from __future__ import annotations

import json

import pytest

from tests.local_workers import run_workers

pytestmark = pytest.mark.tf

WORKER = """
import hashlib, json, numpy as np, keras, tensorflow as tf
from gpuscale.events.schema import PhaseEvent
from gpuscale.trainer import loop
from gpuscale.trainer.options import TrainConfig
from gpuscale.trainer.split_step import with_skippable_sum

config = TrainConfig(strategy="multi-worker", model="mlp", batch_per_replica=8, steps=14, warmup_steps=1)
trainer = loop.Trainer(config, loop.setup_devices(config))
local = trainer.strategy.experimental_local_results
report = {"usable": trainer.split_step.usable, "problem": trainer.split_step.problem}

def snapshot():
    return [local(loop._variable(v))[0].numpy() for v in trainer.split_step.state]

def restore(saved):
    for v, value in zip(trainer.split_step.state, saved):
        v.assign(value)

def fingerprint(values):  # the parent compares the workers' by it
    return hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in values)).hexdigest()

def check(name):
    split = trainer.split_step
    batch = next(trainer.batches())
    start = snapshot()
    assert split.prepare(batch), split.problem
    assert all(np.array_equal(a, b) for a, b in zip(start, snapshot())), (name, "prepare trained")
    trainer._sync(trainer.train_fn(batch))
    fused = snapshot()
    restore(start)
    reduce_s, apply_s = split.run(batch)
    assert reduce_s > 0 and apply_s > 0
    after = snapshot()
    iterations = [i for i, v in enumerate(split.state) if v is trainer.optimizer.iterations]
    assert iterations and all(after[i] == start[i] + 1 for i in iterations), name
    moved = 0
    for v, s, f, a in zip(split.state, start, fused, after):
        assert np.allclose(a, f, rtol=1e-6, atol=1e-7), (name, v.name, a.ravel()[:3], f.ravel()[:3])
        moved += not np.array_equal(f, s)
    assert moved >= len(trainer.variables), (name, "the step moved too few variables")
    report[name] = {"start": fingerprint(start), "split": fingerprint(after), "fused": fingerprint(fused)}

check("adam")  # the trainer's own Adam
events = list(trainer.run())  # by budget: worker 0's ballot decides, both split the next step
phases = [e for e in events if isinstance(e, PhaseEvent)]
report["phases"] = [[p.step, p.method] for p in phases]
report["final"] = fingerprint(snapshot())

# SGD(lr=1): the update is the gradient, so summing twice (2x) or never (each worker
# its own) cannot pass for once; also inside a LossScaleOptimizer (mixed precision on
# a GPU), which unscales while its inner optimizer skips the sum. (One trainer: a
# process makes one MultiWorkerMirroredStrategy.)
for name in ("sgd", "loss-scaled sgd"):
    with trainer.strategy.scope():
        trainer.optimizer = with_skippable_sum(keras.optimizers.SGD)(learning_rate=1.0)
        if name == "loss-scaled sgd":
            trainer.optimizer = keras.optimizers.LossScaleOptimizer(trainer.optimizer)
        trainer.optimizer.build(trainer.variables)
    trainer._compile_functions()
    check(name)

# The voting step: the same step with the probe ballot summed in it, against the
# fused step from the same state, SGD(lr=1): a double sum (2x) or none (each worker
# its own) cannot pass for the fused step's one sum.
with trainer.strategy.scope():
    trainer.optimizer = with_skippable_sum(keras.optimizers.SGD)(learning_rate=1.0)
    trainer.optimizer.build(trainer.variables)
trainer._compile_functions()
state = [*trainer.variables, *trainer.optimizer.variables]
batch = next(trainer.batches())
start = [local(loop._variable(v))[0].numpy() for v in state]
trainer._sync(trainer.train_fn(batch))
fused = [local(loop._variable(v))[0].numpy() for v in state]
for v, value in zip(state, start):
    v.assign(value)
total = trainer._voting_step(batch, tf.constant([1.0, 0.0]))  # every worker casts 1: one counts
assert trainer.voting_train_fn is not trainer._separate_voting_fn, "the ballot did not ride"
assert total == (1.0, 0.0), total
after = [local(loop._variable(v))[0].numpy() for v in state]
moved = 0
for v, s, f, a in zip(state, start, fused, after):
    assert np.allclose(a, f, rtol=1e-6, atol=1e-7), ("voting", v.name, a.ravel()[:3], f.ravel()[:3])
    moved += not np.array_equal(f, s)
assert moved >= len(trainer.variables), ("voting", "the step moved too few variables")
assert trainer._voting_step(batch, tf.constant([0.0, 0.0])) == (0.0, 0.0)
# every worker's stop counts (each worker asked: 2), the probe ballot still worker 0's alone
assert trainer._voting_step(batch, tf.constant([1.0, 1.0])) == (1.0, 2.0)
report["voting"] = "ok"
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def reports() -> list[tuple[dict | None, str]]:
    """Each worker's report (None if it printed none) and the end of its stderr,
    worker 0 first."""
    out = []
    for returncode, stdout, err in run_workers(WORKER, timeout=300):
        last = stdout.strip().splitlines()[-1:] if returncode == 0 else []
        out.append((json.loads(last[0]) if last else None, err[-3000:]))
    return out


def test_the_split_step_on_two_workers_trains_as_the_fused_step_on_both(reports):
    """Same state, same batch: the fused step and the split step end with the same
    variables and optimizer slots on each worker (SGD with lr=1, where a double or a
    missing sum shows as 2x or per-worker updates; and Adam), identical on both
    workers; a budgeted run probes on split steps at the same steps on both."""
    for report, err in reports:
        assert report is not None, err
    chief, other = (report for report, _ in reports)
    assert chief["usable"], chief["problem"]
    for name in (
        "adam",
        "sgd",
        "loss-scaled sgd",
    ):  # every variable and slot the same on both workers
        assert chief[name] == other[name], name
    assert chief["final"] == other["final"]
    assert chief["phases"], "the budgeted run never probed"
    assert chief["phases"] == other["phases"]
    assert {method for _, method in chief["phases"]} == {"split-step"}


def test_the_voting_step_trains_as_the_fused_step_and_counts_worker_0s_ballot(reports):
    """On each worker: the step with the ballot riding the gradients' all-reduce
    moves every variable as the fused step does, and the sum of every worker's
    ballot of 1 is 1 (worker 0's alone), of 0 is 0; every worker's stop is summed."""
    for report, err in reports:
        assert report is not None and report.get("voting") == "ok", err
