"""A run's summary says when a GPU of the run was held down (which reason, which
GPU, what share of its busy samples) and when one GPU was markedly less busy than
the others: in a synchronous data-parallel run every replica waits for the slowest
GPU, so one throttled or idle GPU sets the pace of all eight. The rule is the one
the dashboard's cards use (gpuscale.analysis.held_down), and healthy runs raise no
alarm: every GPU at its power cap under full load, the real single-GPU H100 and
H200 recordings. Recordings: the real Sampler and Recorder over FakeNvml
(tests/eight_gpu_recordings.py); no TensorFlow."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from eight_gpu_recordings import HW_SLOWDOWN, POWER_CAP, THERMAL, held, idle, record

from gpuscale.analysis.held_down import (
    HELD_DOWN_SHARE,
    SLOWDOWNS,
    held_down_reasons,
    peer_limits_w,
)
from gpuscale.analysis.recommend import recommend
from gpuscale.analysis.summary import RunSummary, summarize, summary_document
from gpuscale.analysis.sweep import load_inputs
from gpuscale.cli import main
from gpuscale.recording.reader import load_run

FIXTURES = Path(__file__).parent / "fixtures"
REAL = [FIXTURES / "h100_load.ndjson", FIXTURES / "h200_load.ndjson"]


def _summary(path: Path) -> RunSummary:
    return summarize(load_run(path).events)


def _capped_and_idle(gpus, _sample):
    """GPU 3's limit lowered to 400 W and a hardware slowdown; GPU 6 idle."""
    held(gpus[3], POWER_CAP | HW_SLOWDOWN, limit_w=400.0)
    idle(gpus[6])


# --- the rule ---------------------------------------------------------------


def test_a_power_cap_holds_a_gpu_down_only_below_its_peers_limit():
    assert held_down_reasons(["sw_power_cap"], 700.0, 700.0) == []
    assert held_down_reasons(["sw_power_cap"], 400.0, 700.0) == ["sw_power_cap"]
    assert held_down_reasons(["sw_power_cap"], 700.0, None) == []  # no peer: one GPU
    assert held_down_reasons(["gpu_idle"], 700.0, 700.0) == []
    # the most telling first, whatever order NVML gave
    assert held_down_reasons(["sw_power_cap", "sw_thermal", "hw_power_brake"], 400.0, 700.0) == [
        "hw_power_brake",
        "sw_thermal",
        "sw_power_cap",
    ]
    limits = peer_limits_w([(0, "H100", 700.0), (0, "H100", 400.0), (0, "L40S", 350.0)])
    assert limits == {(0, "H100"): 700.0, (0, "L40S"): 350.0}


def test_the_cards_use_the_same_rule():
    from gpuscale.events.schema import GpuSample
    from gpuscale.ui.widgets import devices

    assert devices.SLOWDOWNS is SLOWDOWNS
    for reasons, limit, said in [
        (["sw_power_cap"], 700.0, None),
        (["sw_power_cap"], 400.0, "power cap"),
        (["sw_power_cap", "hw_slowdown"], 700.0, "HW slowdown"),
        (["sw_thermal"], 700.0, "thermal"),
    ]:
        sample = GpuSample(t=0.0, index=3, throttle_reasons=reasons, power_limit_w=limit)
        assert devices.slowdown_tag(sample, 700.0) == said


# --- the summary --------------------------------------------------------------


def test_a_gpu_held_down_and_an_idle_one_are_in_the_summary(tmp_path):
    s = _summary(record(tmp_path / "run.ndjson", tweak=_capped_and_idle))
    (gpu,) = s.gpus_held_down
    assert (gpu.index, gpu.worker) == (3, 0)
    assert gpu.reasons == ["hw_slowdown", "sw_power_cap"]
    assert gpu.share == 1.0 and gpu.busy_samples >= 30
    assert (gpu.power_limit_w, gpu.peer_power_limit_w) == (400.0, 700.0)
    odd = s.gpu_imbalance
    assert (odd.index, odd.util_pct) == (6, 0.0)
    assert 88 <= odd.others_pct <= 95  # the fake's GPUs are 95% - index busy


def test_a_thermal_gpu_on_two_sockets(tmp_path):
    def thermal(gpus, _sample):
        held(gpus[3], THERMAL)

    s = _summary(record(tmp_path / "run.ndjson", machine="pcie-two-sockets", tweak=thermal))
    assert [(g.index, g.reasons) for g in s.gpus_held_down] == [(3, ["sw_thermal"])]
    assert s.gpus_held_down[0].power_limit_w is None
    assert s.gpu_imbalance is None


def test_every_gpu_at_its_power_cap_is_no_alarm(tmp_path):
    """Under full load every GPU reaches its cap (the fake's default, as a real H100's)."""
    path = record(tmp_path / "run.ndjson")
    assert all("sw_power_cap" in (e.throttle_reasons or []) for e in _gpu_samples(path))
    s = _summary(path)
    assert s.gpus_held_down is None and s.gpu_imbalance is None


def test_a_short_share_of_samples_is_no_alarm(tmp_path):
    """Heat now and then (one busy sample in ten) is no GPU held down; one in four is."""

    def every(n):
        def tweak(gpus, sample):
            gpus[2].throttle_mask = THERMAL if sample % n == 0 else POWER_CAP

        return tweak

    s = _summary(record(tmp_path / "rare.ndjson", tweak=every(10)))
    assert s.gpus_held_down is None
    s = _summary(record(tmp_path / "often.ndjson", tweak=every(4)))
    (gpu,) = s.gpus_held_down
    assert gpu.index == 2 and HELD_DOWN_SHARE <= gpu.share < 0.3


@pytest.mark.parametrize("recording", REAL, ids=["h100", "h200"])
def test_the_real_single_gpu_recordings_raise_no_alarm(recording):
    """A real H100 and H200 at their 700 W cap under load (sw_power_cap in a third of
    their busy samples): one GPU has no peers, so that is no GPU held down."""
    s = _summary(recording)
    assert s.gpus_held_down is None and s.gpu_imbalance is None


def test_a_lone_gpu_held_down_by_heat_is_said(tmp_path):
    def thermal(gpus, _sample):
        held(gpus[0], THERMAL)

    s = _summary(record(tmp_path / "one.ndjson", devices=1, tweak=thermal))
    assert [g.reasons for g in s.gpus_held_down] == [["sw_thermal"]]
    assert s.gpu_imbalance is None  # one GPU: no others to lag


def test_no_imbalance_where_the_run_s_gpus_are_not_known(tmp_path):
    """A script's run samples every GPU of the machine: 2 replicas, 8 GPUs sampled
    (6 of them idle) and no process memory to tell which are the run's."""
    s = _summary(record(tmp_path / "two.ndjson", devices=2, sample_all=True))
    assert s.gpu_util_min_pct == 0.0  # an unused GPU, not the run's
    assert s.gpu_imbalance is None


def test_no_gpu_is_named_held_down_where_the_run_s_gpus_are_not_known(tmp_path):
    """2 replicas, 8 GPUs sampled, no process memory: GPU 5, hot with someone else's
    work, was said to 'set the pace of all 2' (found by review)."""

    def other_job(gpus, _sample):
        held(gpus[5], THERMAL)

    s = _summary(record(tmp_path / "two.ndjson", devices=2, sample_all=True, tweak=other_job))
    assert s.gpus_held_down is None


def test_the_fields_go_through_the_end_summary_and_old_ones_still_load(tmp_path):
    s = _summary(record(tmp_path / "run.ndjson", tweak=_capped_and_idle))
    doc = msgspec.json.decode(msgspec.json.encode(summary_document(s)))
    assert doc["gpus_held_down"][0]["reasons"] == ["hw_slowdown", "sw_power_cap"]
    assert doc["gpu_imbalance"]["index"] == 6
    back = msgspec.convert(doc, RunSummary, str_keys=True)
    assert back.gpus_held_down == s.gpus_held_down and back.gpu_imbalance == s.gpu_imbalance
    old = {k: v for k, v in doc.items() if k not in ("gpus_held_down", "gpu_imbalance")}
    older = msgspec.convert(old, RunSummary, str_keys=True)
    assert older.gpus_held_down is None and older.gpu_imbalance is None


# --- what the user reads ------------------------------------------------------


def test_replay_end_says_it(tmp_path, capsys):
    path = record(tmp_path / "run.ndjson", tweak=_capped_and_idle)
    assert main(["replay", str(path), "--end"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert (
        "GPU 3 was held down in 100% of its " in out
        and "busy samples (HW slowdown, power cap; its power limit 400 W, its peers' 700 W): "
        "every replica waits for the slowest GPU, so it sets the pace of all 8"
        in out
    ), out
    assert "GPU 6 was busy 0% against " in out and "an imbalance" in out, out


@pytest.mark.parametrize("recording", REAL, ids=["h100", "h200"])
def test_replay_end_of_the_real_recordings_says_neither(recording, capsys):
    assert main(["replay", str(recording), "--end"]) == 0
    out = capsys.readouterr().out
    assert "held down" not in out and "imbalance" not in out, out


def _sweep(tmp_path: Path, held_at: int | None) -> list[Path]:
    def thermal(gpus, _sample):
        held(gpus[3], THERMAL)

    return [
        record(
            tmp_path / f"run{n}.ndjson",
            devices=n,
            tweak=thermal if n == held_at else None,
            step_s=0.130,
            seed=n,
        )
        for n in (1, 2, 4, 8)
    ]


def test_recommend_says_a_count_s_throughput_is_a_lower_figure(tmp_path, capsys):
    paths = _sweep(tmp_path, held_at=8)
    rec = recommend(load_inputs(paths).points)
    (said,) = [line for line in rec.confidence if "held down" in line]
    assert said.startswith("At 8 devices GPU 3 was held down in 100% of its ")
    assert "(thermal)" in said and "a lower figure than the machine can do" in said
    assert said.count(".") == 1  # one sentence
    assert main(["recommend", "--from", *map(str, paths), "--no-chart"]) == 0
    out = capsys.readouterr().out
    confidence = out.split("Confidence", 1)[1]
    assert "At 8 devices GPU 3 was held down" in " ".join(confidence.split())


def test_recommend_of_a_healthy_sweep_says_nothing_of_it(tmp_path):
    rec = recommend(load_inputs(_sweep(tmp_path, held_at=None)).points)
    assert not any("held down" in line for line in rec.confidence)


def test_recommend_json_keeps_it_when_read_back(tmp_path, capsys):
    paths = _sweep(tmp_path, held_at=8)
    assert main(["recommend", "--from", *map(str, paths), "--json"]) == 0
    saved = tmp_path / "sweep.json"
    saved.write_text(capsys.readouterr().out)
    rec = recommend(load_inputs([saved]).points)
    assert any(line.startswith("At 8 devices GPU 3 was held down") for line in rec.confidence)


def _gpu_samples(path: Path):
    from gpuscale.events.schema import GpuSample

    return [e for e in load_run(path).events if isinstance(e, GpuSample)]


def test_runs_combined_at_one_count_keep_the_one_held_down():
    """Two runs at 8 devices, the second held down: their one row says it."""
    from gpuscale.analysis.recommend import combine_runs
    from gpuscale.analysis.sweep import SweepPoint, normalize

    def run(step_s, held_down=None):
        point = SweepPoint(devices=8, scaling="weak", per_replica_batch=64, step_time_s=step_s)
        return normalize(msgspec.structs.replace(point, held_down=held_down))

    row = combine_runs([run(0.130), run(0.131, "GPU 3 was held down (thermal)")], "nccl")
    assert row.held_down == "GPU 3 was held down (thermal)"


def test_a_gpus_rows_are_kept_in_arrays_and_given_back_whole():
    """A summary keeps every GPU sample of a run: in arrays, about 33 bytes a
    sample (as tuples it was about 180: 250 MB for a day of 8 GPUs at 2 Hz)."""
    import tracemalloc

    from gpuscale.analysis.held_down import GpuRow, GpuRows

    rows = [
        GpuRow(1.0, 95.0, ("sw_thermal",), 700.0, 10**9),
        GpuRow(1.5, None, (), None, None),
        GpuRow(2.0, 0.0, ("hw_slowdown", "sw_power_cap"), 400.0, 0),
    ]
    kept = GpuRows()
    for row in rows:
        kept.append(row)
    assert kept.within(0.0, 9.0) == rows
    assert kept.within(1.5, 2.0) == rows[1:]
    assert kept.within(3.0, 4.0) == []
    tracemalloc.start()
    many = GpuRows()
    before = tracemalloc.get_traced_memory()[0]
    for i in range(20_000):
        many.append(GpuRow(float(i), 90.0 + i % 7, rows[i % 3].slowdowns, 700.0, 10**9 + i))
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert grown / 20_000 < 50


def test_a_live_summary_reads_the_rows_again_only_as_they_grow(tmp_path):
    """A live view asks for a summary every second: the rows are read again once the
    samples have grown by a tenth, and at the run's end, which sees every sample."""
    from gpuscale.analysis import summary as summary_module
    from gpuscale.analysis.summary import RunAccumulator

    reads = []
    original = summary_module.GpuRows.within

    def counting(self, lo, hi):
        reads.append(len(self))
        return original(self, lo, hi)

    summary_module.GpuRows.within = counting
    try:
        acc = RunAccumulator()
        events = list(load_run(record(tmp_path / "run.ndjson", tweak=_capped_and_idle)).events)
        end = events.pop()
        for event in events:
            acc.add(event)
        acc.summary(live=True)
        first = len(reads)
        acc.summary(live=True)
        assert len(reads) == first  # nothing new: not read again
        acc.summary()
        assert len(reads) > first  # a summary not asked live is exact: read again
        second = len(reads)
        acc.add(end)
        final = acc.summary(live=True)
        assert len(reads) > second  # the end: read whole
    finally:
        summary_module.GpuRows.within = original
    assert final.gpus_held_down and final.gpus_held_down[0].index == 3


def test_the_dashboards_final_summary_says_it_as_replay_end_does(tmp_path):
    """The cards showed the held-down GPU, but the panel that sums the run up said
    neither line (what replay --end and run print under GPUs)."""
    from gpuscale.ui.widgets.advice import advice_parts

    s = _summary(record(tmp_path / "run.ndjson", tweak=_capped_and_idle))
    _, notes = advice_parts(s, None, final=True)
    said = " ".join(note.plain for note in notes)
    assert "GPU 3 was held down in 100% of its " in said
    assert "GPU 6 was busy 0% against " in said
