"""One source for keys: the app's bindings, the footer, the help screen and the
README all follow gpuscale/ui/keys.py; `c` does something visible on a wide screen."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Footer, Input
from textual.widgets._footer import FooterKey
from ui_fixtures import FakeLiveRun, cpu_run, replay

from gpuscale.ui import keys
from gpuscale.ui.app import CHART_IDS, GpuscaleApp, build_app
from gpuscale.ui.messages import RunFailed
from gpuscale.ui.sources import LiveSource
from gpuscale.ui.sweep_app import SweepApp
from gpuscale.ui.widgets.screens import ErrorScreen

README = (Path(__file__).parent.parent / "README.md").read_text()


def test_the_app_binds_exactly_the_table():
    bound = {(b.key, b.action) for b in GpuscaleApp.BINDINGS}
    table = {(names, action) for key in keys.KEYS for names, action in key.bindings}
    assert bound == table


def test_the_footer_shows_every_labelled_key():
    shown = {b.key_display for b in keys.bindings() if b.show}
    assert {"q", "?", "c", "p", "s"} <= shown
    assert shown == {k.display for k in keys.KEYS if k.label and k.bindings}


@pytest.mark.parametrize("mode", ["replay", "live"])
async def test_the_footer_fits_80_columns(mode):
    """Every footer key whole and inside the screen, `e` (a failed run) included:
    no key cut off at the edge (a replay once ended in "…s SVG ▏^p paletteh")."""
    source = (
        replay(cpu_run(), end=True)
        if mode == "replay"
        else LiveSource(FakeLiveRun(cpu_run()[:40], finish=False))
    )
    app = build_app(source)
    async with app.run_test(size=(keys.FOOTER_WIDTH, 24)) as pilot:
        await app.settle()
        app._failed = RunFailed("a failure")  # e joins the footer
        app.refresh_bindings()
        await pilot.pause()
        footer_keys = list(app.screen.query(FooterKey))
        labels = {str(k.key_display) for k in footer_keys}
        assert "e" in labels and "?" in labels
        regions = sorted((key.region for key in footer_keys), key=lambda r: r.x)
        assert all(r.width > 0 and r.right <= keys.FOOTER_WIDTH for r in regions)
        assert all(a.right <= b.x for a, b in zip(regions, regions[1:], strict=False)), (
            regions
        )  # none over another
        assert app.screen.query_one(Footer).max_scroll_x == 0


@pytest.mark.parametrize("mode", ["replay", "live"])
async def test_the_footer_keeps_its_order_when_the_focus_moves(mode):
    """Tab to a panel (which binds the arrows itself) left the footer as it was:
    ``q Quit ? Help ...``, not ``←/→ Seek q Quit ...``; a live run's ``←/→ Panel``
    stays too (it vanished after Tab or ``d``, where a focused panel scrolled with
    the arrows: they now move between panels wherever the focus is)."""
    source = (
        replay(cpu_run(), end=True)
        if mode == "replay"
        else LiveSource(FakeLiveRun(cpu_run()[:40], finish=False))
    )
    app = build_app(source)
    async with app.run_test(size=(keys.FOOTER_WIDTH, 24)) as pilot:
        await app.settle()
        await pilot.pause()

        def footer() -> list[str]:
            shown = sorted(app.screen.query(FooterKey), key=lambda k: k.region.x)
            return [str(k.key_display) for k in shown]

        before = footer()
        assert before[:2] == ["q", "?"], before
        assert "←/→" in before
        for key in ("tab", "tab", "tab", "tab", "d", "tab", "d"):
            await pilot.press(key)
            await pilot.pause()
            assert footer() == before, (key, app.focused, footer())


async def test_the_arrows_move_between_a_live_runs_panels_wherever_the_focus_is():
    """The log and the summary scroll: focused, they took ← and → for themselves."""
    app = build_app(LiveSource(FakeLiveRun(cpu_run()[:40], finish=False)))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.settle()
        await pilot.pause()
        visited = []
        for _ in range(8):
            await pilot.press("right")
            await pilot.pause()
            visited.append(app.focused)
        names = {w.id for w in visited if w is not None}
        assert {"log", "advice"} <= names, names  # → went through them, and on
        at = app.focused
        await pilot.press("right", "left")
        await pilot.pause()
        assert app.focused is at


@pytest.mark.parametrize("mode", ["replay", "live"])
async def test_the_command_palette_keeps_the_keys_it_types_with(mode):
    """←/→ (a live run's panels, a replay's seek), space and +/- are priority keys:
    Textual tried them on the command palette too, whose cursor ← no longer moved."""
    source = (
        replay(cpu_run(), end=True)
        if mode == "replay"
        else LiveSource(FakeLiveRun(cpu_run()[:40], finish=False))
    )
    app = build_app(source)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.settle()
        await pilot.pause()
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press("a", "b", "c")
        await pilot.pause()
        palette = app.screen
        entry = palette.query_one(Input)
        await pilot.press("left")
        await pilot.pause()
        assert entry.cursor_position == 2
        await pilot.press("space", "plus", "minus", "right")
        await pilot.pause()
        assert app.screen is palette
        assert entry.value == "ab +-c" and entry.cursor_position == 6
        await pilot.press("escape")
        await pilot.pause()
        if mode == "live":  # on the dashboard again, the arrows move between panels
            at = app.focused
            await pilot.press("right")
            await pilot.pause()
            assert app.focused is not at


async def test_e_says_why_it_shows_nothing_on_a_run_that_did_not_fail():
    """`e` on a completed run did nothing and said nothing."""
    app = build_app(replay(cpu_run(), end=True))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.settle()
        await pilot.pause()
        app.clear_notifications()
        footer = {str(k.key_display) for k in app.screen.query(FooterKey)}
        assert "e" not in footer  # not offered where there is no error
        await pilot.press("e")
        await pilot.pause()
        assert not isinstance(app.screen, ErrorScreen)
        said = [n.message for n in app._notifications]
        assert said == ["No error to show: the run completed (e shows a failed run's error)."]

    from gpuscale.ui.synthetic import synthetic_run

    failed = build_app(LiveSource(FakeLiveRun(synthetic_run(fail=True))))
    async with failed.run_test(size=(80, 24)) as pilot:
        await failed.settle()
        await pilot.pause()
        await pilot.press("escape")  # the error screen, shown once by itself
        await pilot.pause()
        assert "e" in {str(k.key_display) for k in failed.screen.query(FooterKey)}
        await pilot.press("e")
        assert isinstance(failed.screen, ErrorScreen)


async def test_e_shows_a_failure_that_came_while_the_display_was_frozen():
    """Frozen (p) when the run failed, its failure waited for the thaw and `e` said
    "No error to show: the run failed": it shows the error, once."""
    from gpuscale.ui.synthetic import synthetic_run

    events = list(synthetic_run(fail=True))
    run = FakeLiveRun(events[:10], finish=False)
    app = build_app(LiveSource(run))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.settle()
        await pilot.press("p")
        await pilot.pause()
        for event in events[10:]:
            run.queue.put(event)
        run.queue.put(None)
        await app.settle()
        for _ in range(5):
            await pilot.pause()
        assert app.ended_while_frozen and app._failed is None
        app.clear_notifications()
        await pilot.press("e")
        await pilot.pause()
        assert isinstance(app.screen, ErrorScreen), [n.message for n in app._notifications]
        await pilot.press("escape")
        await pilot.press("p")  # the thaw: the failure is shown on the dashboard, not again
        await pilot.pause()
        assert app._failed is not None and not isinstance(app.screen, ErrorScreen)


async def test_e_on_a_killed_recording_says_what_the_toast_said():
    """A recording without an end event: the toast said the run was interrupted, then
    `e` said "the run ended without an error"."""
    from gpuscale.recording.reader import load_run

    killed = Path(__file__).parent.parent / "sample_runs" / "mnist-cnn_2xcpu_killed.ndjson"
    app = build_app(replay(list(load_run(killed).events), end=True))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.settle()
        await pilot.pause()
        toasts = [n.message for n in app._notifications]
        assert any("interrupted" in t for t in toasts), toasts
        app.clear_notifications()
        await pilot.press("e")
        await pilot.pause()
        said = [n.message for n in app._notifications]
        assert said == [
            "No error to show: the run was interrupted (no end event) and recorded no error "
            "(e shows a failed run's error)."
        ]


def test_help_and_readme_list_every_key():
    for replay_mode in (False, True):
        rows = keys.help_rows(replay_mode)
        assert {display for display, _ in rows} == {
            k.display for k in keys.KEYS if k.mode in ("both", "replay" if replay_mode else "live")
        }
    paragraph = README[README.index("Keys (the footer") :]
    paragraph = paragraph[: paragraph.index("\n\n")]
    missing = [k.display for k in keys.KEYS if f"`{k.display}`" not in paragraph]
    assert not missing, f"the README's keys paragraph lacks {missing}"


def test_the_scaling_view_binds_its_table_and_the_readme_lists_it():
    bound = {(b.key, b.action) for b in SweepApp.BINDINGS}
    assert bound == {(names, action) for key in keys.SWEEP_KEYS for names, action in key.bindings}
    assert {display for display, _ in keys.sweep_help_rows()} == {
        k.display for k in keys.SWEEP_KEYS
    }
    paragraph = README[README.index("Scaling view keys (") :]
    paragraph = paragraph[: paragraph.index("\n\n")]
    missing = [k.display for k in keys.SWEEP_KEYS if f"`{k.display}`" not in paragraph]
    assert not missing, f"the README's scaling view keys lack {missing}"


@pytest.mark.parametrize("app_class", [GpuscaleApp, SweepApp])
def test_the_help_lists_the_keys_textual_binds_itself(app_class):
    """Textual binds ctrl+q (quit) in every app: the table has it, so `?` lists it
    (it once did not, though the README said ctrl+q quits the scaling view)."""
    from textual.app import App

    table = keys.SWEEP_KEYS if app_class is SweepApp else keys.KEYS
    rows = keys.sweep_help_rows() if app_class is SweepApp else keys.help_rows(False)
    listed = {display for display, _ in rows}
    textual_own = {b.key for b in App.BINDINGS if not b.system}
    assert textual_own and textual_own <= listed
    bound = {(b.key, b.action) for b in app_class.BINDINGS}
    assert ("ctrl+q", "quit") in bound and ("ctrl+q", "quit") in {
        (names, action) for k in table for names, action in k.bindings
    }


async def test_ctrl_q_in_the_scaling_view_stops_a_live_sweep():
    """ctrl+q, as listed, stops the sweep's run in progress as q does."""
    stopped = []

    class Runner:
        view = None

        def stop(self):
            stopped.append(True)

    from gpuscale.ui.sweep_app import SweepView

    view = SweepView(points=[], heading="stand-in", planned=[1, 2], state="complete")
    app = SweepApp(view)
    async with app.run_test(size=(80, 24)) as pilot:
        app.runner = Runner()
        await pilot.press("ctrl+q")
        await pilot.pause()
    assert stopped


async def test_c_focuses_the_next_chart_at_120_columns():
    app = build_app(replay(cpu_run(), end=True))
    async with app.run_test(size=(120, 40)) as pilot:
        await app.settle()
        assert not app.screen.has_class("-narrow")
        await pilot.press("c")
        await pilot.pause()
        assert app.focused is app.charts[CHART_IDS[1]]
        await pilot.press("c")
        await pilot.pause()
        assert app.focused is app.charts[CHART_IDS[2]]
