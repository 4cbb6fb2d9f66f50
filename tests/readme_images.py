"""The README's screenshot of the scaling view (docs/images/scaling-view-seed002.svg):
``replay sample_runs/seed002_mnist.json`` at 120x40, saved as the app's own ``s``
saves it. Regenerate it with ``python -m tests.readme_images``;
tests/test_readme_images.py checks that the file still shows what the view draws."""

from __future__ import annotations

import asyncio
import html
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCALING_VIEW_SVG = ROOT / "docs" / "images" / "scaling-view-seed002.svg"
SEED002 = ROOT / "sample_runs" / "seed002_mnist.json"
SIZE = (120, 40)
CELL_WIDTH = 12.2
"""A cell's width in Textual's SVG (its x coordinates)."""


async def _scaling_view_svg() -> str:
    # plotext sizes its charts no taller than the terminal it thinks it is in (the
    # process's, 24 rows off a terminal): the screenshot's own, as `s` in a real one
    before = {name: os.environ.get(name) for name in ("COLUMNS", "LINES")}
    os.environ["COLUMNS"], os.environ["LINES"] = map(str, SIZE)
    try:
        return await _screenshot()
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


async def _screenshot() -> str:
    from gpuscale.analysis.sweep import load_inputs
    from gpuscale.commands.replay import _sweep_view
    from gpuscale.ui.sweep_app import SweepApp

    view = _sweep_view([SEED002], sweep=load_inputs([str(SEED002)]))
    app = SweepApp(view)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        app.clear_notifications()
        await pilot.pause()
        return app.export_screenshot()


def screen_text(svg: str) -> list[str]:
    """The screen's rows as text, from a Textual SVG screenshot (its styles and ids
    left out)."""
    rows: dict[float, list[tuple[float, str]]] = {}
    for x, y, text in re.findall(
        r'<text class="[^"]*" x="([\d.]+)" y="([\d.]+)"[^>]*>(.*?)</text>', svg
    ):
        rows.setdefault(float(y), []).append((float(x), html.unescape(text).replace("\xa0", " ")))
    lines = []
    for y in sorted(rows):
        line = ""
        for x, text in sorted(rows[y]):
            line = line.ljust(round(x / CELL_WIDTH)) + text
        lines.append(line.rstrip())
    return lines


def scaling_view_svg() -> str:
    """The SVG of the scaling view of seed 002, as the README shows it."""
    return asyncio.run(_scaling_view_svg())


if __name__ == "__main__":
    SCALING_VIEW_SVG.write_text(scaling_view_svg())
    print(f"wrote {SCALING_VIEW_SVG}")
