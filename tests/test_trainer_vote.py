"""Several workers, one probe decision (gpuscale.trainer.vote), on simulated
workers: each has its own scheduler and its own made-up timings, the collective
sum is a Python sum of the ballots that keeps worker 0's alone (as the step
keeps replica 0's). No TensorFlow, no clock."""

from __future__ import annotations

import random

from gpuscale.trainer.schedule import FIRST_PROBE_AFTER, ProbeScheduler, period_for_budget
from gpuscale.trainer.vote import (
    MAX_GAP,
    OTHER_REPLICAS_SHARE,
    GapVote,
    StepVote,
    step_ballot,
    stop_agreed,
    stop_asked_message,
    stop_asked_signal,
)


def step_votes(
    workers: int,
    steps: int,
    *,
    budget: float = 0.02,
    warmup: int = 0,
    step_s=lambda i: 0.1,
    probe_s=lambda i: 0.2,
    horizon: int | None = None,
) -> tuple[list[list[int]], list[ProbeScheduler]]:
    """The built-in trainer's loop on ``workers`` simulated workers (each a little
    slower than the last, with its own noise): the steps after which each probed."""
    schedules = [ProbeScheduler(budget, horizon_steps=horizon) for _ in range(workers)]
    votes = [StepVote(s, chief=True) for s in schedules]  # every worker casts; worker 0 counts
    rngs = [random.Random(w) for w in range(workers)]
    probed: list[list[int]] = [[] for _ in range(workers)]
    for i in range(steps):
        ballots = [v.ballot() for v in votes]  # cast into step i
        total = ballots[0]  # the step's sum keeps replica 0's ballot
        for w in range(workers):
            slower = 1 + 0.2 * w
            schedules[w].add_step(step_s(i) * slower * rngs[w].uniform(0.8, 1.2), warmup=i < warmup)
            if votes[w].received(total):
                probed[w].append(i)
                schedules[w].add_probe(probe_s(i) * slower, 0.1 + rngs[w].uniform(-0.01, 0.01))
    return probed, schedules


def test_every_worker_probes_after_the_same_steps():
    probed, _ = step_votes(3, 3000, warmup=2, horizon=2998)
    assert len(probed[0]) >= 5
    assert probed[1] == probed[0] and probed[2] == probed[0]


def test_the_first_probe_comes_after_first_probe_after_counted_steps_one_step_late():
    probed, _ = step_votes(2, 200, warmup=5)
    # worker 0 asks after its FIRST_PROBE_AFTER-th counted step; the ballot rides the
    # next step, after which every worker probes (as the split step runs one step late)
    assert probed[0][0] == 5 + FIRST_PROBE_AFTER
    assert probed[1][0] == probed[0][0]


def test_a_decision_on_its_way_is_not_asked_for_again():
    schedule = ProbeScheduler(0.5)
    vote = StepVote(schedule, chief=True)
    for _ in range(FIRST_PROBE_AFTER):
        schedule.add_step(0.1)
    assert vote.ballot() == 1.0
    schedule.add_step(0.1)
    assert schedule.due()  # the probe has not run yet: the schedule still asks
    assert vote.ballot() == 0.0  # but that decision is already on its way
    assert vote.received(1.0) and vote.decisions == 1
    schedule.add_probe(0.05, 0.1)
    assert not vote.received(0.0) and vote.decisions == 1


def test_only_the_chiefs_ballot_says_yes():
    schedule = ProbeScheduler(0.5)
    worker = StepVote(schedule, chief=False)
    for _ in range(10):
        schedule.add_step(0.1)
    assert schedule.due() and worker.ballot() == 0.0


def test_the_budget_is_kept_where_a_fixed_period_would_not_be():
    # a probe costing 6 steps: the old fixed period (ceil(2 / budget) = 100 steps,
    # made for a 2-step probe) would spend 6 %; the chief's budgeted schedule keeps 2 %
    probed, schedules = step_votes(2, 5000, probe_s=lambda i: 0.6)
    assert period_for_budget(0.02) == 100 and 0.6 / (100 * 0.1) > 0.05
    assert len(probed[0]) >= 3
    for schedule in schedules:
        assert schedule.spent_share <= schedule.budget + 1e-9
    assert schedules[0].spent_share <= schedules[0].probe_budget + 1e-9


def test_the_workers_probe_again_together_after_a_step_time_shift():
    probed, schedules = step_votes(
        2, 3000, horizon=3000, step_s=lambda i: 0.1 if i < 1500 else 0.2, probe_s=lambda i: 0.1
    )
    assert schedules[0].shifts >= 1
    before = [i for i in probed[0] if 1400 <= i < 1500]
    after = [i for i in probed[0] if 1500 <= i < 1600]
    assert len(after) > len(before)
    assert probed[1] == probed[0]


def gap_votes(
    workers: int, steps: int, *, vote_s: float, step_s: float = 0.1, warmup: int = 0
) -> tuple[list[list[int]], list[list[int]], list[GapVote]]:
    """The Keras monitor's votes between steps on simulated workers: the steps at
    which each voted and after which each probed."""
    schedules = [ProbeScheduler(0.02) for _ in range(workers)]
    votes = [GapVote(s, chief=True) for s in schedules]
    rngs = [random.Random(w) for w in range(workers)]
    voted: list[list[int]] = [[] for _ in range(workers)]
    probed: list[list[int]] = [[] for _ in range(workers)]
    for i in range(steps):
        for w in range(workers):
            schedules[w].add_step(step_s * rngs[w].uniform(0.8, 1.2), warmup=i < warmup)
        voting = [v.voting() for v in votes]
        assert len(set(voting)) == 1  # the workers agree when to vote
        if not voting[0]:
            continue
        ballots = [v.ballot() for v in votes]
        total = ballots[0]
        for w in range(workers):
            voted[w].append(i)
            votes[w].cost(vote_s * rngs[w].uniform(0.5, 1.5))
            if votes[w].received(total):
                probed[w].append(i)
                schedules[w].add_probe(0.2, 0.1)
    return voted, probed, votes


def test_votes_between_steps_are_spaced_by_their_cost_and_shared():
    voted, probed, votes = gap_votes(2, 3000, vote_s=0.001, warmup=2)
    # the first vote when the first probe is due, after FIRST_PROBE_AFTER counted steps
    assert voted[0][0] == 2 + FIRST_PROBE_AFTER - 1 and probed[0][0] == voted[0][0]
    assert voted[1] == voted[0] and probed[1] == probed[0] and len(probed[0]) >= 3
    # a 1 ms vote against a 100 ms step is 1 % of it: within a tenth of the probes'
    # 1 % (VOTE_SHARE), one vote every 10 steps or so (the median of noisy costs)
    assert 7 <= votes[0].gap <= 14
    schedule = votes[0].schedule
    assert schedule.overhead_s > 0 and schedule.spent_share <= schedule.budget + 1e-9
    dear, _, dear_votes = gap_votes(2, 3000, vote_s=0.02)
    assert dear_votes[0].gap == MAX_GAP  # a 20 ms vote: 200 steps apart, capped
    assert len(dear[0]) < len(voted[0])


def test_the_votes_cost_rides_the_next_probe_event():
    schedule = ProbeScheduler(0.02)
    vote = GapVote(schedule, chief=True)
    vote.cost(0.003)
    vote.cost(0.002)
    assert abs(vote.take_cost() - 0.005) < 1e-12 and vote.take_cost() == 0.0
    assert abs(schedule.overhead_s - 0.005) < 1e-12


def _step_sum(ballots: list[tuple[float, float]]) -> tuple[float, float]:
    """The step's sum as the trainer's graph makes it: replica 0's ballot whole,
    every other replica's times OTHER_REPLICAS_SHARE."""
    shared = [ballots[0]] + [
        tuple(b * s for b, s in zip(ballot, OTHER_REPLICAS_SHARE, strict=True))
        for ballot in ballots[1:]
    ]
    return tuple(sum(column) for column in zip(*shared, strict=True))


def test_a_stop_of_any_worker_rides_the_step_with_the_chiefs_probe_ballot_alone():
    """Every worker casts a probe ballot of 1: the sum keeps the chief's alone; a stop
    asked of any one worker (the chief or not) reaches every worker in the same sum,
    and does not change the probe decision."""
    assert step_ballot(1.0, False) == (1.0, 0.0) and step_ballot(0.0, True) == (0.0, 1.0)
    for stopped in (set(), {0}, {2}, {0, 1, 2}):
        total = _step_sum([step_ballot(1.0, w in stopped) for w in range(3)])
        assert total[0] == 1.0
        assert stop_agreed(total) == bool(stopped)
        assert StepVote(ProbeScheduler(0.02), chief=True).received(total[0])
    total = _step_sum([step_ballot(0.0, w == 1) for w in range(2)])
    assert total == (0.0, 1.0) and stop_agreed(total)


def test_a_workers_stop_line_names_its_signal_and_nothing_else_does():
    assert stop_asked_signal(stop_asked_message("SIGTERM")) == "SIGTERM"
    assert stop_asked_signal(stop_asked_message("SIGINT")) == "SIGINT"
    for other in ("received : stopping after the current step", "received SIGTERM", "hello"):
        assert stop_asked_signal(other) is None
