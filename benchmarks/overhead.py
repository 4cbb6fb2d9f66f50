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
import itertools
import os
import statistics
import sys
import time

import msgspec

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

METHODS = {
    "split": ["split-step"],
    "two-pass": ["differenced"],
    "both": ["differenced", "split-step"],
}
"""``--probe-method``: the trainer's ``probe_method`` values each arm runs."""
LABELS = {"split-step": "split", "differenced": "two-pass"}


def main() -> int:
    from gpuscale.trainer.options import parse_budget

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the three blocks")
    parser.add_argument("--steps", type=int, default=300, help="steps per plain/gpuscale block")
    parser.add_argument("--dense-steps", type=int, default=100, help="steps per dense block")
    parser.add_argument("--probe-budget", type=parse_budget, default=0.02)
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--width", type=int, default=8)
    parser.add_argument(
        "--probe-method",
        choices=sorted(METHODS),
        default="split",
        help="the trainer's probe: the split step (default), the two-pass probe, or both side by side",
    )
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
    trainer._batches = batches  # every loop uses the same (synthetic, on-device) batch
    methods = METHODS[args.probe_method]

    def gpuscale_block(steps: int, every: int | None, method: str) -> tuple[float, list]:
        trainer.config = msgspec.structs.replace(config, steps=steps, phase_every=every)
        start = time.perf_counter()
        events = list(trainer.run(probe_method=method))
        return time.perf_counter() - start, events

    def lockstep_round(steps: int) -> tuple[dict[str, float], list[float], dict[str, list]]:
        """``steps`` plain steps and a whole ``steps``-step gpuscale run per method,
        interleaved step by step, the arms taking every order in turn."""
        trainer.config = msgspec.structs.replace(config, steps=steps, phase_every=None)
        arms = ["plain", *methods]
        runs = {m: trainer.run(probe_method=m) for m in methods}
        events: dict[str, list] = {m: [] for m in methods}
        wall = dict.fromkeys(arms, 0.0)
        times = []
        orders = list(itertools.permutations(arms))
        for i in range(steps):
            for arm in orders[i % len(orders)]:
                t0 = time.perf_counter()
                if arm == "plain":
                    plain_step(next(batches)).numpy()
                    t1 = time.perf_counter()
                    times.append(t1 - t0)
                    wall["plain"] += t1 - t0
                    continue
                for event in runs[
                    arm
                ]:  # up to the next step: a probe after the previous one included
                    events[arm].append(event)
                    if isinstance(event, StepEvent):
                        break
                wall[arm] += time.perf_counter() - t0
                if i == 0:
                    counted[arm].append(
                        trainer.schedule
                    )  # the run's scheduler, set on its first step
        for m in methods:
            t1 = time.perf_counter()
            events[m] += list(runs[m])  # a probe after the last step
            wall[m] += time.perf_counter() - t1
        return wall, times, events

    # Compile everything (the probe's passes and the split step included) before measuring.
    for _ in range(5):
        plain_step(next(batches)).numpy()
    for m in methods:
        gpuscale_block(5, 1, m)

    counted: dict[str, list] = {m: [] for m in methods}  # each budgeted run's scheduler
    walls: dict[str, list[float]] = {a: [] for a in ["plain", *methods]}
    plain_steps: list[float] = []
    inst_steps: dict[str, list[float]] = {m: [] for m in methods}
    budget_rounds: dict[str, list[list]] = {m: [] for m in methods}
    dense_rounds: dict[str, list[list]] = {m: [] for m in methods}
    for _ in range(args.rounds):
        wall, times, events = lockstep_round(args.steps)
        plain_steps += times
        walls["plain"].append(wall["plain"])
        for m in methods:
            walls[m].append(wall[m])
            inst_steps[m] += [e.step_time_s for e in events[m] if isinstance(e, StepEvent)]
            budget_rounds[m].append(events[m])
            dense_rounds[m].append(gpuscale_block(args.dense_steps, 1, m)[1])

    def share(events: list) -> tuple[float | None, float | None, int]:
        s = summarize(events)
        return s.comm_share, s.comm_share_err, s.phase_steps

    def pooled(rounds: list[list]) -> list:
        # one step numbering per round; the summary needs no more than the phases
        return [e for events in rounds for e in events if isinstance(e, PhaseEvent)]

    def pct(value: float | None, err: float | None) -> str:
        if value is None:
            return "n/a"
        return f"{value:.1%}" + (f" ± {err * 100:.1f}" if err is not None else "")

    plain_step_s = statistics.median(plain_steps)
    print(
        f"model {trainer.model.name}, {trainer.num_replicas} x {plan.platform}, "
        f"global batch {trainer.global_batch}, all-reduce {trainer.cross_device_ops}; "
        f"{args.rounds} rounds of {args.steps} steps, probe budget {args.probe_budget:.1%}; "
        f"probe methods {', '.join(LABELS[m] for m in methods)}; plain step "
        f"{plain_step_s * 1000:.2f} ms (median)"
    )
    print("wall per round (s): plain " + " ".join(f"{w:.2f}" for w in walls["plain"]))
    overheads = {}
    for m in methods:
        label = LABELS[m]
        ratios = [g / p for g, p in zip(walls[m], walls["plain"], strict=True)]
        overheads[m] = (statistics.median(ratios) - 1) * 100
        probes = [sum(isinstance(e, PhaseEvent) for e in events) for events in budget_rounds[m]]
        print(f"--- {label}: probes per run {probes}")
        print("  wall per round (s): " + " ".join(f"{w:.2f}" for w in walls[m]))
        budget_share, budget_err, budget_n = share(pooled(budget_rounds[m]))
        dense_share, dense_err, dense_n = share(pooled(dense_rounds[m]))
        per_round = []
        for b, d in zip(budget_rounds[m], dense_rounds[m], strict=True):
            bs, ds = share(b)[0], share(d)[0]
            if bs is not None and ds is not None:
                per_round.append((bs - ds) * 100)
        gap = (
            f"{(budget_share - dense_share) * 100:+.1f} points pooled"
            if budget_share is not None and dense_share is not None
            else "n/a"
        )
        print(
            f"  exposed all-reduce share: budgeted {pct(budget_share, budget_err)} ({budget_n} probes) "
            f"vs dense {pct(dense_share, dense_err)} ({dense_n} probes): {gap}; per round "
            + " ".join(f"{d:+.1f}" for d in per_round)
            + " points"
        )
        runs = counted[m]
        probes_n = sum(c.probes for c in runs)
        passes = [c for run in runs for c in run.probe_costs_s]
        slowed = sum(c.after_probe_s + c.split_s for c in runs) / max(1, probes_n)
        per_probe = sum(c.probe_wall_s for c in runs) / max(1, probes_n)
        first = [c.probe_costs_s[0] for c in runs if c.probes]
        print(
            f"  one probe costs {per_probe * 1000:.1f} ms = {per_probe / plain_step_s:.2f} steps "
            f"(as the scheduler counts it, mean over {probes_n} probes: passes median "
            f"{statistics.median(passes) * 1000:.1f} ms, split step + step after "
            f"{slowed * 1000:+.1f} ms); first probe's passes "
            + " ".join(f"{f / plain_step_s:.2f}" for f in first)
            + " steps"
        )
        if dense_err:  # what ±2 points would take: half-widths shrink as 1/sqrt(probes)
            needed = dense_n * (dense_err / 0.02) ** 2
            aim = args.probe_budget * (1 - runs[0].reserve)
            steps_needed = needed * per_probe / (aim * plain_step_s)
            print(
                f"  to know the exposed share to ±2 points: about {needed:.0f} probes (dense: "
                f"±{dense_err * 100:.1f} from {dense_n}), about {steps_needed:,.0f} steps at this budget"
            )
        print(
            "  what the scheduler counted (probes' passes, split steps and the steps after "
            "probes) over the steps' wall clock: "
            + " ".join(
                f"{c.spent_share:.1%} ({(c.after_probe_s + c.split_s) / c.step_wall_s:+.1%} steps)"
                for c in runs
            )
            + f"; its aim {args.probe_budget * (1 - runs[0].reserve):.1%} "
            f"(the budget less its {runs[0].reserve:.0%} reserve for the per-step cost)"
        )
        print(
            f"  step-time-only overhead: {(statistics.median(inst_steps[m]) / plain_step_s - 1) * 100:.1f}% "
            f"(median step {statistics.median(inst_steps[m]) * 1000:.2f} ms vs plain "
            f"{plain_step_s * 1000:.2f} ms; probes left out)"
        )
        print(f"  wall overhead ({label}): {overheads[m]:.1f}%")
    shown = methods[-1]
    print(
        f"step-time-only overhead: {(statistics.median(inst_steps[shown]) / plain_step_s - 1) * 100:.1f}% "
        f"({LABELS[shown]})"
    )
    print(f"wall overhead: {overheads[shown]:.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
