"""The probe scheduler on simulated streams of step and probe costs (no TensorFlow,
no clock: every duration is made up, so the tests are deterministic)."""

from __future__ import annotations

import math
import random

import pytest

from gpuscale.trainer.schedule import ProbeScheduler, period_for_budget


def simulate(
    scheduler: ProbeScheduler,
    steps: int,
    *,
    step_s=lambda i: 0.1,
    probe_s=lambda i: 0.2,
    share=lambda i: 0.10,
    warmup: int = 0,
    seed: int = 0,
) -> list[int]:
    """Run ``steps`` simulated steps; the steps after which a probe ran."""
    rng = random.Random(seed)
    probed = []
    for i in range(steps):
        scheduler.add_step(step_s(i) * rng.uniform(0.9, 1.1), warmup=i < warmup)
        if scheduler.due():
            probed.append(i)
            scheduler.add_probe(probe_s(i), share(i) + rng.uniform(-0.01, 0.01))
    return probed


@pytest.mark.parametrize("budget", [0.01, 0.02, 0.05])
@pytest.mark.parametrize("probe_steps", [0.5, 2.0, 6.0])
def test_probes_stay_within_the_budget(budget, probe_steps):
    scheduler = ProbeScheduler(budget)
    probed = simulate(scheduler, 4000, probe_s=lambda i: 0.1 * probe_steps)
    assert len(probed) >= 3
    assert scheduler.spent_share <= budget + 1e-9
    # and at every point of the run after the first probe, not only at its end
    checker = ProbeScheduler(budget)
    wall = spent = 0.0
    for i in range(3000):
        checker.add_step(0.1)
        wall += 0.1
        if checker.due():
            checker.add_probe(0.1 * probe_steps, 0.1)
            spent += 0.1 * probe_steps
            if checker.probes > 1:
                assert spent <= budget * (wall + spent) + 1e-9, i


def test_dense_at_the_start_when_the_run_length_is_known_then_spaced():
    scheduler = ProbeScheduler(0.02, horizon_steps=2000)
    probed = simulate(scheduler, 2000, probe_s=lambda i: 0.1)
    # the first after FIRST_PROBE_AFTER usual steps, then dense until resolved (3 agree):
    # each probe waits for the step after the last (its cost) and a usual step (its reference)
    assert probed[:3] == [2, 4, 6]
    assert scheduler.resolved
    gaps = [b - a for a, b in zip(probed, probed[1:], strict=False)]
    assert max(gaps[len(gaps) // 2 :]) > 10 * min(gaps[:5])  # spaced out later
    assert scheduler.spent_share <= 0.02


def test_without_the_run_length_the_start_stays_within_the_budget_too():
    scheduler = ProbeScheduler(0.02)
    probed = simulate(scheduler, 200, probe_s=lambda i: 0.1)
    assert probed[0] == 2 and len(probed) <= 4


def test_the_cheaper_the_probe_the_more_probes():
    cheap = simulate(ProbeScheduler(0.02), 2000, probe_s=lambda i: 0.05)
    dear = simulate(ProbeScheduler(0.02), 2000, probe_s=lambda i: 0.4)
    assert len(cheap) > 3 * len(dear)


def test_a_noisy_share_keeps_the_breakdown_unresolved_and_probing_at_the_full_budget():
    noisy = ProbeScheduler(0.02)
    rng = random.Random(1)
    simulate(noisy, 3000, share=lambda i: rng.uniform(-0.3, 0.3))
    steady = ProbeScheduler(0.02)
    simulate(steady, 3000)
    assert not noisy.resolved and steady.resolved
    assert noisy.probes > steady.probes
    assert noisy.spent_share <= 0.02


def test_a_step_time_shift_brings_probes_back():
    scheduler = ProbeScheduler(0.02)
    probed = simulate(scheduler, 4000, step_s=lambda i: 0.1 if i < 2000 else 0.3)
    assert scheduler.shifts == 1
    before = [i for i in probed if 1500 <= i < 2000]
    after = [i for i in probed if 2000 <= i < 2030]
    assert len(before) <= 4  # spaced out while the breakdown was known
    assert len(after) >= 3  # dense again right after the shift, until known again
    assert scheduler.spent_share <= 0.02


def test_no_shift_is_seen_in_steady_noise():
    scheduler = ProbeScheduler(0.02)
    simulate(scheduler, 5000, step_s=lambda i: 0.1)
    assert scheduler.shifts == 0


def test_every_forces_a_period_whatever_it_costs():
    scheduler = ProbeScheduler(0.02, every=3)
    probed = simulate(scheduler, 14, warmup=2, probe_s=lambda i: 10.0)
    assert probed == [2, 5, 8, 11]  # the trainer's --phase-every 3 with 2 warm-up steps
    assert scheduler.spent_share > 0.5


def test_every_counts_steps_per_execution():
    scheduler = ProbeScheduler(every=4)
    probed = []
    for _ in range(6):  # steps_per_execution=3: 3, 6, ... 18 steps
        scheduler.add_step(0.1, steps=3)
        if scheduler.due():
            probed.append(scheduler.steps)
            scheduler.add_probe(0.1)
    assert probed == [6, 9, 12, 18]  # a probe after each execution that passes a multiple of 4


def test_no_probe_on_warmup_steps_and_none_with_a_zero_budget():
    assert simulate(ProbeScheduler(0.02), 5, warmup=5) == []
    assert simulate(ProbeScheduler(0.0), 500) == []


def test_the_first_probe_comes_after_three_counted_steps():
    # its reference is the median of three usual steps, not the first step alone
    assert simulate(ProbeScheduler(0.02), 10, warmup=3)[0] == 5
    assert simulate(ProbeScheduler(0.02, window=2), 10, warmup=3)[0] == 4


def test_period_for_budget():
    assert period_for_budget(0.02) == 100
    assert period_for_budget(0.5) == 4
    assert period_for_budget(0.0) is None


def test_bad_arguments():
    with pytest.raises(ValueError):
        ProbeScheduler(every=0)
    with pytest.raises(ValueError):
        ProbeScheduler(1.5)


def test_known_to_a_precision_needs_steady_steps_and_a_resolved_share():
    scheduler = ProbeScheduler(0.02)
    simulate(scheduler, 10)
    assert not scheduler.known_to(0.03)  # too few steps
    simulate(scheduler, 600)
    assert scheduler.known_to(0.03)  # +-10 % uniform step noise, +-1 point share noise
    noisy = ProbeScheduler(0.02)
    rng = random.Random(2)
    simulate(noisy, 400, share=lambda i: rng.uniform(-0.3, 0.3))
    assert not noisy.known_to(0.03)  # the breakdown is not known yet
    no_probes = ProbeScheduler(0.0)
    simulate(no_probes, 400)
    assert no_probes.known_to(0.03)  # only the step time to know


def test_a_slow_start_does_not_buy_probes_the_run_cannot_pay_for():
    scheduler = ProbeScheduler(0.02, horizon_steps=1000)
    simulate(scheduler, 1000, step_s=lambda i: 0.3 if i < 30 else 0.1, share=lambda i: 0.0)
    assert scheduler.spent_share <= 0.02 + 1e-9


def test_the_step_after_a_probe_counts_in_what_the_probe_cost():
    """What a user pays for a probe: its passes and the slower step after it (cold
    caches); the budget holds against the steps' own wall clock with both counted."""
    budget = 0.02
    scheduler = ProbeScheduler(budget, horizon_steps=3000)
    passes = paid = steps_wall = 0.0
    slow_next = False
    for _ in range(3000):
        step = 0.1 + (0.15 if slow_next else 0.0)  # the step after a probe: +1.5 steps
        slow_next = False
        scheduler.add_step(step)
        steps_wall += 0.1  # the run's own wall clock without gpuscale
        paid += step - 0.1
        if scheduler.due():
            scheduler.add_probe(0.2, 0.1)
            passes += 0.2
            paid += 0.2
            slow_next = True
    paid -= 0.15 if slow_next else 0.0  # a last probe's next step never ran
    assert scheduler.after_probe_s == pytest.approx(0.15 * (scheduler.probes - slow_next))
    assert scheduler.probe_wall_s == pytest.approx(paid)
    # the overhead a user sees, within the probes' part of the budget
    assert paid / steps_wall <= budget * (1 - scheduler.reserve) + 1e-9
    assert scheduler.expected_cost_s() == pytest.approx(0.35)
    # without counting the slow steps it would have spent 1.75 x as much
    assert passes + 0.15 * scheduler.probes < 1.75 * budget * steps_wall


def test_the_first_probe_costs_are_guessed_with_the_slower_step_after_it():
    scheduler = ProbeScheduler(0.02)
    scheduler.add_step(0.1)
    assert scheduler.expected_cost_s() == pytest.approx(0.25)


def test_three_probes_that_agree_by_chance_do_not_resolve_a_noisy_share():
    scheduler = ProbeScheduler(0.02)
    for share in (0.279, 0.273, -0.270):  # MAD 0.006: alone it would say +-1.3 points
        scheduler.add_step(0.1)
        scheduler.add_probe(0.2, share)
    assert scheduler.share_halfwidth > 0.4 and not scheduler.resolved


def test_the_probes_leave_the_reserve_of_the_budget_to_the_per_step_cost():
    for reserve in (0.0, 0.3, 0.5):
        scheduler = ProbeScheduler(0.02, reserve=reserve)
        noise = random.Random(3).uniform  # a share too noisy to resolve: the full rate
        simulate(scheduler, 5000, share=lambda i, noise=noise: noise(-0.3, 0.3))
        assert not scheduler.resolved
        assert 0.02 * (1 - reserve) * 0.9 < scheduler.spent_share <= 0.02 * (1 - reserve)


def test_steps_after_probes_that_ran_faster_buy_no_more_probes():
    scheduler = ProbeScheduler(0.02)
    slow_next = False
    for _ in range(3000):
        scheduler.add_step(0.05 if slow_next else 0.1)  # after a probe: half a step faster
        slow_next = False
        if scheduler.due():
            scheduler.add_probe(0.2, 0.1)
            slow_next = True
    assert scheduler.after_probe_s < 0
    assert scheduler.probe_wall_s == pytest.approx(scheduler.passes_s)
    assert scheduler.passes_s <= 0.02 * (1 - scheduler.reserve) * scheduler.step_wall_s


def test_a_split_steps_excess_counts_in_what_the_probe_cost():
    """The built-in trainer's probe: one extra pass (0.08 s) and the next step run
    split (0.03 s over the usual step), then a step 0.02 s slower after it: all
    three count, and the overhead a user sees stays within the probes' budget."""
    budget = 0.02
    scheduler = ProbeScheduler(budget, horizon_steps=3000, first_probe_steps=1.5)
    steps_wall = paid = 0.0
    split_next = slow_next = False
    for _ in range(3000):
        step = 0.13 if split_next else 0.12 if slow_next else 0.1
        scheduler.add_step(step, split=split_next)
        steps_wall += 0.1  # the run's own wall clock without gpuscale
        paid += step - 0.1
        slow_next = split_next
        if split_next:
            scheduler.add_probe(0.08, 0.1)
            paid += 0.08
        split_next = scheduler.due()
    probes = scheduler.probes
    assert probes > 10
    assert scheduler.split_s == pytest.approx(0.03 * probes)
    assert 0 < scheduler.after_probe_s <= 0.02 * probes  # none where a split step came next
    assert scheduler.probe_wall_s == pytest.approx(paid - 0.02 * slow_next)
    assert scheduler.expected_cost_s() == pytest.approx(0.13)
    assert paid / steps_wall <= budget * (1 - scheduler.reserve) + 1e-9


def test_a_short_run_gets_its_probes_at_its_start_within_the_budget():
    """A new user's 300-step run: split-step probes of 1.5 steps as counted (an extra
    pass, the split step's excess, the slower step after it). The whole run's probe
    allowance (1 % of 300 steps = 3 steps) is spent early, where it tells the most,
    not one probe now and the next one near the end (or never)."""
    scheduler = ProbeScheduler(0.02, horizon_steps=300, first_probe_steps=1.5)
    probed = []
    split_next = slow_next = False
    for i in range(300):
        step = 0.13 if split_next else 0.12 if slow_next else 0.1
        scheduler.add_step(step, split=split_next)
        slow_next = split_next
        if split_next:
            scheduler.add_probe(0.1, 0.1)
            probed.append(i)
        split_next = scheduler.due()
    assert len(probed) == 2 and probed[-1] < 30
    assert scheduler.probe_wall_s <= scheduler.probe_budget * 300 * 0.1 + 1e-9


def test_a_precision_out_of_reach_at_the_budget_is_said_after_the_first_probe():
    """--precision 10% --steps 300: a probe costs 2.5 steps as counted and the probes'
    1 % of the budget pays for one every 250 steps; 3 probes at least need 750 steps."""
    scheduler = ProbeScheduler(0.02, horizon_steps=295)
    for _ in range(3):
        scheduler.add_step(0.1)
    assert scheduler.precision_outlook(0.1) is None  # nothing known before a probe
    scheduler.add_probe(0.25, 0.05)
    assert scheduler.steps_for_precision(0.1) == 750
    said = scheduler.precision_outlook(0.1)
    assert said.startswith(
        "--precision \u00b110.0%: at the probe budget (2%: 1% for the probes, 1% for the per-step cost;"
    )
    assert "at least 3 probes, about 750 counted steps, more than this run's 295" in said
    assert ProbeScheduler(0.02, horizon_steps=1000).precision_outlook(0.1) is None
    longer = ProbeScheduler(0.02, horizon_steps=1000)
    longer.add_step(0.1)
    longer.add_probe(0.25, 0.05)
    assert longer.precision_outlook(0.1) is None  # 750 steps fit in 1,000
    fixed = ProbeScheduler(0.02, every=10, horizon_steps=295)
    fixed.add_step(0.1)
    fixed.add_probe(0.25, 0.05)
    assert fixed.steps_for_precision(0.1) == 30 and fixed.precision_outlook(0.1) is None


def test_a_probe_waits_for_the_step_after_the_last_one_to_count_its_cost():
    """A busy machine: the step after a probe loses 1.2 steps. Deciding on the next
    probe before that step is seen spent 1.9 % of a 300-step run's steps for the 1 %
    aim (benchmarks/overhead.py, 2026-11-23); seen first, it stays in the allowance."""
    scheduler = ProbeScheduler(0.02, horizon_steps=300, first_probe_steps=1.5)
    split_next = slow_next = False
    wall = 0.0
    for _ in range(300):
        step = 0.13 if split_next else 0.22 if slow_next else 0.1
        scheduler.add_step(step, split=split_next)
        wall += 0.1
        slow_next = split_next
        if split_next:
            scheduler.add_probe(0.1, 0.1)
        split_next = scheduler.due()
        assert not (split_next and slow_next)  # never the step right after a probe
    assert scheduler.probes >= 1
    if scheduler.probes > 1:
        assert scheduler.probe_wall_s <= scheduler.probe_budget * wall + 1e-9


def test_a_usual_step_comes_between_probes_so_the_reference_follows_the_run():
    """One device, a probe that costs next to nothing: probes came every other step
    (split step, the step after it, split step...) and the usual-step reference never
    took a new step, so every probe split the same old median (a new user's trial:
    109.5 ms on every probe while the steps ran 114-117 ms). A usual step now comes
    between any two probes."""
    scheduler = ProbeScheduler(0.02, horizon_steps=60, first_probe_steps=0.01)
    kinds = []
    split_next = slow_next = False
    for i in range(60):
        step = 0.1 + 0.001 * i  # the steps drift: the reference must follow
        scheduler.add_step(step, split=split_next)
        kinds.append("split" if split_next else "after" if slow_next else "usual")
        slow_next = split_next
        if split_next:
            scheduler.add_probe(0.0001, 0.0)
        split_next = scheduler.due()
    splits = [i for i, kind in enumerate(kinds) if kind == "split"]
    assert len(splits) >= 5
    for a, b in zip(splits, splits[1:], strict=False):
        assert "usual" in kinds[a + 1 : b], kinds[a : b + 1]


def _precision_run(budget: float, *, precision=0.05, steps=395, every=None, stop=None):
    """A new user's ``--model mlp --precision 5% --steps 400``: split-step probes of
    about 1.4 steps as counted, a share steady to a few points (known to ±5 % after 3
    probes), the loop's stop rule. The scheduler and the counted steps it ran."""
    scheduler = ProbeScheduler(
        budget, every=every, horizon_steps=steps, precision=precision, first_probe_steps=1.5
    )
    rng = random.Random(3)
    split_next = slow_next = False
    for i in range(stop or steps):
        step = 0.1 * rng.uniform(0.95, 1.05)
        step += 0.05 if split_next else 0.04 if slow_next else 0.0
        scheduler.add_step(step, split=split_next)
        slow_next = split_next
        if split_next:
            scheduler.add_probe(0.05, 0.12 + rng.uniform(-0.02, 0.02))
        split_next = scheduler.due()
        if scheduler.precision_reached(precision):
            return scheduler, i + 1
    return scheduler, stop or steps


@pytest.mark.parametrize(("budget", "steps"), [(0.02, 1000), (0.05, 395)])
def test_a_run_that_precision_ends_early_keeps_the_budget(budget, steps):
    """The early allowance spends the whole run's probes at its start; --precision
    then ended the run at 25 steps with 21 % of its wall in probes (budget 5 %). It
    stops only once the steps run pay for the probes, whatever ended it."""
    scheduler, ran = _precision_run(budget, steps=steps)
    assert ran < steps  # the precision was reached before --steps
    assert scheduler.probes >= 3
    assert scheduler.probe_wall_s <= scheduler.probe_budget * scheduler.step_wall_s + 1e-9
    assert scheduler.spent_share <= budget
    # the probes stopped coming densely once the share was known to the ±5 % asked
    # (not the default ±2 points, which would have bought probes the run must pay for)
    assert scheduler.resolved and scheduler.precision == 0.05


def test_known_is_not_enough_to_stop_while_the_probes_are_unpaid():
    scheduler, ran = _precision_run(0.05, stop=60)  # stopped at 60 steps of 395
    assert ran == 60 and scheduler.resolved  # the breakdown is known (3 probes early)...
    assert scheduler.probe_wall_s > scheduler.probe_budget * scheduler.step_wall_s
    assert not scheduler.precision_reached(0.05)  # ...but 60 steps do not pay for it


def test_phase_every_stops_as_soon_as_known_whatever_the_probes_cost():
    scheduler, ran = _precision_run(0.02, every=2)
    assert ran < 60 and scheduler.spent_share > 0.02  # --phase-every: no budget applies


def test_the_precision_warning_agrees_with_when_the_run_stops():
    """The warning said 15 probes and 520 steps (more than --steps) from a width
    floored at 4 probes' range; the run knew the share at 6. Below 6 probes it counts
    on the fewest the run could need; its estimate is when the stop rule lets the run
    end (the probes paid for)."""
    scheduler = ProbeScheduler(0.05, horizon_steps=395, first_probe_steps=1.5)
    for share in (0.164, 0.047, 0.153, 0.067):  # the trial's first 4 probes
        for _ in range(3):
            scheduler.add_step(0.037)
        scheduler.add_probe(0.033, share)
    assert scheduler.share_halfwidth > 0.05  # floored at the range: not known yet
    assert scheduler.steps_for_precision(0.05) == math.ceil(5 * 0.033 / (0.025 * 0.037))
    assert scheduler.precision_outlook(0.05) is None  # 179 steps fit in 395
    # a run that stops for precision ends about when the estimate said, and was not warned
    run, ran = _precision_run(0.05)
    assert ran < 395 and run.precision_outlook(0.05) is None
    assert abs(run.steps_for_precision(0.05) - ran) <= 0.05 * ran
    # one that cannot (1 % for probes pays for 3 probes in 426 steps) is warned
    short, ran = _precision_run(0.02)
    assert ran == 395 and not short.precision_reached(0.05)
    assert "at least 3 probes, about 426 counted steps" in short.precision_outlook(0.05)


def test_the_precision_outlook_is_looked_at_again_between_probes():
    """A trial's run was not warned: after its 4 probes the steps sped up, the steps
    the precision needs grew from about 340 to 1,191 (over its 400), and the outlook
    was only looked at right after a probe. outlook_due() asks for a look between
    probes (every 25 counted steps at first, then every tenth of the steps so far),
    and the look then warns."""
    scheduler = ProbeScheduler(0.02, horizon_steps=400, precision=0.05, first_probe_steps=1.5)
    for share in (0.30, 0.05, 0.25, 0.10):
        for _ in range(3):
            scheduler.add_step(0.1)
        scheduler.add_probe(0.05, share)
    assert scheduler.precision_outlook(0.05) is None  # after the last probe: fits in 400
    said = None
    looks = []
    for i in range(300):  # no more probes; the steps five times faster
        scheduler.add_step(0.02)
        if scheduler.outlook_due():
            looks.append(i)
            said = said or scheduler.precision_outlook(0.05)
    assert said and "more than this run's 400" in said
    assert looks[:2] == [12, 37]  # counted steps 25 and 50 (12 before these)
    fresh = ProbeScheduler(0.02, horizon_steps=400)
    for _ in range(50):
        fresh.add_step(0.1)
        assert not fresh.outlook_due()  # nothing to say before a probe


def _probe_phases(step: int, *, train_s: float, compute_s: float, exposed_s: float):
    """A probe's PhaseEvent as the trainer records it: compute alone, compute +
    all-reduce, and the step's training part ``train_s`` they split."""
    from gpuscale.events.schema import PhaseEvent

    fused = compute_s + exposed_s
    return PhaseEvent(
        t=0.0,
        step=step,
        step_time_s=train_s,
        compute_s=compute_s,
        allreduce_s=max(0.0, exposed_s),
        apply_s=max(0.0, train_s - fused),
        compute_allreduce_s=fused,
        probe_cost_s=0.05,
    )


SPLITS = {  # the probe's phases against a median step of about 100 ms
    "split": dict(train_s=0.1, compute_s=0.07),  # 70 + 12 + 18 ms: the step
    "add up": dict(train_s=0.14, compute_s=0.07),  # 70 + 12 + 58 ms: 140 ms, not 100
    "fills": dict(train_s=0.1, compute_s=0.105),  # the compute pass alone: 105 ms
}


def _precision_stream(phases: str | None, *, steps: int = 400, precision: float = 0.05):
    """A 2-replica run with ``--precision``: 100 ms steps (±5 %), a probe of 50 ms
    whenever the scheduler asks, its exposed share steady at 12 ± 1 points, its
    phases as ``SPLITS[phases]`` (``None``: not given to the scheduler, as before).
    The loop's stop rule; the scheduler, the counted steps it ran and the events."""
    from gpuscale.events.schema import StepEvent

    scheduler = ProbeScheduler(0.05, horizon_steps=steps, precision=precision, replicas=2)
    rng = random.Random(5)
    events: list = []
    for i in range(steps):
        step_s = 0.1 * rng.uniform(0.95, 1.05)
        scheduler.add_step(step_s)
        events.append(StepEvent(t=float(i), step=i, step_time_s=step_s, samples=64))
        if scheduler.due():
            share = 0.12 + rng.uniform(-0.01, 0.01)
            kind = SPLITS[phases or "split"]
            exposed = 0.0 if phases == "fills" else share * 0.1
            event = _probe_phases(i, exposed_s=exposed, **kind)
            events.append(event)
            scheduler.add_probe(0.05, exposed / 0.1, phases=event if phases else None)
        if scheduler.precision_reached(precision):
            return scheduler, i + 1, events
    return scheduler, steps, events


def test_a_precision_run_stops_on_phases_that_split_the_step():
    scheduler, ran, _ = _precision_stream("split")
    assert ran < 400 and scheduler.probes >= 3
    assert scheduler.unsplit_why is None and scheduler.resolved


@pytest.mark.parametrize(
    ("phases", "why"),
    [
        ("add up", "the phases do not add up to the step"),
        ("fills", "compute alone fills the step"),
    ],
)
def test_a_steady_share_of_phases_that_do_not_split_the_step_is_not_known(phases, why):
    """The stop rule checked only the probed share's spread: a share steady to a
    point from phases that did not add up to the step (the summary: "not resolved")
    ended the run as if known. It is not known to the precision, the breakdown is not
    resolved (probes come as the budget allows), and the run goes on to --steps."""
    before, ran_before, _ = _precision_stream(None)  # the same stream, phases not said
    assert ran_before < 400  # what the old rule did with it: stopped early
    scheduler, ran, _ = _precision_stream(phases)
    assert scheduler.share_halfwidth is not None and scheduler.share_halfwidth <= 0.05
    assert scheduler.unsplit_why == why
    assert ran == 400
    assert not scheduler.resolved  # probing on at the full budget, within it
    assert scheduler.probes > before.probes
    assert scheduler.spent_share <= 0.05


@pytest.mark.parametrize("phases", ["split", "add up", "fills"])
def test_the_stop_rule_and_the_summary_say_the_same_of_the_breakdown(phases):
    """The run's summary of the same events judges the phases as the scheduler did,
    and what the run prints at its end says why it did not reach the precision, in
    the words of the probes line."""
    import msgspec

    from gpuscale.analysis.phase_report import precision_text, share_known_text
    from gpuscale.analysis.summary import summarize
    from gpuscale.commands.run import precision_line
    from gpuscale.events.schema import EndEvent, StartEvent

    scheduler, ran, events = _precision_stream(phases)
    start = StartEvent(
        t=0.0,
        gpuscale_version="0.1.0",
        tensorflow_version="2.21.0",
        host="testhost",
        pid=1,
        model="mlp",
        platform="cpu-logical",
        strategy="mirrored",
        num_replicas=2,
        global_batch=64,
        per_replica_batch=32,
        config={"probe_budget": 0.05, "precision": 0.05, "steps": 400},
    )
    end = EndEvent(t=float(ran), status="completed", steps=ran, duration_s=float(ran))
    s = summarize([start, *events, end])
    assert s.unsplit_why == scheduler.unsplit_why
    text, reached = precision_text(s)
    if phases == "split":
        assert reached and ran < 400
        return
    said = f"but {scheduler.unsplit_why}: not resolved"
    assert not reached and ran == 400 and s.precision_more_steps is None
    assert said in share_known_text(s)
    assert text.endswith(f"not reached by the end: {share_known_text(s)}")  # the probes line's
    assert said in precision_line(msgspec.to_builtins(s), 2)


def test_on_one_replica_the_phases_do_not_hold_the_precision_run_back():
    """One replica exchanges nothing: the summaries' precision is the step time's
    alone, so the stop rule does not judge the phases' split there either."""
    scheduler = ProbeScheduler(0.05, replicas=1)
    for i in range(30):
        scheduler.add_step(0.1)
        if scheduler.due():
            scheduler.add_probe(
                0.05, 0.7, phases=_probe_phases(i, exposed_s=0.0, **SPLITS["add up"])
            )
    assert scheduler.probes and scheduler.unsplit_why is None


def test_resolved_follows_the_step_the_phases_are_judged_against():
    """``resolved`` cached its verdict on the probes and shifts alone: phases that
    split a 140 ms step stayed "resolved" after the steps settled at 100 ms (no
    probe since, and no shift detected), though they no longer add up to the median
    step (``unsplit_why`` said so; the verdict went stale until the next probe)."""
    scheduler = ProbeScheduler(0.05, replicas=2, shift=10.0)  # no shift detected
    for _ in range(60):
        scheduler.add_step(0.14)
    for i in range(3):  # 70 + 12 + 58 ms: the 140 ms step
        phases = _probe_phases(i, exposed_s=0.012, **SPLITS["add up"])
        scheduler.add_probe(0.05, 0.12, phases=phases)
    assert scheduler.resolved and scheduler.unsplit_why is None
    for _ in range(200):
        scheduler.add_step(0.10)
    assert not scheduler.resolved  # asked first: its own cache, not unsplit_why's
    assert scheduler.unsplit_why == "the phases do not add up to the step"
    for _ in range(400):
        scheduler.add_step(0.14)  # back at 140 ms: split again
    assert scheduler.resolved and scheduler.unsplit_why is None


class _LookingEveryStep(ProbeScheduler):
    """The scheduler as it was: the whole check at every step."""

    def due(self) -> bool:
        self._due_after = (0.0, 0)
        return super().due()


@pytest.mark.parametrize("horizon", [None, 20_000])
@pytest.mark.parametrize("noisy", [False, True])
def test_between_probes_due_answers_from_the_wall_clock_as_the_whole_check_would(noisy, horizon):
    """``due`` skips its whole check until the steps' wall clock can pay for the next
    probe (10 µs a step inside a Keras fit): where nothing but the wall clock
    changes between probes, it probes at the very steps the whole check does,
    a shift and a resolved breakdown included."""
    kw = dict(
        step_s=lambda i: 0.1 if i < 1500 else 0.3,
        share=(lambda i: 0.10 + (0.2 if i % 2 else -0.2)) if noisy else (lambda i: 0.10),
    )
    fast = ProbeScheduler(0.02, horizon_steps=horizon)
    whole = _LookingEveryStep(0.02, horizon_steps=horizon)
    probed = simulate(fast, 3000, **kw)
    assert probed == simulate(whole, 3000, **kw)
    assert fast.shifts == whole.shifts == 1 and len(probed) > 10
    assert any(p > 1500 for p in probed[:-1])  # probes came back after the shift


def test_the_fastest_steps_follow_the_run_when_due_looks_only_now_and_then():
    """The run's projected wall clock (its length x the fastest tenth of its steps)
    follows the steps though ``due`` skips its whole check between probes (a review:
    refreshed only at multiples of 64 steps, it froze at its value before step 64,
    and a run of 0.1 s then 0.118 s steps waited until step 16,622 for probes the
    whole check ran at 447-767)."""
    kw = dict(step_s=lambda i: 0.1 if i < 64 else 0.118, share=lambda i: 0.10 + 0.3 * (-1) ** i)
    fast = ProbeScheduler(0.02, horizon_steps=20_000)
    whole = _LookingEveryStep(0.02, horizon_steps=20_000)
    probed = simulate(fast, 2000, **kw)
    assert probed == simulate(whole, 2000, **kw)
    assert fast._fast_step_s() > 0.1


def test_a_new_run_length_is_looked_at_within_the_recheck_steps():
    """What the wall clock does not tell (the run's length set between fits, as the
    Keras callback does) is looked at again within DUE_RECHECK_STEPS steps."""
    from gpuscale.trainer.schedule import DUE_RECHECK_STEPS

    scheduler = ProbeScheduler(0.02, horizon_steps=210)  # a short fit first
    simulate(scheduler, 200, share=lambda i: 0.10 + (0.3 if i % 2 else -0.3))
    assert not scheduler.resolved  # a noisy share: the run's length counts
    scheduler.add_step(0.1)
    assert not scheduler.due()  # a probe waits for the wall clock to pay for it
    scheduler.horizon_steps = 100_000  # a long fit begins: its allowance is spent early
    waited = 0
    while not scheduler.due():
        scheduler.add_step(0.1)
        waited += 1
        assert waited <= 16 == DUE_RECHECK_STEPS
