"""What gpuscale's instrumented training loop costs on the wall clock, probes included.

Same model, same devices, same batch, same optimizer and variables, in one
process: by default a small mnist-cnn (8 channels, global batch 32) on 2 logical
CPU devices with MirroredStrategy. Each round runs:

* ``plain``: ``--steps`` steps of the same trainer with gpuscale's measurement
  off: its own compiled step (``Trainer.train_fn``), synchronised each step as a
  loop that fetches its loss is, no events, no probes (``--phase-every 0``
  without the step timing). Both arms run one compiled step, so the process's
  offset of one compiled function against another (below) is not in the figure;
* ``gpuscale``: ``--steps`` steps of :meth:`gpuscale.trainer.loop.Trainer.run`,
  the loop the trainer process runs: synchronised step timing, StepEvents sent as
  the trainer sends them (an EventClient's thread encoding them to an
  EventServer in a process of its own, as gpuscale's is: benchmarks/event_sink.py), and the phase probes at the default budget (``--probe-budget``), a fresh schedule
  each round, i.e. a whole run with its dense start;
* ``dense``: ``--dense-steps`` steps of the same loop probing at every step:
  the reference breakdown (timed for nothing else).

``--probe-method`` picks the trainer's probe: ``split`` (the default: the
probed step runs split, one extra compute pass), ``two-pass`` (two extra passes
between steps, the method the Keras callback keeps), or ``both``: each round
then runs the pair of blocks once per method, the methods' order alternating
from round to round, each method against its own plain arm (three arms in one
lockstep would not do: the two gpuscale arms share one compiled step, so only
the plain arm would pay for switching functions after every step).

``plain`` and ``gpuscale`` advance in lockstep, step by step (one plain step
and the gpuscale loop up to its next step, a probe after the previous step
included), so drifting machine load hits both alike; which goes first
alternates from step to step (A B B A ...), so what one step leaves to the next
(TensorFlow's work after a function returns, caches) falls on both alike. Each
one's wall clock is the sum of its slices: the whole run, probes included.
Printed per method: the wall clock per round, the exposed all-reduce share of
the budgeted runs against the dense reference (pooled over all rounds, and per
round; both the median exposed time over the plain arm's median step, since a
run probed at every step has no unprobed step of its own to be a share of), what one probe costs as the scheduler counts it (passes, split step and
the slower step after it; in ms and in plain steps), the median step times
(step-time-only overhead, probes left out) and ``wall overhead (method)`` =
median over rounds of wall(gpuscale) / wall(plain) - 1; last, for the default
method (with ``both``: the split step), ``step-time-only overhead`` and
``wall overhead: X%``. Above them, ``trainer's step against a hand-written
one``: each round also runs ``--steps`` steps of a hand-written fused step
(``strategy.run`` of forward, backward and ``optimizer.apply`` in one
``tf.function``, the loss fetched) against the trainer's own step, A B B A, no
gpuscale code in either: what the trainer's step itself costs against the one a
user would write (the two compiled functions' offset in this process included).
Compiling the probe's functions and the split step (once
per process) is done before the rounds. By default all of it runs in 3 fresh
processes, one after the other (``--processes``), and the last two lines are the
medians over them (:mod:`benchmarks.processes` says why).

Run: ``python benchmarks/overhead.py [--rounds R] [--steps N] [--probe-budget 2%]
[--probe-method split|two-pass|both]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import msgspec

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks.processes import add_processes_argument, in_processes  # noqa: E402

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
    add_processes_argument(parser)
    args = parser.parse_args()
    if args.processes > 1:
        return in_processes(
            __file__,
            args.processes,
            (
                "trainer's step against a hand-written one",
                "step-time-only overhead",
                "wall overhead",
            ),
        )

    import tensorflow as tf

    from benchmarks.event_sink import EventSink
    from gpuscale.analysis.summary import summarize
    from gpuscale.events.schema import PhaseEvent, StepEvent
    from gpuscale.events.transport import EventClient
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

    # Events travel as in a trainer under `gpuscale run`: each one queued on an
    # EventClient whose thread encodes and sends it to the EventServer, in a process
    # of its own as gpuscale's is (benchmarks/event_sink.py), so their cost is counted.
    sink = EventSink()
    client = EventClient.from_env(sink.env)

    batches = trainer.batches()
    trainer._batches = batches  # every loop uses the same (synthetic, on-device) batch
    methods = METHODS[args.probe_method]

    def gpuscale_block(steps: int, every: int | None, method: str) -> tuple[float, list]:
        trainer.config = msgspec.structs.replace(config, steps=steps, phase_every=every)
        start = time.perf_counter()
        events = list(trainer.run(probe_method=method))
        return time.perf_counter() - start, events

    def off_step() -> None:
        """One step of the same trainer with gpuscale's measurement off: its own compiled
        step, synchronised (as every loop that fetches its loss is), no events, no probes."""
        trainer._sync(trainer.train_fn(next(batches)))

    def handwritten_step() -> None:
        plain_step(next(batches)).numpy()

    def lockstep_round(steps: int, method: str) -> tuple[float, float, list[float], list]:
        """``steps`` steps of the trainer with its measurement off and a whole
        ``steps``-step gpuscale run of the same trainer, interleaved step by step, the
        two taking turns A B B A (so what one step leaves to the next falls on both
        alike; a probe runs in the gpuscale arm's turn, before its next step)."""
        trainer.config = msgspec.structs.replace(config, steps=steps, phase_every=None)
        run = trainer.run(probe_method=method)
        events: list = []
        plain_wall = inst_wall = 0.0
        times = []
        for i in range(steps):
            for arm in ("plain", "gpuscale") if i % 2 == 0 else ("gpuscale", "plain"):
                t0 = time.perf_counter()
                if arm == "plain":
                    off_step()
                    t1 = time.perf_counter()
                    times.append(t1 - t0)
                    plain_wall += t1 - t0
                    continue
                for event in run:  # up to the next step: a probe after the previous one included
                    client.send(event)
                    events.append(event)
                    if isinstance(event, StepEvent):
                        break
                inst_wall += time.perf_counter() - t0
        t1 = time.perf_counter()
        for event in run:  # a probe after the last step
            client.send(event)
            events.append(event)
        inst_wall += time.perf_counter() - t1
        counted[method].append(trainer.schedule)
        return plain_wall, inst_wall, times, events

    def handwritten_round(steps: int) -> float:
        """``steps`` steps of a hand-written fused step against as many of the trainer's
        own step (measurement off), A B B A: wall(trainer) / wall(hand-written)."""
        walls_ = {"own": 0.0, "handwritten": 0.0}
        for i in range(steps):
            for arm in ("own", "handwritten") if i % 2 == 0 else ("handwritten", "own"):
                t0 = time.perf_counter()
                off_step() if arm == "own" else handwritten_step()
                walls_[arm] += time.perf_counter() - t0
        return walls_["own"] / walls_["handwritten"]

    # Compile everything (the probe's passes and the split step included) before measuring.
    for _ in range(5):
        handwritten_step()
        off_step()
    setups: dict[str, float] = {}  # the one-time compile of each method's probe (setup_s)
    for m in methods:
        warm = gpuscale_block(5, 1, m)[1]
        setups[m] = sum(e.setup_s or 0.0 for e in warm if isinstance(e, PhaseEvent))

    counted: dict[str, list] = {m: [] for m in methods}  # each budgeted run's scheduler
    walls: dict[str, list[float]] = {m: [] for m in methods}
    plain_walls: dict[str, list[float]] = {m: [] for m in methods}
    plain_steps: dict[str, list[float]] = {m: [] for m in methods}
    inst_steps: dict[str, list[float]] = {m: [] for m in methods}
    budget_rounds: dict[str, list[list]] = {m: [] for m in methods}
    dense_rounds: dict[str, list[list]] = {m: [] for m in methods}
    own_vs_handwritten: list[float] = []
    for r in range(args.rounds):
        own_vs_handwritten.append(handwritten_round(args.steps))
        for m in methods if r % 2 == 0 else methods[::-1]:
            plain_wall, inst_wall, times, events = lockstep_round(args.steps, m)
            plain_walls[m].append(plain_wall)
            walls[m].append(inst_wall)
            plain_steps[m] += times
            inst_steps[m] += [e.step_time_s for e in events if isinstance(e, StepEvent)]
            budget_rounds[m].append(events)
            dense_rounds[m].append(gpuscale_block(args.dense_steps, 1, m)[1])

    def share(events: list) -> tuple[float | None, float | None, int]:
        """The median exposed all-reduce of ``events``' probes over the plain arm's
        median step, with its 95 % half-width, and the probes counted: both
        breakdowns against the same usual step (a run probed at every step has no
        step that follows no probe, so its own steps, all slowed by the probe before
        them, would make its share smaller; the exposed time does not depend on them)."""
        s = summarize(events)
        if not s.phase_steps or usual_step_s <= 0:
            return None, None, s.phase_steps
        err = s.allreduce_err_s / usual_step_s if s.allreduce_err_s is not None else None
        return s.allreduce_s / usual_step_s, err, s.phase_steps

    def pooled(rounds: list[list]) -> list:
        # one step numbering per round; the summary needs no more than the phases
        return [e for events in rounds for e in events if isinstance(e, PhaseEvent)]

    def pct(value: float | None, err: float | None) -> str:
        if value is None:
            return "n/a"
        return f"{value:.1%}" + (f" ± {err * 100:.1f}" if err is not None else "")

    client.close()
    received = sink.close()
    plain_step_s = statistics.median(s for m in methods for s in plain_steps[m])
    usual_step_s = plain_step_s  # the step the exposed shares are of (share())
    print(
        f"model {trainer.model.name}, {trainer.num_replicas} x {plan.platform}, "
        f"global batch {trainer.global_batch}, all-reduce {trainer.cross_device_ops}; "
        f"{args.rounds} rounds of {args.steps} steps, probe budget {args.probe_budget:.1%}; "
        f"probe methods {', '.join(LABELS[m] for m in methods)}; plain step "
        f"{plain_step_s * 1000:.2f} ms (median)"
    )
    overheads = {}
    for m in methods:
        label = LABELS[m]
        ratios = [g / p for g, p in zip(walls[m], plain_walls[m], strict=True)]
        overheads[m] = (statistics.median(ratios) - 1) * 100
        probes = [sum(isinstance(e, PhaseEvent) for e in events) for events in budget_rounds[m]]
        print(f"--- {label}: probes per run {probes}")
        print(
            "  wall per round (s): plain "
            + " ".join(f"{w:.2f}" for w in plain_walls[m])
            + " | gpuscale "
            + " ".join(f"{w:.2f}" for w in walls[m])
        )
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
        plain_m = statistics.median(plain_steps[m])
        print(
            f"  step-time-only overhead: {(statistics.median(inst_steps[m]) / plain_m - 1) * 100:.1f}% "
            f"(median step {statistics.median(inst_steps[m]) * 1000:.2f} ms vs plain "
            f"{plain_m * 1000:.2f} ms; probes left out)"
        )
        # where the wall clock went, over all rounds, against the plain arm's wall clock
        plain_total = sum(plain_walls[m])
        steps_total = sum(inst_steps[m])
        passes_total = sum(sum(c.probe_costs_s) for c in runs)
        rest = sum(walls[m]) - steps_total - passes_total
        print(
            f"  wall against plain, summed over rounds: steps {steps_total / plain_total - 1:+.1%} "
            f"(split steps included), probes' passes {passes_total / plain_total:+.1%}, "
            f"the rest (between steps) {rest / plain_total:+.1%}; mean step "
            f"{statistics.fmean(inst_steps[m]) * 1000:.2f} ms vs plain "
            f"{statistics.fmean(plain_steps[m]) * 1000:.2f} ms"
        )
        print(f"  wall overhead ({label}): {overheads[m]:.1f}%")
    run_wall = statistics.median(walls[methods[-1]])
    compiled = sum(setups.values())
    print(
        "one-time compile of the probe (warm-up, untimed, in none of these figures): "
        f"{compiled:.2f} s ("
        + ", ".join(f"{LABELS[m]} {s:.2f} s" for m, s in setups.items())
        + f"), {compiled / run_wall:.0%} of one measured run "
        f"({run_wall:.2f} s, {LABELS[methods[-1]]})"
    )
    print(
        "  trainer's step against a hand-written one, per round: "
        + " ".join(f"{(r - 1) * 100:+.1f}%" for r in own_vs_handwritten)
    )
    print(
        "trainer's step against a hand-written one: "
        f"{(statistics.median(own_vs_handwritten) - 1) * 100:.1f}%"
    )
    shown = methods[-1]
    print(
        "step-time-only overhead: "
        f"{(statistics.median(inst_steps[shown]) / statistics.median(plain_steps[shown]) - 1) * 100:.1f}% "
        f"({LABELS[shown]})"
    )
    print(f"events received by the gpuscale end (another process): {received:,}")
    print(f"wall overhead: {overheads[shown]:.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
