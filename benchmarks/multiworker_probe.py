"""What one probe costs on several workers: the split step against the two-pass probe.

Starts ``--workers`` local workers (loopback ``TF_CONFIG``s, one CPU device each,
as ``gpuscale run --strategy multi-worker --local-workers N`` does) with the
built-in trainer's model (default: mnist-cnn, 8 channels, global batch 32).
Every worker runs, in lockstep, ``--rounds`` rounds of ``--steps`` usual steps
(the trainer's ``train_fn``), with a probe every ``--gap`` steps, the two
methods taking turns (so what the machine does meanwhile falls on both alike):

* ``split-step``: the probed step itself trains split
  (:meth:`~gpuscale.trainer.probe.PhaseProbe.measure_split` with the trainer's
  :class:`~gpuscale.trainer.split_step.SplitStep`); its cost is the extra
  passes, plus what the split step took over the round's median usual step,
  plus what the step after it took over that median (as the scheduler counts it);
* ``differenced``: the two-pass probe between steps
  (:meth:`~gpuscale.trainer.probe.PhaseProbe.measure`, what multi-worker runs
  used before), its passes plus the excess of the step after it.

Worker 0 prints, per method, the median cost of a probe in ms and in usual
steps (each probe's cost over its round's median step), and last
``split-step probe: X steps against Y (two-pass), Z% of its cost``.

Run: ``python benchmarks/multiworker_probe.py [--workers 2] [--rounds 5] [--steps 200] [--gap 10]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from local_workers import run_as_workers  # benchmarks/local_workers.py, beside this script

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def worker(args: argparse.Namespace) -> None:
    from gpuscale.trainer import loop
    from gpuscale.trainer.options import TrainConfig

    config = TrainConfig(
        strategy="multi-worker",
        width=args.width,
        global_batch=args.global_batch,
        steps=args.steps,
        warmup_steps=0,
    )
    plan = loop.setup_devices(config)
    trainer = loop.Trainer(config, plan)
    batches = trainer.batches()
    probe, split = trainer.probe, trainer.split_step

    def step() -> float:
        t0 = time.perf_counter()
        trainer._sync(trainer.train_fn(next(batches)))
        return time.perf_counter() - t0

    batch = next(batches)
    if not split.prepare(batch):
        raise SystemExit(f"the split step cannot run here: {split.problem}")
    probe.prepare(batch)
    for _ in range(5):  # warm every function up
        step()
        probe.measure(next(batches))
        probe.measure_split(next(batches), split.run)
    costs: dict[str, list[float]] = {"split-step": [], "differenced": []}
    in_steps: dict[str, list[float]] = {"split-step": [], "differenced": []}
    usual_all: list[float] = []
    for _ in range(args.rounds):
        usual: list[float] = []
        raw: list[tuple[str, float, float]] = []  # (method, passes + split step, next step)
        turn = 0
        for i in range(args.steps):
            if i % args.gap == args.gap - 1:
                method = ("split-step", "differenced")[turn % 2]
                turn += 1
                if method == "split-step":
                    times, train_s = probe.measure_split(next(batches), split.run)
                    paid = times.cost_s + train_s  # less a usual step, below
                else:
                    step()  # the probed step, usual; its probe follows it
                    paid = probe.measure(next(batches)).cost_s
                raw.append((method, paid, step()))
            else:
                usual.append(step())
        median = statistics.median(usual)
        usual_all += usual
        for method, paid, after in raw:
            cost = paid - (median if method == "split-step" else 0.0) + (after - median)
            costs[method].append(cost)
            in_steps[method].append(cost / median)
    if trainer.strategy.cluster_resolver.task_id != 0:
        return
    step_s = statistics.median(usual_all)
    print(
        f"model {trainer.model.name}, {args.workers} workers x {trainer.num_replicas // args.workers} "
        f"{plan.platform} device, global batch {trainer.global_batch}; {args.rounds} rounds of "
        f"{args.steps} steps, a probe every {args.gap}, the methods taking turns; median usual "
        f"step {step_s * 1000:.2f} ms"
    )
    for method in costs:
        print(
            f"{method}: {len(costs[method])} probes, median cost "
            f"{statistics.median(costs[method]) * 1000:.1f} ms = "
            f"{statistics.median(in_steps[method]):.2f} steps ("
            + ("extra passes, split step's excess" if method == "split-step" else "two passes")
            + ", the step after)"
        )
    split_steps = statistics.median(in_steps["split-step"])
    two_pass = statistics.median(in_steps["differenced"])
    print(
        f"split-step probe: {split_steps:.2f} steps against {two_pass:.2f} (two-pass), "
        f"{split_steps / two_pass:.0%} of its cost"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200, help="steps per round")
    parser.add_argument("--gap", type=int, default=10, help="steps from one probe to the next")
    parser.add_argument("--width", type=int, default=8)
    parser.add_argument("--global-batch", type=int, default=32)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return 0
    return run_as_workers(__file__, sys.argv[1:], args.workers)


if __name__ == "__main__":
    sys.exit(main())
