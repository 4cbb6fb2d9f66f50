"""What the GPUs did over a run: NVML's busy and GPM's working, in the summary,
`run`'s text and the dashboard's panel."""

from __future__ import annotations

from gpuscale.analysis.gpu_activity import busy_not_working, gpu_activity_text
from gpuscale.analysis.summary import summarize
from gpuscale.events.schema import EndEvent, GpuSample, StartEvent, StepEvent

T0 = 1_700_000_000.0
COMMON = {"gpuscale_version": "t", "host": "h", "pid": 1}


def _samples(index: int, t_from: float, t_to: float, util: float, sm=None, tensor=None):
    t = t_from
    out = []
    while t < t_to:
        out.append(
            GpuSample(
                t=t,
                index=index,
                util_gpu_pct=util,
                gpm_sm_activity_pct=sm,
                gpm_tensor_activity_pct=tensor,
            )
        )
        t += 0.5
    return out


def _script_start(**extra) -> StartEvent:
    return StartEvent(
        t=T0,
        source="script",
        model="train.py",
        strategy="unknown",
        config={"argv": ["python", "train.py"], "callback": False},
        **COMMON,
        **extra,
    )


def test_a_script_without_the_callback_is_summed_up_by_its_telemetry():
    """Half the time matrix products (busy, SMs and tensor cores working), half host
    copies (busy, SMs idle, as the H100 read them): the time averages say so."""
    events = [
        _script_start(),
        *_samples(0, T0, T0 + 10, 100.0, sm=96.0, tensor=93.0),
        *_samples(0, T0 + 10, T0 + 20, 100.0, sm=0.0, tensor=0.0),
        EndEvent(t=T0 + 20, status="completed", duration_s=20.0),
    ]
    s = summarize(events)
    assert s.no_step_times
    assert s.gpu_util_mean_pct == 100.0
    assert s.gpu_sm_activity_mean_pct == 48.0
    assert s.gpu_tensor_activity_mean_pct == 46.5
    assert s.gpu_window == "whole run" and s.gpu_window_s == 19.5  # first to last sample
    text = gpu_activity_text(s)
    assert text == (
        "busy 100% · working SM 48%, tensor 46% (GPM): time averages over the whole run "
        "(19.5 s sampled, start-up included)"
    )
    assert busy_not_working(s) is not None and "SMs were active 48%" in busy_not_working(s)


def test_a_provisional_start_is_not_yet_a_script_without_the_callback():
    s = summarize([_script_start(provisional=True), *_samples(0, T0, T0 + 2, 50.0)])
    assert not s.no_step_times


def test_with_counted_steps_only_their_span_counts_and_the_laggard_is_named():
    """TensorFlow's start-up (GPUs idle) is left out once steps are counted; the
    least busy GPU is named where it lags the median by over 10 points."""
    start = StartEvent(
        t=T0, model="m", strategy="mirrored", num_replicas=2, source="trainer", **COMMON
    )
    steps = [
        StepEvent(t=T0 + 10 + 0.1 * (i + 1), step=i, step_time_s=0.1, samples=64) for i in range(50)
    ]
    events = [
        start,
        *_samples(0, T0, T0 + 10, 0.0),  # start-up: idle
        *_samples(1, T0, T0 + 10, 0.0),
        *_samples(0, T0 + 10, T0 + 15, 90.0),
        *_samples(1, T0 + 10, T0 + 15, 60.0),
        *steps,
    ]
    s = summarize(events)
    assert s.gpu_util_mean_pct == 75.0  # the median of two GPUs' averages: 90 and 60
    assert s.gpu_util_min_pct == 60.0 and s.gpu_util_min_index == 1
    assert s.gpu_window == "counted steps" and s.gpu_window_s == 5.0
    assert gpu_activity_text(s) == (
        "busy 75% · least busy GPU 1 60%: time averages over the counted steps"
    )
    assert s.gpu_sm_activity_mean_pct is None
    assert "GPM" not in gpu_activity_text(s)
    assert busy_not_working(s) is None  # without GPM nothing tells busy from working


def test_no_gpu_samples_no_line():
    s = summarize([_script_start()])
    assert gpu_activity_text(s) is None and busy_not_working(s) is None


def test_the_median_field_is_a_median_and_the_mean_a_time_average():
    """A third of the time idle, the rest fully busy: mean 67%, median 100% (the
    field named median used to hold the time average)."""
    events = [
        _script_start(),
        *_samples(0, T0, T0 + 10, 0.0, sm=0.0, tensor=0.0),
        *_samples(0, T0 + 10, T0 + 30, 100.0, sm=90.0, tensor=60.0),
        EndEvent(t=T0 + 30, status="completed", duration_s=30.0),
    ]
    s = summarize(events)
    assert 60 < s.gpu_util_mean_pct < 70 and s.gpu_util_median_pct == 100.0
    assert 55 < s.gpu_sm_activity_mean_pct < 65 and s.gpu_sm_activity_median_pct == 90.0
    assert 35 < s.gpu_tensor_activity_mean_pct < 45 and s.gpu_tensor_activity_median_pct == 60.0
    assert gpu_activity_text(s).startswith("busy 6")  # quotes the time average
    assert ": time averages over the whole run" in gpu_activity_text(s)


def test_an_older_summary_with_only_the_median_field_says_median():
    from gpuscale.analysis.summary import RunSummary

    old = RunSummary(gpu_util_median_pct=98.0, gpu_sm_activity_median_pct=80.0)
    assert gpu_activity_text(old) == "busy 98% (median) · working SM 80% (GPM)"
    # written with the time average but before the window was said: as it read then
    older = RunSummary(gpu_util_mean_pct=55.0, gpu_sm_activity_mean_pct=37.0)
    assert gpu_activity_text(older) == "busy 55% (time average) · working SM 37% (GPM)"


def test_the_window_is_said_one_busy_figure_alone_is_a_time_average():
    """No GPM, one GPU: one figure, "time average" in the singular; while the run goes
    on, "the run so far"."""
    s = summarize([_script_start(), *_samples(0, T0, T0 + 4, 50.0)])
    assert s.status == "running" and s.gpu_window == "whole run"
    assert gpu_activity_text(s) == (
        "busy 50%: time average over the run so far (3.50 s sampled, start-up included)"
    )


def test_a_gpu_lost_before_the_counted_steps_is_not_averaged_over_the_start_up():
    """The window is one for every GPU: a GPU without a sample in the counted steps'
    span is left out, not averaged over its own start-up (it read as the least busy
    GPU, idle all along)."""
    start = StartEvent(
        t=T0, model="m", strategy="mirrored", num_replicas=2, source="trainer", **COMMON
    )
    steps = [
        StepEvent(t=T0 + 10 + 0.1 * (i + 1), step=i, step_time_s=0.1, samples=64) for i in range(50)
    ]
    events = [
        start,
        *_samples(0, T0, T0 + 15, 0.0),  # idle start-up, then busy
        *_samples(0, T0 + 10, T0 + 15, 90.0),
        *_samples(1, T0, T0 + 5, 0.0),  # lost in the start-up: no sample after T0 + 5
        *steps,
    ]
    events = sorted(events, key=lambda e: e.t)
    s = summarize(events)
    assert s.gpu_window == "counted steps"
    assert s.gpu_util_min_index == 0  # GPU 1 is not in the averages
    assert "least busy" not in gpu_activity_text(s)


def test_json_says_the_window():
    """`run --json` prints the recorded summary with every default said
    (:func:`with_defaults`): the window is two fields, what and how long."""
    from gpuscale.analysis.summary import summary_document, with_defaults

    events = [
        _script_start(),
        *_samples(0, T0, T0 + 10, 100.0, sm=0.0, tensor=0.0),
        EndEvent(t=T0 + 10, status="completed", duration_s=10.0),
    ]
    doc = with_defaults(summary_document(summarize(events)))
    assert doc["gpu_window"] == "whole run" and doc["gpu_window_s"] == 9.5
    assert "gpu_window" not in with_defaults(summary_document(summarize([_script_start()])))
