"""What the workers' shared probe decision costs (:mod:`gpuscale.trainer.vote`).

Starts ``--workers`` local workers (loopback ``TF_CONFIG``s, one CPU device each,
as ``gpuscale run --strategy multi-worker --local-workers N`` does) with the
built-in trainer's model (default: mnist-cnn, 8 channels, global batch 32).
Every worker runs, in lockstep, ``--rounds`` rounds of ``--steps`` steps of two
arms taking turns step by step (A B B A, so what one step leaves to the next
falls on both alike), each step timed on the host until its values arrive:

* ``plain``: the trainer's ``train_fn`` (the step without a ballot);
* ``vote``: ``voting_train_fn``, the same step with the ballot's two numbers (probe,
  stop) summed in it (what a multi-worker run runs: it rides the gradients' own
  all-reduce), its sum read on the host;
* ``separate``: the step with the ballot in an all-reduce of its own (the
  fallback where the optimizer cannot skip its sum).

Then ``--steps`` x ``--rounds`` calls of the Keras monitor's vote between steps
(:func:`gpuscale.keras.monitor.vote_function`), each timed alone.

Worker 0 prints the median step of each arm, ``in-step vote: X% of the step``
(median over rounds of median(vote) / median(plain) - 1), the vote between
steps in ms and as a share of the median plain step, and the gap
:class:`~gpuscale.trainer.vote.GapVote` would choose at the default budget.

Run: ``python benchmarks/multiworker_vote.py [--workers 2] [--rounds 5] [--steps 200]``.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time

from local_workers import run_as_workers  # benchmarks/local_workers.py, beside this script

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def worker(args: argparse.Namespace) -> None:
    import tensorflow as tf

    from gpuscale.keras.monitor import vote_function
    from gpuscale.trainer import loop
    from gpuscale.trainer.options import TrainConfig
    from gpuscale.trainer.schedule import DEFAULT_BUDGET, DEFAULT_RESERVE
    from gpuscale.trainer.vote import MAX_GAP, VOTE_SHARE

    config = TrainConfig(
        strategy="multi-worker",
        width=args.width,
        global_batch=args.global_batch,
        steps=args.steps,
        warmup_steps=0,
    )
    plan = loop.setup_devices(config)
    trainer = loop.Trainer(config, plan)
    strategy = trainer.strategy
    batches = trainer.batches()
    ballot = tf.constant([0.0, 0.0], tf.float32)  # [probe ballot, stop]

    def plain() -> None:
        trainer._sync(trainer.train_fn(next(batches)))

    def vote() -> None:
        trainer._voting_step(next(batches), ballot)

    def separate() -> None:
        done, total = trainer._separate_voting_fn(next(batches), ballot)
        trainer._sync(done)
        strategy.experimental_local_results(total)[0].numpy()

    arms = {"plain": plain, "vote": vote, "separate": separate}
    for _ in range(5):  # compile them all
        for fn in arms.values():
            fn()
    riding = trainer.voting_train_fn is not trainer._separate_voting_fn
    ratios: dict[str, list[float]] = {"vote": [], "separate": []}
    all_times: dict[str, list[float]] = {arm: [] for arm in arms}
    orders = [("plain", "vote", "separate"), ("separate", "vote", "plain")]
    for _ in range(args.rounds):
        times: dict[str, list[float]] = {arm: [] for arm in arms}
        for i in range(args.steps):
            for arm in orders[i % 2]:
                t0 = time.perf_counter()
                arms[arm]()
                times[arm].append(time.perf_counter() - t0)
        for arm in ratios:
            ratios[arm].append(
                statistics.median(times[arm]) / statistics.median(times["plain"]) - 1
            )
        for arm in arms:
            all_times[arm] += times[arm]
    plain_s, vote_s = all_times["plain"], all_times["vote"]

    between = vote_function(strategy)
    zeros = tf.zeros([2], tf.float32)
    strategy.experimental_local_results(between(zeros))[0].numpy()  # compile
    costs = []
    for _ in range(args.rounds * args.steps):
        t0 = time.perf_counter()
        strategy.experimental_local_results(between(zeros))[0].numpy()
        costs.append(time.perf_counter() - t0)
    if trainer.strategy.cluster_resolver.task_id != 0:
        return
    step = statistics.median(plain_s)
    cost = statistics.median(costs)
    share = VOTE_SHARE * DEFAULT_BUDGET * (1 - DEFAULT_RESERVE)
    gap = max(1, min(MAX_GAP, math.ceil(cost / (share * step))))
    print(
        f"model {trainer.model.name}, {args.workers} workers x {trainer.num_replicas // args.workers} "
        f"{plan.platform} device, global batch {trainer.global_batch}; {args.rounds} rounds of "
        f"{args.steps} steps per arm; median step plain {step * 1000:.2f} ms, with the ballot "
        f"{statistics.median(vote_s) * 1000:.2f} ms "
        f"({'riding the gradient all-reduce' if riding else 'an all-reduce of its own'}); "
        "per round " + ", ".join(f"{r:+.1%}" for r in ratios["vote"])
    )
    print(
        f"ballot in an all-reduce of its own inside the step: "
        f"{statistics.median(ratios['separate']):+.1%} of the step (median over rounds)"
    )
    print(
        f"vote between steps (Keras monitor): {cost * 1000:.2f} ms median "
        f"({cost / step:.1%} of the plain step; at the default budget one every {gap} steps, "
        f"{cost / (gap * step):.2%} of the wall)"
    )
    print(f"in-step vote: {statistics.median(ratios['vote']):+.1%} of the step")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200, help="steps per arm and round")
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
