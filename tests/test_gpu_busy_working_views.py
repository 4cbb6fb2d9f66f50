"""Busy is not working, over time: the dashboard's Utilization chart and a GPU card
draw GPM's SM (and tensor) activity beside NVML's utilization where the GPUs read
GPM, so a copy phase reads 100% busy with the tensor cores idle; without GPM nothing
changes. Also the card's link line (a unit after each rate, never after ``n/a``)
and the text summary naming the GPUs' model. Real samples: an H200 and an H100
running a load in phases (idle, bf16 matrix products, device copies, host-to-device
copies)."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.color import Color
from ui_fixtures import gpu8_run, replay

from gpuscale.events.schema import DeviceInfo, GpuLinks, GpuSample, StartEvent, Topology
from gpuscale.recording.reader import load_run
from gpuscale.ui.app import build_app
from gpuscale.ui.model import RunModel
from gpuscale.ui.sources import ReplaySource
from gpuscale.ui.widgets.charts import (
    BUSY_COLOR,
    SM_COLOR,
    TENSOR_COLOR,
    activity_legend,
    activity_lines,
    build_util_chart,
    mean_over_time,
)
from gpuscale.ui.widgets.devices import DeviceCard, links_text

ROOT = Path(__file__).resolve().parent.parent
H100 = ROOT / "tests" / "fixtures" / "h100_load.ndjson"
H200 = ROOT / "tests" / "fixtures" / "h200_load.ndjson"


def _snapshot(events):
    model = RunModel()
    model.absorb(list(events))
    return model.snapshot()


def _between(series, lo: float, hi: float) -> list[float]:
    xs, ys = series
    return [y for x, y in zip(xs, ys, strict=True) if lo <= x <= hi]


@pytest.mark.parametrize("recording", [H100, H200], ids=["h100", "h200"])
def test_the_phases_read_apart_busy_beside_working(recording):
    """The recording's phases (its script's log: matmul from 9.7 s, device copies
    from 15.7 s, host-to-device copies from 21.7 s, idle from 27.7 s), well inside
    each: all three busy, but only the products use the tensor cores and only the
    host copies leave the SMs idle."""
    snap = _snapshot(load_run(recording).events)
    gpus = [d for d in snap.devices if d.kind == "gpu"]
    busy, sm, tensor = activity_lines(snap, gpus)
    for lo, hi in ((11, 15), (17, 21), (23, 27)):
        assert min(_between(busy, lo, hi)) >= 95  # busy: NVML's utilization, all alike
    assert min(_between(sm, 11, 15)) > 80 and min(_between(tensor, 11, 15)) > 80  # matmul
    assert min(_between(sm, 17, 21)) > 80 and max(_between(tensor, 17, 21)) < 1  # copies
    assert max(_between(sm, 23, 27)) < 1 and max(_between(tensor, 23, 27)) < 1  # host copies


def test_the_chart_draws_three_lines_with_a_legend_where_the_gpu_reads_gpm():
    snap = _snapshot(load_run(H200).events)
    text = build_util_chart(snap, 44, 12)  # the one chart at 80x24
    legend = text.plain.splitlines()[-1]
    assert legend == "⠶ busy  ⠶ SM (GPM)  ⠶ tensor (GPM)"
    drawn = {s.style.color for s in text.spans if not isinstance(s.style, str) and s.style.color}
    numbers = {color.number for color in drawn}  # plotext's ANSI colours
    wanted = {Color.parse(c).number for c in (BUSY_COLOR, SM_COLOR, TENSOR_COLOR)}
    assert wanted <= numbers, numbers


def test_eight_gpus_draw_their_mean_and_say_so_at_every_size():
    """Eight GPUs' three lines each would be 24 lines: their mean, said in the legend,
    on the legend's line where it fits, else the next (at 120x40 the chart is 38
    columns), never cut."""
    snap = _snapshot(gpu8_run())
    for width, height, legend in (
        (44, 12, ["⠶ busy  ⠶ SM  ⠶ tensor (GPM), mean of 8 GPUs"]),
        (38, 15, ["⠶ busy  ⠶ SM (GPM)  ⠶ tensor (GPM)", "mean of 8 GPUs"]),
        (64, 15, ["⠶ busy  ⠶ SM (GPM)  ⠶ tensor (GPM)  mean of 8 GPUs"]),
    ):
        lines = build_util_chart(snap, width, height).plain.splitlines()
        assert lines[-len(legend) :] == legend, (width, lines[-2:])
        assert len(lines) == height
    # too narrow for the two-line forms at a low height: one line, cut with an ellipsis
    short = activity_legend(30, 8, True, 1)
    assert short.cell_len <= 30 and short.plain.endswith("…")


def test_without_gpm_the_chart_is_unchanged_one_line_per_gpu():
    snap = _snapshot(gpu8_run(gpm=False))
    lines = build_util_chart(snap, 38, 15).plain.splitlines()
    assert lines[-1].startswith("GPU ⠶0 ⠶1 ⠶2")
    assert "busy" not in "\n".join(lines) and "GPM" not in "\n".join(lines)


def test_the_mean_is_taken_per_sampling_and_never_over_one_gpu_alone():
    """Two GPUs sampled together average at each sampling; a third lost early (its
    history older than the others') does not make the mean's start its own values."""
    a = ([10.0, 10.5, 11.0], [100.0, 0.0, 50.0])
    b = ([10.0, 10.5, 11.0], [0.0, 0.0, 100.0])
    lost = ([1.0, 1.5, 2.0], [7.0, 7.0, 7.0])
    assert mean_over_time([a, b]) == ([10.0, 10.5, 11.0], [50.0, 0.0, 75.0])
    assert mean_over_time([a, b, lost]) == ([10.0, 10.5, 11.0], [50.0, 0.0, 75.0])
    # two workers' samplers a little apart: still one sampling each
    c = ([10.1, 10.6, 11.1], [0.0, 0.0, 0.0])
    xs, ys = mean_over_time([a, c])
    assert len(xs) == 3 and ys == [50.0, 0.0, 25.0]


async def test_the_gpu_card_shows_sm_activity_over_time_beside_busy():
    """The card's history line: ``busy ▁▁██ SM ▁▁█▁`` where the GPU reads GPM; the host
    card (and a GPU without GPM) keep one history across the card."""
    app = build_app(ReplaySource(H200, end=True))
    async with app.run_test(size=(120, 48)) as pilot:
        await app.settle()
        await pilot.pause()
        host, gpu = list(app.query(DeviceCard))
        assert gpu.sm_spark.display and gpu.sm_label.display and gpu.spark_label.display
        assert list(gpu.sm_spark.data) == list(app.model.snapshot().devices[0].sm_history_pct)
        assert max(gpu.sm_spark.data) > 90 and min(gpu.sm_spark.data) == 0
        assert not host.sm_spark.display and not host.spark_label.display
        screen = app.export_screenshot().replace("&#160;", " ")
        assert "PCIe ↓0.0 ↑0.0 GB/s · no NVLink" in screen  # the H200 has no NVLink


async def test_a_gpu_without_gpm_keeps_one_history_across_its_card():
    app = build_app(replay(gpu8_run(gpm=False), end=True))
    async with app.run_test(size=(200, 50)) as pilot:
        await app.settle()
        await pilot.pause()
        cards = list(app.query(DeviceCard))
        assert len(cards) == 9 and not app.query_one("#devices").has_class("compact")
        for card in cards:
            assert not card.sm_spark.display and not card.spark_label.display


def test_the_link_line_puts_a_unit_after_each_rate_never_after_n_a():
    def sample(**rates):
        return GpuSample(t=0.0, index=0, **rates)

    pcie = {"pcie_rx_bytes_s": 61e9, "pcie_tx_bytes_s": 5.3e9}
    assert links_text(sample(**pcie), 35) == "PCIe ↓61 ↑5.3 GB/s · NVLink n/a"
    assert links_text(sample(**pcie), 35, nvlink_links=0) == "PCIe ↓61 ↑5.3 GB/s · no NVLink"
    assert links_text(sample(), 35) == "PCIe n/a · NVLink n/a"
    both = {**pcie, "nvlink_rx_bytes_s": 450e9, "nvlink_tx_bytes_s": 451e9}
    assert links_text(sample(**both), 60) == "PCIe ↓61 ↑5.3 GB/s · NVLink ↓450 ↑451 GB/s"
    # a card 35 columns wide (the usual): one unit for both rates, at the end
    assert links_text(sample(**both), 35) == "PCIe ↓61 ↑5.3 NVLink ↓450 ↑451 GB/s"
    assert links_text(sample(**both), 38) == "PCIe ↓61 ↑5.3 · NVLink ↓450 ↑451 GB/s"


COMMON = {"t": 0.0, "gpuscale_version": "t", "host": "h", "pid": 1, "model": "m"}


def _start(names, replicas=None, **extra) -> StartEvent:
    devices = [DeviceInfo(index=i, name=n, kind="gpu") for i, n in enumerate(names)]
    return StartEvent(
        devices=devices,
        platform="gpu",
        num_replicas=replicas or len(names),
        **COMMON,
        **extra,
    )


def test_the_text_summary_names_the_gpus_model():
    from gpuscale.commands.run import _devices

    assert _devices(_start(["NVIDIA H200"])) == "1 x NVIDIA H200"
    assert _devices(_start(["NVIDIA H100 80GB HBM3"] * 8)) == "8 x NVIDIA H100 80GB HBM3"
    mixed = ["NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB"]
    assert _devices(_start(mixed)) == (
        "3 x GPU (mixed: 2 x NVIDIA H100 80GB HBM3, 1 x NVIDIA A100-SXM4-40GB)"
    )
    # TensorFlow's names name no model (the Keras callback's start): NVML's view of the
    # machine does, where its GPUs are of one model; else the GPUs stay unnamed
    keras = _start(["GPU:0", "GPU:1"])
    assert _devices(keras) == "2 x GPU"
    topology = Topology(gpus=[GpuLinks(index=i, name="NVIDIA H200") for i in range(4)])
    assert _devices(_start(["GPU:0", "GPU:1"], topology=topology)) == "2 x NVIDIA H200"
    two_models = Topology(
        gpus=[GpuLinks(index=0, name="NVIDIA H200"), GpuLinks(index=1, name="NVIDIA L4")]
    )
    assert _devices(_start(["GPU:0", "GPU:1"], topology=two_models)) == "2 x GPU"
    # several workers: the start lists its own worker's GPUs only
    multi = _start(["NVIDIA H100 80GB HBM3"] * 2, replicas=4, num_workers=2)
    assert _devices(multi) == "4 x GPU (2 workers, 2 each; worker 0's: NVIDIA H100 80GB HBM3)"
    cpu = StartEvent(platform="cpu-logical", num_replicas=2, **COMMON)
    assert _devices(cpu) == "2 x CPU logical devices"


def test_replay_text_names_the_h200(capsys):
    from gpuscale.commands.replay import print_summary

    print_summary(load_run(H200).events, H200)
    out = capsys.readouterr().out
    assert out.startswith("load.py on 1 x NVIDIA H200: strategy unknown")
    assert "over the whole run (31.5 s sampled, start-up included)" in out
