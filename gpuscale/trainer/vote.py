"""Several workers, one probe decision: the chief's budgeted schedule, shared by a
vote (pure Python, no TensorFlow; the built-in trainer and the Keras monitor
carry the vote in a collective sum).

A probe's all-reduce is a collective every worker of a MultiWorkerMirroredStrategy
joins, so every worker must probe after the same steps; yet each worker's own
:class:`~gpuscale.trainer.schedule.ProbeScheduler`, fed its own timings, would
decide differently. So the chief's (worker 0's) scheduler decides for all:
every worker casts its own ballot (1 when its schedule asks for a probe), the
collective sum keeps replica 0's alone (worker 0's first device: one ballot,
however many devices a worker has, and no worker needs to know which it is),
and that sum, which every worker takes part in, is the decision every worker
reads. Every worker keeps feeding its own scheduler its own steps and probes
(its events' reference step comes from it).

The step's sum carries a stop too (:func:`step_ballot`, :func:`stop_agreed`): every
replica adds 1 when its worker was asked to stop (SIGTERM, SIGINT), so every
worker learns in the same step that one was, and all leave after it; a worker
that left alone would leave the others waiting in the next step's all-reduce.
The worker asked says so in a log line (:func:`stop_asked_message`), by which the
chief's gpuscale names it when the stop did not come through gpuscale
(:func:`stop_asked_signal`).

Two ways to carry the sum:

* :class:`StepVote` (the built-in trainer, which owns the step): the ballot is
  one more number in the step's own gradient all-reduce (TensorFlow packs the
  gradients into one collective; the ballot joins the pack), read on the host
  with the step's own synchronisation. ``benchmarks/multiworker_vote.py``, two
  CPU workers, 26 ms steps: -1.1 % of the step (noise), where an all-reduce of
  its own in the step cost +15.4 %. The ballot cast before
  step ``k`` is the chief's decision after step ``k - 1``; every worker reads it
  after step ``k`` and probes then (the built-in trainer: it splits step
  ``k + 1``, which carries no ballot). So a decision runs one step late, and is
  asked for once: :meth:`StepVote.ballot` asks the schedule only after the last
  decision was read (and that probe added), never while a yes is on its way.
* :class:`GapVote` (the Keras monitor, which does not own the step): a separate
  small sum between steps: the first after :data:`FIRST_PROBE_AFTER` counted
  steps (when the first probe is due), then every ``gap`` steps; no lag, but
  each vote is a collective of its own, so it has a cost. The chief measures it
  and picks the gap so the votes take at most :data:`VOTE_SHARE` of the probe
  budget, and sends the next gap in the same sum, so every worker votes at the
  same steps. The votes' cost is counted into the probes'
  (``ProbeScheduler.add_overhead``) and into the next probe's event.
"""

from __future__ import annotations

import math

from gpuscale.analysis import metrics
from gpuscale.trainer.schedule import FIRST_PROBE_AFTER, ProbeScheduler

VOTE_SHARE = 0.1
"""The part of the probe budget the votes between steps (:class:`GapVote`) may take."""
MAX_GAP = 100
"""The most steps between two votes (what the fixed period was at the default 2 %)."""


STOP = 1
"""Where a step's ballot holds the stop (at 0: the probe ballot)."""
OTHER_REPLICAS_SHARE = (0.0, 1.0)
"""What the step sums of every replica's ballot but replica 0's: its stop alone
(replica 0's counts whole), so the sum is ``(the chief's probe ballot, stops)``."""


def step_ballot(probe: float, stop: bool) -> tuple[float, float]:
    """What a worker casts into a step: its probe ballot (:meth:`StepVote.ballot`,
    0.0 where no vote is held) and whether it was asked to stop."""
    return probe, 1.0 if stop else 0.0


_STOP_ASKED = ("received ", ": stopping after the current step")


def stop_asked_message(signal_name: str) -> str:
    """What a worker logs when it is asked to stop (``signal_name``: ``SIGTERM``...)."""
    head, tail = _STOP_ASKED
    return f"{head}{signal_name}{tail}"


def stop_asked_signal(message: str) -> str | None:
    """The signal a worker's :func:`stop_asked_message` names; None for any other line."""
    head, tail = _STOP_ASKED
    if len(message) <= len(head) + len(tail) or not message.startswith(head):
        return None
    return message[len(head) : -len(tail)] if message.endswith(tail) else None


def stop_agreed(total: tuple[float, float]) -> bool:
    """Whether a step's sum says some worker was asked to stop: then every worker
    leaves after that same step."""
    return total[STOP] > 0.5


class StepVote:
    """The chief's decision carried in the step's own sum (one step late).

    Each step: cast :meth:`ballot` into the step; after it, feed the schedule the
    step (``add_step``), then :meth:`received` the step's sum: True means every
    worker probes now (add that probe to the schedule before the next ballot)."""

    def __init__(self, schedule: ProbeScheduler, *, chief: bool = True):
        """``chief``: this worker's ballot may count (the trainer lets every worker
        cast and the sum keep replica 0's)."""
        self.schedule = schedule
        self.chief = chief
        self._in_flight = False
        """A yes ballot was cast and its sum not yet read."""
        self.decisions = 0
        """Probes asked for (by the chief's ballots) so far; the same on every worker."""

    def ballot(self) -> float:
        """This worker's ballot for the next step: 1.0 from the chief when its schedule
        asks for a probe, else 0.0 (asked once per decision: never while one is on its way)."""
        if not self.chief or self._in_flight:
            return 0.0
        if self.schedule.due():
            self._in_flight = True
            return 1.0
        return 0.0

    def received(self, total: float) -> bool:
        """The step's sum of ballots: whether every worker probes after this step."""
        self._in_flight = False
        probe = total > 0.5
        self.decisions += probe
        return probe


class GapVote:
    """The chief's decision carried in a sum of its own, every ``gap`` steps (no lag).

    After each step, fed to the schedule: :meth:`voting` says whether this step
    votes; if so, every worker sums :meth:`ballot` (``[probe, next gap]``), the chief
    adds the vote's measured cost with :meth:`cost`, and :meth:`received` of the
    sum says whether to probe now and sets when the next vote is."""

    def __init__(self, schedule: ProbeScheduler, *, chief: bool = True):
        self.schedule = schedule
        self.chief = chief
        self.next_vote = 0
        """The schedule's step count from which the next vote is (the first: after
        :data:`FIRST_PROBE_AFTER` counted steps, when the first probe is due)."""
        self.gap = 1
        self.votes = 0
        self._costs: list[float] = []
        self._unreported = 0.0

    def voting(self) -> bool:
        """Whether the step just fed to the schedule votes (every worker agrees on it:
        it depends only on step counts and on the chief's last gap)."""
        if not self.votes:
            return self.schedule.counting and self.schedule.counted_steps >= FIRST_PROBE_AFTER
        return self.schedule.counting and self.schedule.steps >= self.next_vote

    def ballot(self) -> tuple[float, float]:
        """This worker's ``(probe, next gap)``: the chief's decision, zeros elsewhere."""
        if not self.chief:
            return 0.0, 0.0
        return (1.0 if self.schedule.due() else 0.0), float(self.next_gap())

    def next_gap(self) -> int:
        """Steps to the next vote: as few as keep the votes within ``VOTE_SHARE`` of the
        probe budget against the usual step (1 before a vote was timed), at most
        :data:`MAX_GAP`."""
        step_s = self.schedule.reference_step_s(0.0)
        share = VOTE_SHARE * self.schedule.probe_budget
        if not self._costs or step_s <= 0 or share <= 0:
            return 1
        cost = metrics.median(self._costs[-9:])
        return max(1, min(MAX_GAP, math.ceil(cost / (share * step_s))))

    def cost(self, cost_s: float) -> None:
        """A vote took ``cost_s`` of wall clock on this worker: counted as the probes'."""
        self._costs.append(cost_s)
        self._unreported += cost_s
        self.schedule.add_overhead(cost_s)

    def take_cost(self) -> float:
        """The votes' cost since the last call (a probe's event carries the votes
        before it, so the summary's probe cost holds them)."""
        cost, self._unreported = self._unreported, 0.0
        return cost

    def received(self, total: tuple[float, float]) -> bool:
        """The sum of the ballots: whether every worker probes now; sets the next vote."""
        self.votes += 1
        self.gap = max(1, min(MAX_GAP, round(total[1])))
        self.next_vote = self.schedule.steps + self.gap
        return total[0] > 0.5
