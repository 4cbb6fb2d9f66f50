"""gpuscale.formatting: one unit system (decimal sizes, ms/s durations)."""

from __future__ import annotations

import pytest

from gpuscale import formatting as f


@pytest.mark.parametrize(
    ("value_s", "text"),
    [
        (None, "n/a"),
        (0.0123, "12.3 ms"),
        (0.9994, "999.4 ms"),
        (4.561, "4.56 s"),
        # seed004's 16 and 24 devices: three significant figures tell them apart
        (1.010, "1.01 s"),
        (1.026, "1.03 s"),
        (9.996, "10.0 s"),
        (12.34, "12.3 s"),
        (185, "3m 05s"),
        (2 * 3600 + 3 * 60 + 10, "2h 03m"),
    ],
)
def test_durations(value_s, text):
    assert f.format_duration_s(value_s) == text


@pytest.mark.parametrize(
    ("value_s", "text"),
    [
        (None, "n/a"),
        (0.06404, "64 ms"),
        (0.006404, "6.4 ms"),
        (0.00052, "0.52 ms"),
        (0.6404, "640 ms"),
        (0.9996, "1.0 s"),
        (1.26, "1.3 s"),
    ],
)
def test_a_modelled_duration_has_two_significant_figures(value_s, text):
    assert f.format_rough_duration_s(value_s) == text


def test_ms_and_clock():
    assert f.format_ms(0.1234) == "123.4 ms"
    assert f.format_ms(2.5, digits=0) == "2500 ms"
    assert f.format_ms(None) == "n/a"
    assert f.format_clock_s(65) == "1:05"
    assert f.format_clock_s(3725) == "1:02:05"
    assert f.format_clock_s(-3) == "0:00"


@pytest.mark.parametrize(
    ("value_bytes", "text"),
    [
        (None, "n/a"),
        (512, "512 B"),
        (1500, "1.5 kB"),
        (12_000_000, "12.0 MB"),
        (80 * 2**30, "85.9 GB"),  # decimal units, never GiB
        (1.2e12, "1.2 TB"),
    ],
)
def test_sizes_are_decimal(value_bytes, text):
    assert f.format_bytes(value_bytes) == text


def test_rates_and_bare_numbers():
    assert f.format_rate_bytes_s(850) == "850 B/s"
    assert f.format_rate_bytes_s(320e6) == "320.0 MB/s"
    assert f.format_rate_bytes_s(45e9) == "45.0 GB/s"
    assert f.format_rate_bytes_s(None) == "n/a"
    assert f.format_gb(40e9) == "40.0"
    assert f.format_gb_s(2.45e9) == "2.5" and f.format_gb_s(45e9) == "45"
    assert f.format_gb_s(None) == "n/a"


def test_percentages_throughput_and_sample_rates():
    assert f.format_pct(41.6) == "42%"
    assert f.format_pct(41.6, digits=1) == "41.6%"
    assert f.format_fraction_pct(0.25) == "25%"
    assert f.format_fraction_pct(None) == "n/a"
    assert f.format_samples_s(12345.6) == "12,346 samples/s"
    assert f.format_samples_s(3.25) == "3.2 samples/s"
    assert f.format_sample_rate(0.5) == "2 Hz"
    assert f.format_sample_rate(5) == "0.2 Hz"
    assert f.format_sample_rate(0) == "n/a"
    assert f.format_number(564.4, suffix=" W") == "564 W"


def test_text_gauge():
    assert f.text_gauge(None, 4) == "····"
    assert f.text_gauge(50, 4) == "██░░"
    assert f.text_gauge(100, 4) == "████"
    assert len(f.text_gauge(33, 10)) == 10


def test_a_phase_within_its_noise_is_not_resolved_never_zero():
    from gpuscale.formatting import format_phase_s

    assert format_phase_s(0.0123, 0.0012) == "12.3 ± 1.2 ms"
    assert format_phase_s(0.0, 0.0014) == "< 1.4 ms (not resolved)"
    assert format_phase_s(-0.001, 0.0014) == "< 1.4 ms (not resolved)"
    assert format_phase_s(0.001, 0.0014) == "< 2.4 ms (not resolved)"
    assert format_phase_s(0.0, None) == "not resolved (too few probes)"
    # old recordings' floored probes: all 0, no spread; never "< 0.0 ms"
    assert format_phase_s(0.0, 0.0) == "< 0.1 ms (not resolved)"
    assert format_phase_s(0.005, None) == "5.0 ms"
    # one probe timed 7 µs: no uncertainty, and it would print as 0.0 ms (a trial saw it)
    assert format_phase_s(0.000007, None) == "not resolved (too few probes)"
    assert format_phase_s(None, None) == "n/a"


def test_one_replica_exchanges_nothing_whatever_the_strategy_would_use():
    # a mirrored run on one device has no all-reduce, though TensorFlow names its ops
    assert f.exchange_words("collective", 1) == " (1 replica, no all-reduce)"
    assert f.exchange_words("collective", 1, short=True) == " (1 replica, no all-reduce)"
    assert f.exchange_words("nccl", 2) == " with nccl all-reduce"
    assert f.exchange_words("nccl", 2, short=True) == " (nccl)"
    assert f.exchange_words(None, 2) == ""  # not said: nothing added


def test_a_one_device_recording_is_described_without_an_all_reduce(capsys):
    """The summary (`replay` off a terminal, `run`) and the dashboard's header of a
    mirrored run on one device: no 'with collective all-reduce'."""
    from pathlib import Path

    from gpuscale.cli import main
    from gpuscale.recording.reader import load_run
    from gpuscale.ui.model import RunModel
    from gpuscale.ui.widgets.header import describe_run

    one = Path(__file__).resolve().parent.parent / "sample_runs" / "mnist-cnn_1xcpu.ndjson"
    assert main(["replay", str(one)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.endswith(": mirrored (1 replica, no all-reduce)"), first
    model = RunModel()
    model.absorb(load_run(one).events)
    header = describe_run(model.snapshot())
    assert "mirrored (1 replica, no all-reduce) · 1x logical CPU" in header, header


def test_a_percentage_range_has_the_decimals_that_print_its_ends_apart():
    assert f.format_pct_with_range(0.46, 0.25, 0.52) == "46% (25%\u201352%)"
    # trial 9: "10% (10%\u201310%)" said nothing
    assert f.format_pct_with_range(0.0118, 0.0081, 0.0128) == "1.2% (0.8%\u20131.3%)"
    assert f.format_pct_with_range(0.1001, 0.09996, 0.1003) == "10%"  # narrower than 0.1 point
    assert f.format_pct_with_range(0.5, None, None) == "50%"


def test_a_range_narrower_than_its_digits_is_left_out():
    assert f.format_with_range(1.0, 0.9991, 1.0004, ".2f", "x") == "1.00x"
    assert f.format_with_range(7.09, 6.56, 7.61, ".2f", "x") == "7.09x (6.56\u20137.61x)"


def test_a_narrow_header_keeps_the_batch_and_how_it_scales():
    """Trial: at 80 columns the header cut "batch 2x64…", losing the batch and
    "(strong scaling)"; the all-reduce's name and the word "scaling" go first."""
    from pathlib import Path

    from rich.cells import cell_len

    from gpuscale.recording.reader import load_run
    from gpuscale.ui.model import RunModel
    from gpuscale.ui.widgets.header import describe_run

    two = Path(__file__).resolve().parent.parent / "sample_runs" / "mnist-cnn_2xcpu.ndjson"
    model = RunModel()
    model.absorb(load_run(two).events)
    snap = model.snapshot()
    wide = describe_run(snap)
    assert wide.endswith("· batch 2x64=128 (strong scaling)") and "(collective)" in wide, wide
    narrow = describe_run(snap, width=68)  # 80 columns less "gpuscale  " and the borders
    assert cell_len(narrow) <= 68, narrow
    assert narrow.endswith("· 2x logical CPU · batch 2x64=128 (strong)"), narrow
    assert describe_run(snap, width=200) == wide


def test_a_narrow_multi_worker_header_keeps_its_batch():
    """Trial 2: at 80x24 `mlp · multi-worker · 2 replicas (1 CPU per worker, 2
    workers) · bat…`: the workers are said shorter before the batch is cut."""
    from pathlib import Path

    import msgspec
    from rich.cells import cell_len

    from gpuscale.events.schema import StartEvent
    from gpuscale.recording.reader import load_run
    from gpuscale.ui.model import RunModel
    from gpuscale.ui.widgets.header import describe_run

    two = Path(__file__).resolve().parent.parent / "sample_runs" / "mnist-cnn_2xcpu.ndjson"
    events = load_run(two).events
    start = next(e for e in events if isinstance(e, StartEvent))
    multi = msgspec.structs.replace(
        start,
        model="mlp",
        strategy="multi-worker",
        num_workers=2,
        devices=start.devices[:1],
        platform="cpu",
    )
    model = RunModel()
    model.absorb([multi if e is start else e for e in events])
    snap = model.snapshot()
    assert "2 replicas (1 CPU per worker, 2 workers)" in describe_run(snap)
    narrow = describe_run(snap, width=68)
    assert cell_len(narrow) <= 68, narrow
    assert "2 workers x 1 CPU · batch 2x64=128 (strong)" in narrow, narrow


def test_an_ended_run_says_its_own_duration_beside_the_clock_from_the_launch():
    """Trial 2: `elapsed 0:10` in the header against `run completed after 200 steps,
    7.73 s` in the log, and nothing saying why: the run's own duration is said too."""
    import dataclasses
    from pathlib import Path

    from gpuscale.recording.reader import load_run
    from gpuscale.ui.model import RunModel
    from gpuscale.ui.widgets.header import elapsed_text

    two = Path(__file__).resolve().parent.parent / "sample_runs" / "mnist-cnn_2xcpu.ndjson"
    model = RunModel()
    model.absorb(load_run(two).events)
    snap = model.snapshot()
    assert snap.end is not None
    ended = dataclasses.replace(snap, elapsed_s=10.2, duration_s=7.73)
    assert elapsed_text(ended) == "elapsed 0:10 · run 7.73 s"
    assert elapsed_text(dataclasses.replace(ended, duration_s=9.9)) == "elapsed 0:10"
    running = dataclasses.replace(ended, end=None)
    assert elapsed_text(running) == "elapsed 0:10"
