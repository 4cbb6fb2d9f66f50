"""When to probe: the phase probes' share of the wall clock within a budget
(pure Python, no TensorFlow; shared by the built-in trainer and the Keras callback).

A probe (:mod:`gpuscale.trainer.probe`) costs one extra forward+backward pass
and a split step (the built-in trainer) or two extra passes (the Keras callback,
and the trainer where the split cannot run), plus an all-reduce alone. Probing
every K-th step costs about ``1/K`` to ``2/K`` of the run (20 % at K=10 with two
passes); :class:`ProbeScheduler` instead keeps the probes' wall time
within ``budget`` of the run's wall time (default 2 %), and spends it where it
tells the most:

* **Dense at the start.** The first probe is asked for after the third counted
  step (:data:`FIRST_PROBE_AFTER`: it is measured against the median of those
  steps, not one that may be a one-off; it also measures what a probe costs). Until the breakdown is *resolved* (the
  probed share, e.g. the exposed all-reduce's share of the step, known to
  ``± precision``, default 2 points, from at least 3 probes; see
  :func:`gpuscale.analysis.metrics.median_halfwidth`; and the probes' phases
  splitting the step as the run's summary will judge them, :attr:`ProbeScheduler.unsplit_why`:
  a steady share of phases that do not add up to the step is "not resolved"), a probe runs whenever
  the budget allows, and when the run's length is known (``horizon_steps``; the
  run's wall clock projected from the 10th percentile of the step times so far)
  the whole run's probe allowance may be spent early: a 300-step run gets the
  probes it can pay for in its first steps, where they tell the most, not one
  now and the next near its end.
* **Spaced out once resolved**: a probe runs only while the probes' total stays
  within half the budget of the steps' wall clock so far: the
  breakdown is watched, not measured again (``resolved_rate``).
* **Never back to back**: after a probe, the next probe waits for the step after
  it, whose loss is part of the probe's cost and must be counted first, and then
  for a usual step (neither split nor after a probe): the usual step is each
  probe's reference, so without one between probes (a cheap probe at one device
  came every other step) the reference froze and every probe split the same old
  median, its phases as steady as that, however the steps went.
* **Again after a shift**: a change detector on step times (the median of the
  last ``window`` steps against the median of the first ``window`` steps after
  the start or the last shift, off by more than ``shift``; looked at every
  :data:`SHIFT_CHECK_EVERY` steps) marks the breakdown
  unresolved, so probes come back as densely as the budget allows (a changed step usually means a
  changed breakdown).

What a probe costs is what the user pays for it: the wall clock of its extra
passes *plus* what its split step takes over a usual step (a host
synchronisation between the halves; ``add_step(split=True)``) *plus* what the
step after it loses (caches and the thread pool are cold after the probe's own
compiled functions ran). Each excess is measured against the median of the last
``window`` steps that were neither split nor after a probe, summed unfloored so
noise cancels over probes, and counted only while the sum is positive.
The cost of the next probe is the median of the measured passes plus the mean
excesses (before the first probe, it is guessed as ``first_probe_steps``
steps: :data:`FIRST_PROBE_STEPS` for two passes, :data:`FIRST_SPLIT_PROBE_STEPS`
with the split step). The allowance is a share of the counted steps'
own wall clock, the run as it would take without gpuscale, so the budget is
the overhead a user sees (``wall with gpuscale / wall without - 1``). Every
rule is checked before a probe, with its cost counted in, so at any time after
the first probe ``spent <= budget x (1 - reserve) x max(steps' wall, projected
run)``: the probes leave ``reserve`` of the budget (:data:`DEFAULT_RESERVE`)
for the cost of every step that no timing inside the run can see.
* **A run that ends early keeps the budget too.** The early allowance is spent on
  the assumption that the run lasts ``horizon_steps``; ``--precision`` ends it as
  soon as the step time and breakdown are known well enough
  (:meth:`ProbeScheduler.precision_reached`: never on a breakdown whose phases do
  not split the step, which the summary calls not resolved), which is only once the steps run
  so far pay for the probes spent (``spent <= budget x (1 - reserve) x steps'
  wall``): a precision within the budget, ``--steps`` at the most. The probes
  then stop coming densely (the breakdown is resolved to the ``precision`` asked),
  and the run goes on, unprobed, only as long as it takes to pay for them, the
  steps :meth:`ProbeScheduler.steps_for_precision` estimates (and the early warning
  says, :meth:`ProbeScheduler.precision_outlook`). (A run stopped by hand may have
  spent the early allowance over fewer steps: its summary says what the probes cost
  against the steps it ran.)
The one exception is the first probe, asked for after the third counted step
(the built-in trainer's runs on the next step, split): without it there is no
breakdown at all. On a run shorter than about ``first_probe_steps / budget``
steps (125 at 2 % with two passes, 75 with the split step) that one probe alone
is over the budget; the run's summary says what the probes cost against the
steps.

``every=K`` (``--phase-every K``, ``ScalingMonitor(every=K)``) overrides all of
that: a probe after every K-th step (warm-up steps excepted; the built-in
trainer probes the step after it, split), whatever it costs.

Several workers (MultiWorkerMirroredStrategy) must probe at the same steps: the
probe's all-reduce is a collective every worker joins, and each worker's own
timings would schedule it differently. There worker 0's scheduler decides for
all, by budget as above, and a vote carries its decision to every worker
(:mod:`gpuscale.trainer.vote`: in the built-in trainer the ballot rides the
step's own gradient all-reduce, every worker reads it one step after it is asked
for and splits the step after that; the Keras monitor votes between steps, every few steps, and counts the
votes' cost with ``add_overhead``). ``every=K`` needs no vote: every worker
counts the same steps.
"""

from __future__ import annotations

import math
from collections import deque

from gpuscale.analysis import metrics
from gpuscale.analysis.summary import (
    DEFAULT_SHARE_PRECISION,
    PROBE_RESERVE,
    USUAL_STEPS_WINDOW,
    phase_breakdown,
)
from gpuscale.events.schema import PhaseEvent

DEFAULT_BUDGET = 0.02
"""The probes' default share of the wall clock."""
DEFAULT_PRECISION = DEFAULT_SHARE_PRECISION
"""The default half-width (a share of the step) to which the breakdown is pinned down:
the one the summaries report against (:data:`gpuscale.analysis.summary.DEFAULT_SHARE_PRECISION`)."""
DEFAULT_RESERVE = PROBE_RESERVE
"""(0.5; :data:`gpuscale.analysis.summary.PROBE_RESERVE`, which the summaries say
the probes' part of the budget with.) The part of the budget the probes leave for what gpuscale costs every step and
no timing inside the run can see: the synchronised step timing, building and
sending a StepEvent (a run cannot time itself against a run without gpuscale).
Measured with ``benchmarks/overhead.py`` on 2 CPU logical devices (the two arms
taking turns A B B A): the step-time-only overhead was 0.6 % and 0.8 % of a
17-31 ms step at first (a reserve of 0.4, 0.8 %); in five runs with the split
step (2026-11-23, 22-40 ms steps, load average 1-9 on 2 cores) 0.5 %, 4.0 %,
1.2 %, 1.0 %, 0.9 % (two-pass arms) and 0.7 %, 2.7 %, 0.6 %, 0.9 %, -0.1 % (split
arms; the usual steps are the same ``train_fn`` in both): median 0.9 %, so half
the default 2 %. The
probes aim at ``budget x (1 - reserve)`` (1 % by default); a split-step probe
costing half a two-pass one, they still probe more often than before."""
RANGE_FLOOR_PROBES = 6
"""Below this many probes the probed share's half-width is floored at 0.8 x the
probes' range (:attr:`ProbeScheduler.share_halfwidth`): a pessimistic width that
estimates of the probes still needed do not build on (the median absolute deviation
of a few probes swings either way)."""
FIRST_PROBE_AFTER = 3
"""Counted steps before the first probe (by budget): the probe's reference step is
the median of these, not one step that may be a one-off."""
FIRST_PROBE_STEPS = 2.5
"""The first two-pass probe's guessed cost, in steps: two step-sized passes, the
all-reduce alone and the slower step after it (measured with
``benchmarks/overhead.py``, 2 CPU logical devices, five runs of 2026-11-23:
first probes' passes 1.1-4.4 steps, median 1.9; a probe as the scheduler counts it
1.7-2.7 steps, 2.3 on average)."""
FIRST_SPLIT_PROBE_STEPS = 1.5
"""The first probe's guessed cost with the split step, in steps: one step-sized
pass, the all-reduce alone, the split step's excess and the slower step after it
(measured as above: first probes' passes 0.6-1.9 steps, median 1.0; a probe as
counted 1.1-1.9 steps, 1.5 on average: two thirds of the two-pass probe, as
much as it in one run on a busier machine, where the split steps and the steps
after them ran 16 ms over the usual 39 ms step)."""

SHIFT_CHECK_EVERY = 4
"""Counted steps between two looks of the change detector at the last steps' median
(each sorts them): a shift is seen at most 3 steps later. Inside a Keras fit of
50-step calls on a 4.5 ms CPU step, :meth:`ProbeScheduler.add_step` cost 10 µs a
step when it looked at every step."""
DUE_RECHECK_STEPS = 16
"""Between probes, :meth:`ProbeScheduler.due` works out how far the steps' wall clock
must grow before the budget can pay for the next probe and answers from that
alone until then, but looks at everything again at least every this many steps
(what the wall clock alone does not tell: a shift, the run's length, the fastest
steps, the breakdown's state). In the Keras callback on a 4.5 ms CPU step the whole
check cost 10 µs a step (measured inside ``fit``), a quarter of the callback's own
per-step work."""


def period_for_budget(budget: float, passes: float = 2.0) -> int | None:
    """The fixed probe period that keeps a probe of ``passes`` step-sized passes
    within ``budget`` (``None`` for a budget of 0: never): what several workers
    used before they shared worker 0's schedule (:mod:`gpuscale.trainer.vote`);
    a yardstick for it."""
    if budget <= 0:
        return None
    return max(1, math.ceil(passes / budget))


class ProbeScheduler:
    """Decides after each step whether to probe now. Feed it every step
    (:meth:`add_step`) and every probe (:meth:`add_probe`); ask :meth:`due`."""

    def __init__(
        self,
        budget: float = DEFAULT_BUDGET,
        *,
        every: int | None = None,
        horizon_steps: int | None = None,
        precision: float = DEFAULT_PRECISION,
        min_probes: int = 3,
        window: int = USUAL_STEPS_WINDOW,
        shift: float = 0.25,
        resolved_rate: float = 0.5,
        reserve: float = DEFAULT_RESERVE,
        first_probe_steps: float = FIRST_PROBE_STEPS,
        replicas: int = 1,
    ):
        if every is not None and every < 1:
            raise ValueError("every must be at least 1 (None: by budget)")
        if not 0 <= budget < 1:
            raise ValueError("budget is a share of the wall clock, in [0, 1)")
        self.budget = budget
        self.every = every
        self.horizon_steps = horizon_steps
        self.precision = precision
        self.min_probes = min_probes
        self.window = window
        self.shift = shift
        self.resolved_rate = resolved_rate
        self.reserve = reserve
        self.first_probe_steps = first_probe_steps
        self.replicas = replicas
        """The replicas the probes' phases split the step on (several: the exposed
        exchange is what is probed; :attr:`unsplit_why`)."""
        self.steps = 0
        """Steps seen, warm-up included."""
        self.step_wall_s = 0.0
        """Time of the counted (non-warm-up) steps."""
        self.passes_s = 0.0
        """Wall clock of every probe's passes so far."""
        self.after_probe_s = 0.0
        """What the steps right after probes lost against the usual step (unfloored:
        noise cancels over probes; a negative total counts as 0 in ``probe_wall_s``)."""
        self.split_s = 0.0
        """What the probes' split steps took over the usual step (unfloored, like
        ``after_probe_s``); 0 where probes run between steps."""
        self.last_split_excess_s = 0.0
        """The last split step's excess over the usual step (0 before one)."""
        self.overhead_s = 0.0
        """What deciding when to probe cost (several workers' votes between steps:
        :class:`gpuscale.trainer.vote.GapVote`); counted as the probes'."""
        self.probes = 0
        self.shifts = 0
        """Step-time shifts detected."""
        self._costs: list[float] = []
        self._shares: list[float] = []
        self._share_orders: list[bool | None] = []
        """Each share's probe ran its compute pass first (None: unknown or one pass)."""
        self._phases: list[PhaseEvent] = []
        """The probes' phases where :meth:`add_probe` was given them (all the run's,
        as its summary splits the step with all of them)."""
        self._counted: list[float] = []
        self._reference: list[float] = []
        self._recent: deque[float] = deque(maxlen=window)
        self._since_shift_check = 0
        self._after: list[float] = []
        self._split: list[float] = []
        self._usual: deque[float] = deque(maxlen=window)
        """The last counted steps that did not follow a probe."""
        self._after_pending = False
        self._usual_since_probe = 0
        """Usual steps since the last probe: the next one waits for one."""
        self._last_count = 0
        self._last_warmup = True
        self._fast_cache = (0, 0.0)
        self._next_check = 0
        self._resolved_cache: tuple[tuple[int, ...], bool] = ((-1, -1, -1, -1), False)
        self._step_stats_cache: tuple[int, float, float | None] = (0, 0.0, None)
        self._reference_median: float | None = None
        self._cost_cache: tuple[tuple[int, int, int], float] = ((0, 0, 0), 0.0)
        self._unsplit_cache: tuple[tuple[int, int], str | None] = ((0, 0), None)
        self._due_after = (0.0, 0)
        """(steps' wall clock, steps): :meth:`due` says no without looking again
        while both are below these."""

    # -- input ----------------------------------------------------------------------
    def add_step(
        self, step_time_s: float, *, steps: int = 1, warmup: bool = False, split: bool = False
    ) -> None:
        """``steps`` steps ran (``step_time_s`` each, on average). ``split``: the
        step was a probe's own (the built-in trainer's split step, added before the
        probe's :meth:`add_probe`); what it took over the usual step is the probe's."""
        self.steps += steps
        self._last_count = steps
        self._last_warmup = warmup
        if warmup:
            return
        if split:
            self._after_pending = False  # a step after a probe too: its loss is counted here
            self.last_split_excess_s = 0.0
            if self._usual:
                excess = (step_time_s - metrics.median(list(self._usual))) * steps
                self._split.append(excess)
                self.split_s += excess
                self.last_split_excess_s = excess
        elif self._after_pending:
            # the step after a probe against the usual ones: what the probe cost it
            self._after_pending = False
            if self._usual:
                excess = (step_time_s - metrics.median(list(self._usual))) * steps
                self._after.append(excess)
                self.after_probe_s += excess
        else:
            self._usual.append(step_time_s)
            self._usual_since_probe += 1
        self.step_wall_s += step_time_s * steps
        self._counted.append(step_time_s)
        if len(self._reference) < self.window:
            self._reference.append(step_time_s)
            return
        self._recent.append(step_time_s)
        self._since_shift_check += 1
        if len(self._recent) == self.window and self._since_shift_check >= SHIFT_CHECK_EVERY:
            self._since_shift_check = 0
            if self._reference_median is None:  # the reference is whole: its median stays
                self._reference_median = metrics.median(self._reference)
            ref = self._reference_median
            now = metrics.median(list(self._recent))
            if ref > 0 and abs(now / ref - 1) > self.shift:
                self.shifts += 1
                self._due_after = (0.0, 0)  # the breakdown is to be probed again
                self._shares = []  # the breakdown of the old regime says little about the new
                self._share_orders = []
                self._reference = []  # the next steps are the new regime's reference
                self._reference_median = None
                self._recent.clear()

    def add_probe(
        self, cost_s: float, share: float | None = None, *, phases: PhaseEvent | None = None
    ) -> None:
        """A probe ran and took ``cost_s`` of wall clock; ``share`` is what it
        measured (the exposed all-reduce's share of the step, unfloored); ``phases``:
        its PhaseEvent as the run's summary gets it, so that the breakdown counts as
        resolved only where the summary will split the step with these phases
        (:attr:`unsplit_why`). Without it a probe's phases are taken to split it."""
        self.probes += 1
        if phases is not None:
            self._phases.append(phases)
        self.passes_s += cost_s
        self._costs.append(cost_s)
        self._after_pending = True
        self._usual_since_probe = 0
        if share is not None:
            self._shares.append(share)
            self._share_orders.append(None if phases is None else phases.compute_first)

    def add_overhead(self, cost_s: float) -> None:
        """Deciding cost ``cost_s`` of wall clock (a vote among workers): paid from the
        probes' budget."""
        self.overhead_s += cost_s

    # -- state ----------------------------------------------------------------------
    @property
    def counted_steps(self) -> int:
        """Counted (non-warm-up) steps added so far (``add_step`` calls)."""
        return len(self._counted)

    @property
    def counting(self) -> bool:
        """The step just added was a counted one (not warm-up; False before any)."""
        return not self._last_warmup

    @property
    def share_halfwidth(self) -> float | None:
        """How well the probed share is known (95 % half-width; None: too few probes),
        balanced over the order of the probes' passes as the summary takes it
        (:func:`~gpuscale.analysis.metrics.balanced_median`: the two orders' values
        are two clusters, whose spread around one median is no noise of the share).

        Below 6 probes the MAD behind the half-width can be about 0 by chance (two
        of three probes agreeing), so the half-width is at least 0.8 x the range of
        the probes' deviations then (for 3 normal samples the 95 % half-width of the
        median is about 0.84 x their expected range)."""
        if not self._shares:
            return None
        balanced = metrics.balanced_median(self._shares, self._share_orders)
        width = balanced.halfwidth
        if width is not None and len(self._shares) < RANGE_FLOOR_PROBES:
            noise = balanced.residuals
            width = max(width, 0.8 * (max(noise) - min(noise)))
        return width

    @property
    def resolved(self) -> bool:
        """The breakdown is known to ``± precision`` in the current step-time regime,
        and the probes' phases split the step (:attr:`unsplit_why`; recomputed only
        when a probe, a shift or the step statistics the phases are judged against
        changed it: ``due`` runs every step)."""
        key = (len(self._shares), self.shifts, *self._unsplit_key())
        if self._resolved_cache[0] != key:
            known = self._share_known_to(self.precision) and self.unsplit_why is None
            self._resolved_cache = (key, known)
        return self._resolved_cache[1]

    def _share_known_to(self, precision: float) -> bool:
        """The probed share's half-width, from at least ``min_probes`` probes, is
        within ``precision`` (whether the phases split the step apart)."""
        width = self.share_halfwidth
        return len(self._shares) >= self.min_probes and width is not None and width <= precision

    def _step_stats(self) -> tuple[float, float | None]:
        """The counted steps' median and its 95 % half-width, refreshed every 8
        counted steps at first and then every 10 % of them (each sorts them all, and
        a breakdown judged against new ones is judged again: ``due`` asks on the
        per-step path, where this cost the Keras callback 15-20 µs a step, a fifth of
        a 7 ms CPU step's budget; the median of hundreds of steps moves little in a
        tenth more of them)."""
        n, mid, width = self._step_stats_cache
        now = len(self._counted)
        if now and now != n and (n == 0 or now - n >= max(8, now // 10)):
            mid, width = metrics.median(self._counted), metrics.median_halfwidth(self._counted)
            self._step_stats_cache = (now, mid, width)
        return mid, width

    def _unsplit_key(self) -> tuple[int, int]:
        """What :attr:`unsplit_why` depends on: the phases given and the counted steps
        the step statistics they are judged against were last taken over (refreshed
        as :meth:`_step_stats` does; 0 where no phase is judged: nothing sorted)."""
        if not self._phases or self.replicas <= 1:
            return (len(self._phases), 0)
        self._step_stats()
        return (len(self._phases), self._step_stats_cache[0])

    @property
    def unsplit_why(self) -> str | None:
        """Why the probes' phases (those :meth:`add_probe` was given) do not split the
        step as the run's summary will judge them against the median counted step
        (:func:`gpuscale.analysis.summary.phase_breakdown`,
        :attr:`~gpuscale.analysis.summary.RunSummary.unsplit_why`): ``the phases do
        not add up to the step`` or ``compute alone fills the step``, in the
        summary's words; the probed share is then not resolved, however steady.
        ``None`` where they split it, or no probe gave its phases, or on one replica
        (nothing is exchanged: the summaries' precision is the step time's alone,
        :func:`gpuscale.analysis.summary.unsplit_within`)."""
        if not self._phases or self.replicas <= 1:
            return None
        key = self._unsplit_key()
        if self._unsplit_cache[0] != key:
            _, mid, width = self._step_stats_cache
            breakdown = phase_breakdown(
                self._phases,
                step_time_s=mid or None,
                step_halfwidth_s=width,
                devices=self.replicas,
            )
            self._unsplit_cache = (key, breakdown.unsplit_why)
        return self._unsplit_cache[1]

    def _fast_step_s(self) -> float:
        """The 10th percentile of the counted step times, refreshed after 64 steps
        every 64 or every tenth of the steps so far, whichever is more (each sorts
        them all: 11 ms at 100,000 steps, 174 µs a step if every 64), by
        distance, since :meth:`due` looks only every few steps between probes."""
        n = len(self._counted)
        if (
            n
            and n != self._fast_cache[0]
            and (n < 64 or n - self._fast_cache[0] >= max(64, n // 10))
        ):
            self._fast_cache = (n, metrics.percentile(self._counted, 10.0))
        return self._fast_cache[1]

    @property
    def probe_wall_s(self) -> float:
        """What every probe so far cost the run: its passes and the excess of its
        split step and of the step after it (never less than the passes: steps that
        happened to run faster buy no more probes), and what deciding cost
        (``overhead_s``)."""
        return self.passes_s + max(0.0, self.after_probe_s + self.split_s) + self.overhead_s

    @property
    def probe_costs_s(self) -> tuple[float, ...]:
        """Each probe's passes, in seconds, in order (the slower steps after them apart)."""
        return tuple(self._costs)

    @property
    def probe_budget(self) -> float:
        """The probes' own share: the budget less its ``reserve`` for the per-step cost."""
        return self.budget * (1.0 - self.reserve)

    @property
    def spent_share(self) -> float:
        """What the probes cost so far over the counted steps' own wall clock: the
        overhead a user sees (``wall with / wall without - 1``)."""
        if self.step_wall_s <= 0:
            return 0.0
        return self.probe_wall_s / self.step_wall_s

    def known_to(self, precision: float, *, min_steps: int = 20) -> bool:
        """Whether the run so far pins down, to ``± precision`` of the step (95 %
        half-widths), both the median step time and, when probing, the probed
        share (at least ``min_steps`` counted steps and 3 probes), the share only
        where the probes' phases split the step (:attr:`unsplit_why` ``None``): where
        they do not, the summary calls the share not resolved whatever its spread,
        so the run is not known to ``precision`` and goes on probing, ``--steps`` at
        the most, and its summary says why it did not reach the precision."""
        n = len(self._counted)
        if n < max(min_steps, self._next_check):
            return False  # checked every 10 steps, every 2 % of them later: it sorts them all
        self._next_check = n + max(10, n // 50)
        mid = metrics.median(self._counted)
        width = metrics.median_halfwidth(self._counted)
        self._step_stats_cache = (n, mid, width)  # sorted now: what unsplit_why splits
        if mid <= 0 or width is None or width / mid > precision:
            return False
        if self.every is None and self.budget <= 0:
            return True  # not probing: the step time is all there is to know
        return self._share_known_to(precision) and self.unsplit_why is None

    def precision_reached(self, precision: float) -> bool:
        """Whether a ``--precision`` run may stop now: :meth:`known_to` ``precision``,
        and the probes spent so far within the probes' budget of the counted steps'
        wall clock (``probe_wall_s <= probe_budget x step_wall_s``), so a run that
        probed early on the assumption that it lasts ``horizon_steps`` goes on
        (unprobed) until its steps pay for them, whatever ends it. ``every=K``
        (``--phase-every``) is no budget: its runs stop as soon as they are known."""
        if self.every is None and self.probe_wall_s > self.probe_budget * self.step_wall_s:
            return False  # checked first: known_to's own check every few steps is kept for later
        return self.known_to(precision)

    def expected_cost_s(self) -> float:
        """What the next probe will likely cost: the median of the last passes plus
        the mean excess of the split steps and of the steps after probes (a guess
        before the first)."""
        if self._costs:
            key = (len(self._costs), len(self._after), len(self._split))
            if self._cost_cache[0] != key:  # it changes with a probe, not with a step
                after = sum(self._after) / len(self._after) if self._after else 0.0
                split = sum(self._split) / len(self._split) if self._split else 0.0
                cost = metrics.median(self._costs[-9:]) + max(0.0, after + split)
                self._cost_cache = (key, cost)
            return self._cost_cache[1]
        return self.first_probe_steps * metrics.median(self._counted) if self._counted else 0.0

    def reference_step_s(self, last_step_s: float) -> float:
        """The step a probe is measured against (its ``PhaseEvent.step_time_s``; the
        built-in trainer and the Keras callback alike): the median of the last
        ``window`` counted steps that followed no probe, the one just added among
        them, so a one-off step (a retrace, Keras' callbacks, the step after a probe)
        is not the whole the phases split; ``last_step_s`` before any such step."""
        return metrics.median(list(self._usual)) if self._usual else last_step_s

    def due(self) -> bool:
        """Whether to probe after the step just added."""
        if self._last_warmup:
            return False
        if self.every is not None:
            return self.steps % self.every < self._last_count
        if self.budget <= 0:
            return False
        if self.probes == 0:  # without one there is no breakdown at all; it measures the cost
            # after FIRST_PROBE_AFTER usual steps, so the step it splits is a median, not
            # the first step alone (often a retrace, or Keras' first callbacks)
            return len(self._usual) >= min(FIRST_PROBE_AFTER, self.window)
        if self._after_pending:
            # the step after the last probe is not seen yet: what it loses is part of
            # that probe's cost (a step or more on a busy machine), so wait one step
            return False
        if not self._usual_since_probe:
            return False  # a usual step first: the reference the next probe splits
        wall_after, steps_after = self._due_after
        if self.step_wall_s < wall_after and self.steps < steps_after:
            return False  # the budget cannot pay for it yet (worked out below)
        cost = self.expected_cost_s()
        budget = self.probe_budget
        allowance = budget * self.step_wall_s
        resolved = self.resolved
        if not resolved and self.horizon_steps and self._counted:
            # the run's wall clock if the steps go on no slower than their fastest tenth
            # (a slow start must not buy probes the rest of the run cannot pay for)
            projected = self._fast_step_s() * self.horizon_steps
            allowance = max(allowance, budget * projected)
        if resolved:
            allowance = self.resolved_rate * budget * self.step_wall_s
        needed = self.probe_wall_s + cost
        if needed <= allowance:
            return True
        # the steps' wall clock at which the allowance pays for it by the steps alone
        rate = budget * (self.resolved_rate if resolved else 1.0)
        self._due_after = (needed / rate if rate > 0 else math.inf, self.steps + DUE_RECHECK_STEPS)
        return False

    def steps_for_precision(self, precision: float) -> int | None:
        """Counted steps in all this run would likely need to know the probed share to
        ``± precision`` at its budget: the probes that takes (:meth:`_probes_needed`;
        at least 3) at the pace the budget pays for them (however early they ran: a
        ``--precision`` run stops only once its steps pay for its probes,
        :meth:`precision_reached`) (:func:`~gpuscale.analysis.metrics.steps_per_probe`,
        at the probes' mean cost so far and the median step: the run's summary
        estimates the same way), or at the fixed period.
        ``None`` before the first probe (its cost is not known) or without probes."""
        if not self.probes or not self._counted:
            return None
        needed = self._probes_needed(precision)
        if self.every is not None:
            return needed * self.every
        per_probe = metrics.steps_per_probe(  # the mean cost so far, as the summary says it
            self.probe_wall_s / self.probes, metrics.median(self._counted), self.probe_budget
        )
        return None if per_probe is None else math.ceil(needed * per_probe)

    def _probes_needed(self, precision: float) -> int:
        """Probes in all for the probed share to ``± precision``: from the half-width
        once :data:`RANGE_FLOOR_PROBES` probes give one not floored at their range;
        before, a lower bound (at least 3, and one more than so far while the share
        is not known to ``precision``), which a pessimistic floored width would
        overstate (a new user was warned of 15 probes; 6 did)."""
        shares = len(self._shares)
        width = self.share_halfwidth
        if shares >= RANGE_FLOOR_PROBES:
            return metrics.probes_for_precision(shares, width, precision)
        needed = metrics.probes_for_precision(0, None, precision)
        if width is None or width > precision:
            needed = max(needed, shares + 1)
        return needed

    def outlook_due(self) -> bool:
        """Whether to look again at :meth:`precision_outlook` after this step, between
        probes: the step time can drift after the last probe and the estimate with it
        (a trial's grew from 340 to 1,191 steps, unwarned, as the steps sped up). Every
        25 counted steps at first, then every tenth of the steps so far (each look sorts
        the step times), once a probe has run."""
        n = len(self._counted)
        return self.probes > 0 and n > 0 and n % max(25, n // 10) == 0

    def precision_outlook(self, precision: float) -> str | None:
        """What to tell a user early where ``± precision`` cannot be reached within the
        run's ``horizon_steps`` at this budget (:meth:`steps_for_precision`): ``None``
        where it can (or cannot be said yet)."""
        need = self.steps_for_precision(precision)
        if need is None or not self.horizon_steps or need <= self.horizon_steps:
            return None
        known = len(self._shares) >= RANGE_FLOOR_PROBES
        probes = self._probes_needed(precision)
        step = metrics.median(self._counted)
        if self.every is not None:
            pace = f"a probe every {self.every} steps"
        else:
            pace = (
                f"the probe budget ({self.budget:.0%}: {self.probe_budget:.1%} for the probes, "
                f"{self.budget - self.probe_budget:.1%} for the per-step cost; "
                f"a probe costs about {self.probe_wall_s / self.probes / step:.1f} steps)"
            ).replace(".0%", "%")
        return (
            f"--precision \u00b1{precision:.1%}: at {pace} the exposed share would need "
            f"{'about' if known else 'at least'} {probes:,} probes, about {need:,} counted "
            f"steps, more than this run's {self.horizon_steps:,}: it will likely end before "
            "reaching it (raise --steps or --probe-budget, or ask a coarser --precision)"
        )

    def describe(self) -> str:
        """One line for the run's configuration: how probes are scheduled."""
        if self.every is not None:
            return f"every {self.every} steps"
        if self.budget <= 0:
            return "off"
        return f"budget {self.budget:.0%} of the wall clock"
