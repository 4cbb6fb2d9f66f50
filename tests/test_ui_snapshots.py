"""Snapshots of the dashboard's main layouts (pytest-textual-snapshot).

Deterministic: synthetic runs with fixed timestamps, a replay clock that does
not move, and all times on screen derived from the events. Update with
``pytest tests/test_ui_snapshots.py --snapshot-update`` after a deliberate change.
"""

from __future__ import annotations

import pytest
from ui_fixtures import cpu_run, gpu8_run, replay

from gpuscale.ui.app import build_app
from gpuscale.ui.synthetic import synthetic_run


async def settle(pilot) -> None:
    await pilot.app.settle()
    await pilot.pause()
    await pilot.app.settle()
    await pilot.pause()
    # Toasts expire after a few seconds of wall time: on a loaded machine the
    # capture could come before or after that, so snapshots never show them
    # (test_ui_app checks the toasts themselves).
    pilot.app.clear_notifications()
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=["80x24", "200x50"])
def test_cpu_run_layout(snap_compare, size):
    app = build_app(replay(cpu_run(), end=True))
    assert snap_compare(app, terminal_size=size, run_before=settle)


@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=["80x24", "200x50"])
def test_eight_gpu_layout(snap_compare, size):
    app = build_app(replay(gpu8_run(), end=True))
    assert snap_compare(app, terminal_size=size, run_before=settle)


def test_error_screen(snap_compare):
    app = build_app(replay(synthetic_run(fail=True), end=True))
    assert snap_compare(app, terminal_size=(80, 24), run_before=settle)


def test_help_screen_light_theme(snap_compare):
    app = build_app(replay(cpu_run(), end=True))

    async def run_before(pilot) -> None:
        await settle(pilot)
        await pilot.press("t", "question_mark")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_eight_gpu_layout_120x40(snap_compare):
    """The size issue 16 saw: charts across the width, the recommendation a row under them."""
    app = build_app(replay(gpu8_run(), end=True))
    assert snap_compare(app, terminal_size=(120, 40), run_before=settle)
