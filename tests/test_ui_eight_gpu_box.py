"""The dashboard on an 8-GPU box (the commonest multi-GPU machine): eight cards
condense to one line each at 80x24 and 120x40, and a GPU whose clocks are held
down (heat, a hardware slowdown, a lowered power limit) must still stand out, in
either form, since in a synchronous data-parallel run every replica waits for it."""

from __future__ import annotations

import msgspec
import pytest
from ui_fixtures import gpu8_run, replay

from gpuscale.events.schema import Event, GpuSample
from gpuscale.ui.app import build_app
from gpuscale.ui.widgets.spark import percent_bars

ODD = 3
"""The GPU that is held down."""


def held_down(
    reasons: list[str], *, odd_limit_w: float = 700.0, others: list[str] = ()
) -> list[Event]:
    """The synthetic 8-GPU run, GPU :data:`ODD` with ``reasons`` and power limit
    ``odd_limit_w``, every other GPU with ``others`` (its limit 700 W)."""
    events = []
    for event in gpu8_run():
        if isinstance(event, GpuSample) and not event.lost:
            odd = event.index == ODD
            event = msgspec.structs.replace(
                event,
                throttle_reasons=list(reasons if odd else others),
                power_limit_w=odd_limit_w if odd else 700.0,
                power_w=min(event.power_w or 0.0, odd_limit_w) if odd else event.power_w,
            )
        events.append(event)
    return events


def screen_lines(app) -> list[str]:
    return [strip.text for strip in app.screen._compositor.render_strips()]


async def _screen(events: list[Event], size: tuple[int, int]) -> tuple[bool, list[str]]:
    app = build_app(replay(events, end=True))
    async with app.run_test(size=size) as pilot:
        await app.settle()
        await pilot.pause()
        await app.settle()
        await pilot.pause()
        return app.device_grid.compact, screen_lines(app)


def _line_of(lines: list[str], gpu: int) -> str:
    """The part of the screen row that is GPU ``gpu``'s one-line card."""
    row = next(line for line in lines if f"▌GPU{gpu} " in line)
    return row.split(f"▌GPU{gpu} ", 1)[1].split("▌", 1)[0]


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
@pytest.mark.parametrize(
    ("reasons", "said"),
    [
        (["sw_thermal"], "thermal"),
        (["sw_power_cap", "hw_slowdown"], "HW slowdown"),
        (["hw_power_brake", "sw_thermal"], "power brake"),
    ],
)
async def test_a_held_down_gpu_says_why_in_its_one_line_card(size, reasons, said):
    compact, lines = await _screen(held_down(reasons), size)
    assert compact, "eight GPUs condense at this size"
    line = _line_of(lines, ODD)
    assert said in line, line
    assert line.rstrip().endswith("°C"), line
    for other in (0, 1, 2, 4, 6, 7):
        assert said not in _line_of(lines, other)


async def test_a_power_cap_stands_out_only_below_the_other_gpus_limit():
    """Under full load every GPU reaches its power cap: that is no odd one out. A
    GPU whose limit was lowered (``nvidia-smi -pl 400`` on a 700 W H100) is."""
    all_capped = held_down(["sw_power_cap"], others=["sw_power_cap"])
    _, lines = await _screen(all_capped, (80, 24))
    assert not any("power cap" in line for line in lines), "\n".join(lines)
    lowered = held_down(["sw_power_cap"], odd_limit_w=400.0, others=["sw_power_cap"])
    _, lines = await _screen(lowered, (80, 24))
    assert "power cap" in _line_of(lines, ODD)
    assert all("power cap" not in _line_of(lines, i) for i in (0, 1, 2, 4, 6, 7))


async def test_full_cards_warn_of_a_power_cap_only_below_the_other_gpus_limit():
    """At 200x50 every full card said 'throttled: power cap' in warning colour when
    every GPU was at its cap under full load (the one-line cards did not)."""
    all_capped = held_down(["sw_power_cap"], others=["sw_power_cap"])
    compact, lines = await _screen(all_capped, (200, 50))
    assert not compact
    assert not any("throttled: power cap" in line for line in lines), "\n".join(lines)
    lowered = held_down(["sw_power_cap"], odd_limit_w=400.0, others=["sw_power_cap"])
    _, lines = await _screen(lowered, (200, 50))
    assert sum("throttled: power cap" in line for line in lines) == 1


async def test_a_full_card_names_the_slowdown_before_what_its_width_cuts():
    """At 200x50 each card is 35 columns: the slowdown leads its line, so the
    card's width cuts the GPM numbers after it, not the reason."""
    events = held_down(["sw_power_cap", "hw_slowdown"], odd_limit_w=400.0)
    compact, lines = await _screen(events, (200, 50))
    assert not compact
    screen = "\n".join(lines)
    assert "throttled: HW slowdown" in screen, screen
    assert "GPM SM" in screen


async def test_an_idle_gpus_reason_stays_behind_the_gpm_numbers():
    """``gpu_idle`` slows nothing that matters: a full card keeps it at the end
    and a one-line card keeps its bar."""
    events = held_down(["gpu_idle"])
    _, lines = await _screen(events, (80, 24))
    assert "█" in _line_of(lines, ODD) or "░" in _line_of(lines, ODD)
    _, lines = await _screen(events, (200, 50))
    row = next(line for line in lines if "GPM SM" in line and "clocks" in line)
    assert row.index("GPM SM") < row.index("clocks") and "throttled" not in row


def test_percent_bars_are_drawn_against_0_to_100():
    assert percent_bars([95.0] * 10, 5) == [95.0] * 5
    assert percent_bars([0.0, 2.0, 0.0, 1.0], 2) == [2.0, 1.0]
    assert percent_bars([10.0, 90.0], 4) == [10.0, 10.0, 90.0, 90.0]  # stretched
    assert percent_bars([-5.0, 130.0], 2) == [0.0, 100.0]
    assert percent_bars([], 5) == []


def _spark_under(lines: list[str], title: str) -> str:
    """The busy history of the card titled ``title`` (its ``busy ...`` row)."""
    top = next(i for i, line in enumerate(lines) if title in line)
    left = lines[top].rindex("╭", 0, lines[top].index(title))  # the card's corner
    row = next(line for line in lines[top + 1 :] if "busy " in line[left : left + 10])
    return row[left:].split("busy ", 1)[1].split(" ", 1)[0]


async def test_card_histories_compare_across_gpus():
    """Each card's utilization history is drawn against 0-100, as its gauge is: an
    idle GPU's 0-2% of noise draws flat and low, a GPU steady at 95% high (drawn each
    against its own range, the idle one spiked to full height and the steady one lay
    as flat and low as an idle one)."""
    idle, steady = 6, 7
    events = []
    for event in gpu8_run():
        if isinstance(event, GpuSample) and not event.lost and event.index in (idle, steady):
            util = (2.0 if int(event.t * 10) % 2 else 0.0) if event.index == idle else 95.0
            event = msgspec.structs.replace(event, util_gpu_pct=util)
        events.append(event)
    compact, lines = await _screen(events, (200, 50))
    assert not compact
    idle_spark = _spark_under(lines, f"GPU {idle} ·")
    steady_spark = _spark_under(lines, f"GPU {steady} ·")
    assert idle_spark and set(idle_spark) == {"▁"}, idle_spark
    assert steady_spark and set(steady_spark) <= {"▇", "█"}, steady_spark
