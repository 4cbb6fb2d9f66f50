"""What gpuscale's instrumented training loop costs, against a plain loop.

Same model, same devices, same batch, same optimizer and variables, in one
process: by default the CPU auto-sized mnist-cnn (32 channels, global batch 128)
on 2 logical CPU devices with MirroredStrategy, phase probe every K=10 steps.
Alternates the two loops step by step (so drifting machine load hits both alike):

* ``instrumented``: :meth:`gpuscale.trainer.loop.Trainer.run`, the loop the
  trainer process runs (synchronised step timing, StepEvents, a phase probe
  every K-th step);
* ``plain``: a fused ``strategy.run`` step in one ``tf.function`` (forward,
  backward, ``optimizer.apply``), the loss reduced and fetched each step, as a
  hand-written custom loop does.

Prints per-loop median step times, the wall time of the blocks (the probes'
extra passes show there, not in the step times), and as its last line
``overhead: X%`` = median step time instrumented / plain - 1.

Run: ``python benchmarks/overhead.py [--rounds R] [--block N] [--phase-every K] [--width C] [--global-batch B]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import msgspec

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8, help="alternations of the two loops")
    parser.add_argument("--block", type=int, default=20, help="steps per loop per round")
    parser.add_argument("--phase-every", type=int, default=10)
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--width", type=int, default=None)
    parser.add_argument("--global-batch", type=int, default=None)
    args = parser.parse_args()

    import tensorflow as tf

    from gpuscale.events.schema import PhaseEvent, StepEvent
    from gpuscale.trainer import loop
    from gpuscale.trainer.options import TrainConfig

    config = TrainConfig(
        devices=args.devices,
        width=args.width,
        global_batch=args.global_batch,
        steps=args.block,
        warmup_steps=0,
        phase_every=args.phase_every,
    )
    plan = loop.setup_devices(config)
    trainer = loop.Trainer(config, plan)
    strategy = trainer.strategy

    def plain_replica(x, y):
        with tf.GradientTape() as tape:
            out = trainer.model(x, training=True)
            per_example = trainer.loss(y, tf.cast(out, tf.float32))
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=trainer.global_batch)
        grads = tape.gradient(loss, trainer.model.trainable_variables)
        trainer.optimizer.apply(grads, trainer.model.trainable_variables)
        return loss

    @tf.function
    def plain_step(batch):
        per_replica = strategy.run(plain_replica, args=batch)
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    batches = trainer.batches()
    trainer._batches = batches  # both loops use the same (synthetic, on-device) batch

    def plain_step_time() -> float:
        start = time.perf_counter()
        plain_step(next(batches)).numpy()
        return time.perf_counter() - start

    # Compile both (and the probe functions) before measuring.
    for _ in range(3):
        plain_step_time()
    for _ in trainer.run():
        pass

    # Alternate step by step: one plain step, then the instrumented loop up to
    # its next StepEvent (a probe's PhaseEvent, and its extra passes, come in
    # between and count in the instrumented wall time).
    measured = TrainConfig(**{**msgspec.structs.asdict(config), "steps": args.rounds * args.block})
    trainer.config = measured
    events = trainer.run()
    plain_times: list[float] = []
    inst_times: list[float] = []
    plain_wall = inst_wall = 0.0
    probes = 0
    for _ in range(measured.steps):
        plain_times.append(plain_step_time())
        plain_wall += plain_times[-1]
        start = time.perf_counter()
        for event in events:
            if isinstance(event, PhaseEvent):
                probes += 1
                break
            if isinstance(event, StepEvent):
                inst_times.append(event.step_time_s)
                k = args.phase_every
                if k and (event.step + 1) % k == 0:
                    continue  # its probe follows: count it in this step's wall time
                break
        inst_wall += time.perf_counter() - start
    for event in events:  # a last probe, if any
        probes += isinstance(event, PhaseEvent)

    plain_median = statistics.median(plain_times)
    inst_median = statistics.median(inst_times)
    print(
        f"model {trainer.model.name}, {trainer.num_replicas} x {plan.platform}, "
        f"global batch {trainer.global_batch}, all-reduce {trainer.cross_device_ops}, "
        f"K={args.phase_every}, {measured.steps} steps per loop, alternated step by step"
    )
    print(f"plain        median step {plain_median * 1000:8.2f} ms   ({len(plain_times)} steps)")
    print(
        f"instrumented median step {inst_median * 1000:8.2f} ms   ({len(inst_times)} steps, {probes} probes)"
    )
    print(
        f"wall time: plain {plain_wall:.2f} s, instrumented {inst_wall:.2f} s "
        f"({inst_wall / plain_wall - 1:+.1%}: the probes' compute-only, compute+all-reduce and "
        "all-reduce-only passes)"
    )
    print(f"overhead: {(inst_median / plain_median - 1) * 100:.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
