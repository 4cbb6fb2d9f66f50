"""The README's screenshot of the scaling view is what the view draws now: it kept
the terminal's old solid ideal line (`── ideal`) after the chart drew it dashed."""

from __future__ import annotations

from readme_images import SCALING_VIEW_SVG, scaling_view_svg, screen_text


def test_the_readme_scaling_view_is_what_the_view_draws():
    shown = screen_text(SCALING_VIEW_SVG.read_text())
    legend = next(line for line in shown if "recommended: 8" in line)
    assert "╌╌ ideal" in legend and "── ideal" not in legend
    assert shown == screen_text(scaling_view_svg()), "python -m tests.readme_images"
