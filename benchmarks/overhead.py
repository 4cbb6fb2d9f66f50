"""What gpuscale's instrumented training loop costs on the wall clock, probes included.

Same model, same devices, same batch, same optimizer and variables, in one
process: by default a small mnist-cnn (8 channels, global batch 32) on 2 logical
CPU devices with MirroredStrategy. Each round runs:

* ``plain``: ``--steps`` steps of a fused ``strategy.run`` step in one
  ``tf.function`` (forward, backward, ``optimizer.apply``), the loss fetched
  each step, as a hand-written custom loop does;
* ``gpuscale``: ``--steps`` steps of :meth:`gpuscale.trainer.loop.Trainer.run`,
  the loop the trainer process runs: synchronised step timing, StepEvents, and
  the phase probes at the default budget (``--probe-budget``), a fresh schedule
  each round, i.e. a whole run with its dense start;
* ``dense``: ``--dense-steps`` steps of the same loop probing after every step:
  the reference breakdown (timed for nothing else).

``plain`` and ``gpuscale`` advance in lockstep, step by step (one plain step
and the gpuscale loop up to its next step, a probe after the previous step
included), so drifting machine load hits both alike; which goes first
alternates from step to step (A B B A ...), so what one step leaves to the next
(TensorFlow's work after a function returns, caches) falls on both alike. Each
one's wall clock is the sum of its slices: the whole run, probes included.
Printed: the median step times (step-time-only overhead, probes left out), the
exposed all-reduce share of the budgeted runs against the dense reference
(pooled over all rounds, and per round), and last
``wall overhead: X%`` = median over rounds of wall(gpuscale) / wall(plain) - 1.
Compiling the probe's functions (once per process) is done before the rounds.

Run: ``python benchmarks/overhead.py [--rounds R] [--steps N] [--probe-budget 2%]``.
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
    from gpuscale.trainer.options import parse_budget

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the three blocks")
    parser.add_argument("--steps", type=int, default=300, help="steps per plain/gpuscale block")
    parser.add_argument("--dense-steps", type=int, default=100, help="steps per dense block")
    parser.add_argument("--probe-budget", type=parse_budget, default=0.02)
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--width", type=int, default=8)
    parser.add_argument("--global-batch", type=int, default=32)
    args = parser.parse_args()

    import tensorflow as tf

    from gpuscale.analysis.summary import summarize
    from gpuscale.events.schema import PhaseEvent, StepEvent
    from gpuscale.trainer import loop
    from gpuscale.trainer.options import TrainConfig

    config = TrainConfig(
        devices=args.devices,
        width=args.width,
        global_batch=args.global_batch,
        steps=args.steps,
        warmup_steps=0,
        probe_budget=args.probe_budget,
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

    def gpuscale_block(steps: int, every: int | None) -> tuple[float, list]:
        trainer.config = msgspec.structs.replace(config, steps=steps, phase_every=every)
        start = time.perf_counter()
        events = list(trainer.run())
        return time.perf_counter() - start, events

    def lockstep_round(steps: int) -> tuple[float, float, list[float], list]:
        """``steps`` plain steps and a whole ``steps``-step gpuscale run, interleaved."""
        trainer.config = msgspec.structs.replace(config, steps=steps, phase_every=None)
        run = trainer.run()
        events: list = []
        plain_wall = inst_wall = 0.0
        times = []
        for i in range(steps):
            for arm in ("plain", "gpuscale") if i % 2 == 0 else ("gpuscale", "plain"):
                t0 = time.perf_counter()
                if arm == "plain":
                    plain_step(next(batches)).numpy()
                    t1 = time.perf_counter()
                    times.append(t1 - t0)
                    plain_wall += t1 - t0
                    continue
                for event in run:  # up to the next step: a probe after the previous one included
                    events.append(event)
                    if isinstance(event, StepEvent):
                        break
                inst_wall += time.perf_counter() - t0
        t1 = time.perf_counter()
        events += list(run)  # a probe after the last step
        inst_wall += time.perf_counter() - t1
        counted.append(trainer.schedule)
        return plain_wall, inst_wall, times, events

    # Compile everything (the probe's passes included) before measuring.
    for _ in range(5):
        plain_step(next(batches)).numpy()
    gpuscale_block(5, 1)

    counted: list = []  # each budgeted run's scheduler: what it counted as spent
    walls: dict[str, list[float]] = {"plain": [], "gpuscale": []}
    plain_steps: list[float] = []
    inst_steps: list[float] = []
    budget_rounds: list[list] = []
    dense_rounds: list[list] = []
    for _ in range(args.rounds):
        plain_wall, inst_wall, times, events = lockstep_round(args.steps)
        walls["plain"].append(plain_wall)
        walls["gpuscale"].append(inst_wall)
        plain_steps += times
        inst_steps += [e.step_time_s for e in events if isinstance(e, StepEvent)]
        budget_rounds.append(events)
        dense_rounds.append(gpuscale_block(args.dense_steps, 1)[1])

    def share(events: list) -> tuple[float | None, float | None, int]:
        s = summarize(events)
        return s.comm_share, s.comm_share_err, s.phase_steps

    def pooled(rounds: list[list]) -> list:
        # one step numbering per round; the summary needs no more than the phases
        return [e for events in rounds for e in events if isinstance(e, PhaseEvent)]

    ratios = [g / p for g, p in zip(walls["gpuscale"], walls["plain"], strict=True)]
    probes = [sum(isinstance(e, PhaseEvent) for e in events) for events in budget_rounds]
    print(
        f"model {trainer.model.name}, {trainer.num_replicas} x {plan.platform}, "
        f"global batch {trainer.global_batch}, all-reduce {trainer.cross_device_ops}; "
        f"{args.rounds} rounds of {args.steps} steps, probe budget {args.probe_budget:.1%}, "
        f"probes per run {probes}"
    )
    print(
        "wall per round (s): plain "
        + " ".join(f"{w:.2f}" for w in walls["plain"])
        + " | gpuscale "
        + " ".join(f"{w:.2f}" for w in walls["gpuscale"])
    )
    budget_share, budget_err, budget_n = share(pooled(budget_rounds))
    dense_share, dense_err, dense_n = share(pooled(dense_rounds))
    per_round = []
    for b, d in zip(budget_rounds, dense_rounds, strict=True):
        bs, ds = share(b)[0], share(d)[0]
        if bs is not None and ds is not None:
            per_round.append((bs - ds) * 100)

    def pct(value: float | None, err: float | None) -> str:
        if value is None:
            return "n/a"
        return f"{value:.1%}" + (f" ± {err * 100:.1f}" if err is not None else "")

    print(
        f"exposed all-reduce share: budgeted {pct(budget_share, budget_err)} ({budget_n} probes) "
        f"vs dense {pct(dense_share, dense_err)} ({dense_n} probes): "
        f"{(budget_share - dense_share) * 100:+.1f} points pooled; per round "
        + " ".join(f"{d:+.1f}" for d in per_round)
        + " points"
    )
    if dense_err:  # what ±2 points would take: half-widths shrink as 1/sqrt(probes)
        needed = dense_n * (dense_err / 0.02) ** 2
        cost = statistics.median(c for run in counted for c in run.probe_costs_s)
        aim = args.probe_budget * (1 - counted[0].reserve)
        steps_needed = needed * cost / (aim * statistics.median(plain_steps))
        print(
            f"to know the exposed share to ±2 points: about {needed:.0f} probes (dense: "
            f"±{dense_err * 100:.1f} from {dense_n}), about {steps_needed:,.0f} steps at this "
            f"budget (a probe costs {cost / statistics.median(plain_steps):.1f} steps)"
        )
    probe_s = [
        sum(e.probe_cost_s or 0.0 for e in events if isinstance(e, PhaseEvent))
        for events in budget_rounds
    ]
    print(
        "probes' own share of the gpuscale wall clock: "
        + " ".join(f"{p / w:.1%}" for p, w in zip(probe_s, walls["gpuscale"], strict=True))
        + f" (median {statistics.median(p / w for p, w in zip(probe_s, walls['gpuscale'], strict=True)):.1%})"
    )
    print(
        "what the scheduler counted (probes' passes + the slower steps after them) over "
        "the steps' wall clock: "
        + " ".join(
            f"{c.spent_share:.1%} ({c.after_probe_s / c.step_wall_s:+.1%} after)" for c in counted
        )
        + f"; its aim {args.probe_budget * (1 - counted[0].reserve):.1%} "
        f"(the budget less its {counted[0].reserve:.0%} reserve for the per-step cost); "
        "first probe: "
        + " ".join(f"{c.probe_costs_s[0] / c.step_wall_s:.1%}" for c in counted if c.probes)
    )
    print(
        f"step-time-only overhead: {(statistics.median(inst_steps) / statistics.median(plain_steps) - 1) * 100:.1f}% "
        f"(median step {statistics.median(inst_steps) * 1000:.2f} ms vs plain "
        f"{statistics.median(plain_steps) * 1000:.2f} ms; probes left out)"
    )
    print(f"wall overhead: {(statistics.median(ratios) - 1) * 100:.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
