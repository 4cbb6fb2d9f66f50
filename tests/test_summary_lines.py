"""The summary's throughput says what the run got, with figures that add up: the rate
at the median step (the headline, what scaling compares) is robust but is not what a
run with skewed steps or time between steps got. Where the rate over the wall clock
differs from it by more than a few percent, the summary says both and why, in shares
of the wall clock that add up (slow steps, between steps), in ``run``'s and
``replay``'s text and in the dashboard alike; ``--json`` and the recording keep their
fields' meanings and add the new ones."""

from __future__ import annotations

import msgspec
import pytest
from recording_samples import script_start, write_run

from gpuscale.analysis.phase_report import throughput_text, wall_clock_text, wall_rate_notable
from gpuscale.analysis.summary import RunSummary, summarize, with_defaults
from gpuscale.cli import main
from gpuscale.events.schema import EndEvent, StartEvent, StepEvent

T0 = 1_800_000_000.0


def _trainer_start() -> StartEvent:
    return StartEvent(
        t=T0,
        gpuscale_version="0",
        host="h",
        pid=1,
        model="mlp",
        strategy="mirrored",
        num_replicas=2,
        per_replica_batch=32,
        global_batch=64,
        platform="cpu-logical",
        config={"warmup_steps": 2},
    )


def _skewed(
    steps: int = 202,
    fast_s: float = 0.0046,
    slow_s: float = 0.0104,
    gap_s: float = 0.00006,
    *,
    slow_every: int = 5,
) -> list:
    """``steps`` steps (the first 2 warm-up): every ``slow_every``-th takes
    ``slow_s``, the others ``fast_s``; ``gap_s`` between any two."""
    events: list = []
    t = T0
    for i in range(steps):
        took = slow_s if i % slow_every == slow_every - 1 else fast_s
        t += took
        events.append(StepEvent(t=t, step=i, step_time_s=took, samples=64, warmup=i < 2))
        t += gap_s
    return events


def test_skewed_steps_say_the_rate_the_run_got_and_why():
    """4.6 ms at the median, one step in 5 at 10.4 ms (mean 5.76 ms), 0.06 ms between
    steps: the headline stays the median step's, and the wall-clock rate is said with
    its reasons, which add up to it."""
    s = summarize([_trainer_start(), *_skewed()])
    assert s.step_time_s == pytest.approx(0.0046)
    assert s.throughput_samples_s == pytest.approx(64 / 0.0046)  # the headline is kept
    assert s.mean_step_time_s == pytest.approx(0.00576, rel=1e-3)
    assert s.mean_step_throughput_samples_s == pytest.approx(64 / 0.00576, rel=1e-3)
    assert s.slow_steps_share == pytest.approx(0.00116 / 0.00582, rel=2e-2)
    assert s.between_steps_share == pytest.approx(0.00006 / 0.00582, rel=5e-2)
    # the parts add up: the median step's rate x the rest is the wall-clock rate
    kept = 1 - s.slow_steps_share - s.between_steps_share
    assert s.throughput_samples_s * kept == pytest.approx(s.wall_throughput_samples_s, rel=5e-3)
    assert wall_rate_notable(s)
    assert throughput_text(s) == "13,913 samples/s at the median step (4.60 ms)"
    assert wall_clock_text(s) == (
        "10,997 samples/s over the wall clock: slow steps (mean step 5.76 ms) 20% of it, "
        "between steps 1% (e.g. the loop's own work, a busy machine)"
    )
    assert wall_clock_text(s, causes=False) == (
        "10,997 samples/s: slow steps (mean step 5.76 ms) 20%, between steps 1%"
    )


def test_time_between_and_slow_steps_add_up_as_the_trial_saw():
    """The trial's `run --local-workers 2`: median 7.0 ms, mean 10.7 ms and 35% of the
    wall clock between steps. Its two parts add up to the wall-clock rate, which the
    between-steps share alone (18,189 x 0.65) did not."""
    events = [script_start(), *_skewed(302, 0.007, 0.0255, 0.00576, slow_every=5)]
    s = summarize(events)
    assert s.mean_step_time_s == pytest.approx(0.0107, rel=1e-3)
    assert s.between_steps_share == pytest.approx(0.35, abs=0.01)
    assert s.slow_steps_share == pytest.approx(0.0037 / 0.01646, rel=2e-2)
    kept = 1 - s.slow_steps_share - s.between_steps_share
    assert s.throughput_samples_s * kept == pytest.approx(s.wall_throughput_samples_s, rel=5e-3)
    text = wall_clock_text(s) or ""
    assert "slow steps (mean step 10.7 ms) 23% of it, between steps 35% (" in text, text
    assert "epoch starts" in text  # a script's causes


def test_steps_faster_than_their_median_say_so_with_a_sign():
    """One step in 3 at a third of the others' time: the mean is under the median and
    the wall clock is faster than the headline says."""
    s = summarize([_trainer_start(), *_skewed(302, 0.006, 0.002, 0.0, slow_every=3)])
    assert s.slow_steps_share is not None and s.slow_steps_share < -0.1
    assert s.wall_throughput_samples_s > s.throughput_samples_s
    text = wall_clock_text(s) or ""
    assert "steps faster than the median (mean step 4.67 ms) gave back 29% of it" in text, text
    assert "between steps" not in text  # none: not named


def test_the_headline_alone_where_the_rates_agree():
    """A few slow steps but a wall-clock rate within a few percent of the headline."""
    s = summarize([_trainer_start(), *_skewed(202, 0.005, 0.0065, 0.0, slow_every=10)])
    assert 0 < s.slow_steps_share < 0.05
    assert not wall_rate_notable(s)
    assert throughput_text(s) == "12,800 samples/s" and wall_clock_text(s) is None


def test_json_and_the_recording_keep_the_fields_and_add_the_new_ones():
    s = summarize([_trainer_start(), *_skewed()])
    recorded = msgspec.to_builtins(s)  # the recording's end summary
    said = with_defaults(recorded)  # what `run --json` prints
    for key in ("throughput_samples_s", "wall_throughput_samples_s", "between_steps_share"):
        assert said[key] == pytest.approx(getattr(s, key))  # same meanings as before
    assert said["throughput_samples_s"] == pytest.approx(64 / 0.0046)
    for key in ("mean_step_time_s", "mean_step_throughput_samples_s", "slow_steps_share"):
        assert said[key] == pytest.approx(getattr(s, key))
    assert said["source"] == "trainer"
    # a summary recorded before these fields still reads
    old = {k: v for k, v in recorded.items() if k not in ("mean_step_time_s", "slow_steps_share")}
    assert msgspec.convert(old, RunSummary).slow_steps_share is None


def test_replay_prints_what_the_run_got(tmp_path, capsys):
    events = [_trainer_start(), *_skewed()]
    events.append(EndEvent(t=events[-1].t + 0.01, status="completed", steps=202))
    assert main(["replay", str(write_run(tmp_path / "run.ndjson", events)), "--end"]) == 0
    out = capsys.readouterr().out
    assert (
        "throughput: 13,913 samples/s at the median step (4.60 ms); 10,997 samples/s over "
        "the wall clock: slow steps (mean step 5.76 ms) 20% of it, between steps 1%"
    ) in out


def test_the_dashboard_says_the_same_rates():
    from gpuscale.ui.widgets.advice import advice_content

    s = summarize([_trainer_start(), *_skewed()])
    text = advice_content(s).plain
    assert "13,913 samples/s at median" in text
    assert "10,997 samples/s: slow steps (mean step 5.76 ms) 20%, between steps 1%" in text


def _short_last_batch(epochs: int = 30, gap_s: float = 0.0, *, worker: int = 0) -> list:
    """``epochs`` of 32, 32, 32 samples at 10 ms then 4 samples at 4 ms (a short
    last batch per epoch), ``gap_s`` before each epoch (the first 2 steps warm-up)."""
    events: list = []
    t, i = T0, 0
    for _ in range(epochs):
        t += gap_s
        for samples, took in ((32, 0.010), (32, 0.010), (32, 0.010), (4, 0.004)):
            t += took
            i += 1
            events.append(
                StepEvent(
                    t=t, worker=worker, step=i, step_time_s=took, samples=samples, warmup=i <= 2
                )
            )
    return events


def _kept(s: RunSummary) -> float:
    """The rate at the median step x (1 - the parts of the wall clock)."""
    parts = s.small_batches_share + s.slow_steps_share + s.between_steps_share
    return s.throughput_samples_s * (1 - parts)


def test_a_short_last_batch_is_a_part_of_the_wall_clock_that_adds_up():
    """The review's case: 3,200 samples/s at the median step, 2,936 over the wall
    clock. The short batches are faster steps, but carry fewer samples: both named,
    and the median rate x (1 - the parts) is the wall-clock rate (it was 3,776)."""
    s = summarize([_trainer_start(), *_short_last_batch()])
    assert s.throughput_samples_s == pytest.approx(3200)
    assert s.wall_throughput_samples_s == pytest.approx(2936, abs=0.5)
    assert s.mean_samples_per_step == pytest.approx(2936 / 118)  # 2 warm-up steps of 32 left out
    assert s.small_batches_share > 0 > s.slow_steps_share
    assert _kept(s) == pytest.approx(s.wall_throughput_samples_s, rel=1e-9)
    assert wall_clock_text(s) == (
        "2,936 samples/s over the wall clock: smaller batches (mean 25 samples a step, "
        "median 32) 26% of it, steps faster than the median (mean step 8.47 ms) gave back 18%"
    )


def test_short_batches_and_time_between_steps_add_up():
    """The same with 5 ms between epochs: three parts, which add up, named in order."""
    s = summarize([script_start(), *_short_last_batch(gap_s=0.005)])
    assert s.between_steps_share == pytest.approx(0.005 / 0.039, rel=2e-2)
    assert _kept(s) == pytest.approx(s.wall_throughput_samples_s, rel=1e-9)
    text = wall_clock_text(s, causes=False) or ""
    assert text.startswith("2,564 samples/s: smaller batches (mean 25 samples a step, median 32)")
    assert "steps faster than the median (mean step 8.47 ms) gave back" in text
    assert text.endswith("between steps 13%"), text


def test_step_times_past_their_span_keep_the_shares_adding_up():
    """Step times that claim more than the wall clock they fall in (a clock that
    stepped, overlapping events): no share below 0 between steps, and the parts still
    make the wall-clock rate (the slow share is taken of the same clamped time)."""
    events = _skewed(102, 0.004, 0.010, 0.0, slow_every=4)
    squeezed = [
        StepEvent(
            t=T0 + 0.003 * (i + 1),
            step=e.step,
            step_time_s=e.step_time_s,
            samples=e.samples,
            warmup=e.warmup,
        )
        for i, e in enumerate(events)
    ]
    s = summarize([_trainer_start(), *squeezed])
    assert s.between_steps_share == 0.0
    assert _kept(s) == pytest.approx(s.wall_throughput_samples_s, rel=1e-9)


def test_parts_that_do_not_reconcile_are_not_named():
    """A summary recorded before the batches' part, of a run with short batches: the
    parts it has do not make the wall-clock rate, so only the two rates are said."""
    s = summarize([_trainer_start(), *_short_last_batch()])
    recorded = msgspec.to_builtins(s)
    del recorded["small_batches_share"], recorded["mean_samples_per_step"]
    old = msgspec.convert(recorded, RunSummary)
    assert wall_clock_text(old) == "2,936 samples/s over the wall clock"
    assert wall_clock_text(old, causes=False) == "2,936 samples/s"
