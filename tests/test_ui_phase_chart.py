"""The phase chart agrees with the summary's text: a probe whose phases add up to
more than the median step is not drawn (never a bar longer than the step), and a
phase the text calls not resolved is drawn grey with a legend that says so."""

from __future__ import annotations

import dataclasses

import msgspec
from ui_fixtures import cpu_run, replay

from gpuscale.analysis.phase_report import parts_note, phase_items
from gpuscale.events.schema import PhaseEvent
from gpuscale.ui.app import build_app
from gpuscale.ui.widgets.charts import BREAKDOWN_CHART, build_breakdown_chart


def _y_ticks(chart_text: str) -> list[float]:
    return [
        float(line.split("┤")[0].replace(",", ""))
        for line in chart_text.splitlines()
        if "┤" in line
    ]


def _with_probes(stretch: dict[int, float]) -> list:
    """cpu_run() with the n-th probe's compute multiplied by ``stretch[n]``."""
    events, n = [], 0
    for event in cpu_run():
        if isinstance(event, PhaseEvent):
            factor = stretch.get(n)
            n += 1
            if factor is not None:
                event = msgspec.structs.replace(event, compute_s=event.compute_s * factor)
        events.append(event)
    return events


async def _final(events, size=(200, 50)):
    app = build_app(replay(events, end=True))
    async with app.run_test(size=size) as pilot:
        await app.settle()
        await pilot.pause()
        await app.settle()
        shown = str(app.charts[BREAKDOWN_CHART].render())
        return app, app.model.snapshot(), app.model.summary()[1], shown


async def test_a_probe_longer_than_the_median_step_is_not_drawn():
    """One probe of 3x the step (a pass timed while the machine was busy): the other
    probes are drawn, the axis says one is not, and no bar reaches past the step."""
    app, snap, summary, shown = await _final(_with_probes({5: 3.0}))
    step_ms = summary.step_time_s * 1000
    assert "1 longer than the median step: not drawn" in shown, shown
    ticks = _y_ticks(shown)
    assert ticks and max(ticks) < 1.5 * step_ms, (ticks, step_ms)
    for width in (30, 40, 44):  # a narrow panel (recommend --watch at 120x40): said shorter
        narrow = build_breakdown_chart(snap, width, 16, summary).plain
        assert "1 > median step: not drawn" in narrow, (width, narrow)
    whole = build_breakdown_chart(snap, 60, 16)  # without the summary: everything drawn
    assert max(_y_ticks(whole.plain)) >= 2 * step_ms


async def test_phases_that_do_not_add_up_to_the_step_draw_no_bar():
    """Every probe's phases add up to about twice the median step: the text says the
    breakdown is not resolved, and the chart draws no bar but says why."""
    app, snap, summary, shown = await _final(_with_probes({n: 2.2 for n in range(100)}))
    assert summary.phase_consistent is False
    assert all("not resolved" in item.value for item in phase_items(summary)[:3])
    # the summary's own reason, in its words (parts_note: every view says the same)
    said = " ".join(shown.split())
    assert parts_note(summary).split(":")[0] in said and "no bar drawn" in said, shown
    assert "┤" not in shown


async def test_a_phase_the_text_calls_not_resolved_is_grey_and_labelled():
    """An exposed all-reduce within its noise: "not resolved" in the summary, and in
    the chart's legend; its segments lose the all-reduce colour."""
    events, n = [], 0
    for event in cpu_run():
        if isinstance(event, PhaseEvent):
            noise = 0.004 if n % 3 == 0 else 0.0
            n += 1
            event = msgspec.structs.replace(event, allreduce_s=noise)
        events.append(event)
    app, snap, summary, shown = await _final(events)
    exposed = next(i for i in phase_items(summary) if i.label == "exposed all-reduce")
    assert "not resolved" in exposed.value, exposed
    chart = build_breakdown_chart(snap, 60, 16, summary)
    assert "all-reduce: not resolved" in chart.plain
    assert "compute: not resolved" not in chart.plain
    red = [span for span in chart.spans if "red" in str(span.style)]
    assert not red, "no segment in the all-reduce colour"


async def test_phases_short_of_the_step_are_drawn_grey_as_not_resolved():
    """Every probe's phases add up to well under the median step (a probe at an
    unusual step): the text says not resolved, and the bars are grey under one
    legend entry that says so (the input wait, timed apart, keeps its own)."""
    app, snap, summary, shown = await _final(_with_probes({n: 0.3 for n in range(100)}))
    assert summary.phase_consistent is False
    chart = build_breakdown_chart(snap, 60, 16, summary)
    assert "phases not resolved (see the summary)" in chart.plain
    assert "compute" not in chart.plain and "input" in chart.plain
    assert not [span for span in chart.spans if "green" in str(span.style)]


async def test_the_callbacks_unmeasured_input_wait_is_said_so_in_the_legend():
    """The Keras callback's probe cannot see the input wait: the legend says "input:
    not measured" (no bar of it), as the summary's text does, never a plain "input"."""
    events = [
        msgspec.structs.replace(e, method="callback-probe", input_s=0.0)
        if isinstance(e, PhaseEvent)
        else e
        for e in cpu_run()
    ]
    app, snap, summary, shown = await _final(events)
    assert summary.input_s is None
    assert "input: not measured" in " ".join(shown.split()), shown
    measured = build_breakdown_chart(snap, 80, 16, msgspec.structs.replace(summary, input_s=0.0))
    assert "not measured" not in measured.plain


def _one_probe(events: list) -> list:
    """``events`` with their first probe only."""
    first = next(e for e in events if isinstance(e, PhaseEvent))
    return [e for e in events if not isinstance(e, PhaseEvent) or e is first]


async def test_one_probe_is_so_far_only_while_the_run_goes_on():
    """A run that ended with one probe said `probed step (one probe so far)`: no
    other probe will come."""
    from ui_fixtures import FakeLiveRun

    from gpuscale.events.schema import EndEvent
    from gpuscale.ui.sources import LiveSource

    events = _one_probe(cpu_run())
    app, snap, summary, shown = await _final(events)
    assert snap.end is not None and len(snap.phases) == 1
    assert "probed step (one probe)" in shown and "so far" not in shown, shown

    going = [e for e in events if not isinstance(e, EndEvent)]
    app = build_app(LiveSource(FakeLiveRun(going, finish=False)))
    async with app.run_test(size=(200, 50)) as pilot:
        await app.settle()
        await pilot.pause()
        await app.settle()
        assert app.model.end is None
        assert "probed step (one probe so far)" in str(app.charts[BREAKDOWN_CHART].render())


async def test_recent_probes_too_long_do_not_call_a_resolved_breakdown_unresolved():
    """The chart shows the last few probes; were they all longer than the median step
    while the run's phases (the medians of all its probes) split it, the chart said
    "phases not resolved" beside a panel with "apply 2.4 ± 0.3 ms" (a trial's find)."""
    total = sum(isinstance(e, PhaseEvent) for e in cpu_run())
    app, snap, summary, shown = await _final(_with_probes({total - 1: 3.0, total - 2: 3.0}))
    assert not any("not resolved" in item.value for item in phase_items(summary)[:3])
    narrow = build_breakdown_chart(snap, 12, 16, summary).plain  # the last 4 probes
    assert len(snap.phases[-4:]) == 4
    recent = build_breakdown_chart(
        dataclasses.replace(snap, phases=snap.phases[-2:]), 12, 16, summary
    ).plain
    said = " ".join(recent.split())
    assert "no bar drawn" in said and "not resolved" not in said, recent
    assert f"medians of all {summary.phase_steps} probes" in said, recent
    assert "┤" in narrow  # older probes among those shown are drawn
