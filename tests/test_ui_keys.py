"""One source for keys: the app's bindings, the footer, the help screen and the
README all follow gpuscale/ui/keys.py; `c` does something visible on a wide screen."""

from __future__ import annotations

from pathlib import Path

from ui_fixtures import cpu_run, replay

from gpuscale.ui import keys
from gpuscale.ui.app import CHART_IDS, GpuscaleApp, build_app

README = (Path(__file__).parent.parent / "README.md").read_text()


def test_the_app_binds_exactly_the_table():
    bound = {(b.key, b.action) for b in GpuscaleApp.BINDINGS}
    table = {(names, action) for key in keys.KEYS for names, action in key.bindings}
    assert bound == table


def test_the_footer_shows_every_labelled_key():
    shown = {b.key_display for b in keys.bindings() if b.show}
    assert {"q", "?", "c", "p", "s", "d", "t"} <= shown
    assert shown == {k.display for k in keys.KEYS if k.label and k.bindings}


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
