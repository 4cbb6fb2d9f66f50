"""The dashboard with Pilot: keys, flows, the error screen, coalesced redraws."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from ui_fixtures import FakeClock, FakeLiveRun, cpu_run, gpu8_run, replay

from gpuscale.events.schema import EndEvent, GpuSample, HostSample, StartEvent
from gpuscale.ui.app import CHART_IDS, build_app
from gpuscale.ui.sources import LiveSource, QueueSource, ReplaySource
from gpuscale.ui.synthetic import synthetic_run, write_run
from gpuscale.ui.widgets.devices import DeviceCard, DeviceGrid
from gpuscale.ui.widgets.header import RunHeader
from gpuscale.ui.widgets.logpane import LogPane
from gpuscale.ui.widgets.screens import ErrorScreen, HelpScreen


def text_of(widget) -> str:
    return str(widget.render())


async def test_replay_keys_pause_seek_speed_end():
    clock = FakeClock()
    source = replay(cpu_run(), clock=clock)
    app = build_app(source)
    async with app.run_test(size=(80, 24)) as pilot:
        clock.now += 5
        await pilot.pause()
        await pilot.press("space")
        assert source.replay_status().paused
        position = source.position_s
        await pilot.press("right")
        assert source.position_s == pytest.approx(position + 10)
        await pilot.press("left", "left")
        assert source.position_s == pytest.approx(max(position - 10, 0))
        await pilot.press("plus")
        assert source.replay_status().speed == 2.0
        await pilot.press("minus", "minus")
        assert source.replay_status().speed == 0.5
        await pilot.press("end")
        await app.settle()
        assert source.finished and app.model.end is not None
        header = text_of(app.query_one(RunHeader))
        assert "COMPLETED" in header and "paused" in header
        await pilot.press("home")
        await app.settle()
        assert app.model.end is None, "back at the start, the end has not happened yet"


async def test_quit_stops_the_live_run():
    run = FakeLiveRun(cpu_run()[:40], finish=False)  # still running
    app = build_app(LiveSource(run))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.settle()
        assert run.started
        await pilot.press("q")
        await pilot.pause(0.2)
    assert run.stop_calls == 1
    assert app.return_value == 0


async def test_ctrl_q_also_stops_the_live_run():
    run = FakeLiveRun(cpu_run()[:40], finish=False)
    app = build_app(LiveSource(run))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("ctrl+q")
        await pilot.pause(0.2)
    assert run.stop_calls == 1


async def test_ctrl_c_stops_the_live_run_as_an_interruption():
    """Ctrl-C, as Textual reads it (a key, not SIGINT), stops the trainer and the app
    says so: watch prints the summary and exits 130 (run_until_stop_signal)."""
    run = FakeLiveRun(cpu_run()[:40], finish=False)
    app = build_app(LiveSource(run))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.settle()
        await pilot.press("ctrl+c")
        await pilot.pause(0.2)
    assert run.stop_calls == 1
    assert app.interrupted_by == "Ctrl-C"


class _ScriptLikeRun(FakeLiveRun):
    """A live script's run: stopped by hand it gets Ctrl-C first (``interrupt``)."""

    interrupt_grace_s = 10.0

    def __init__(self, events, **kwargs) -> None:
        super().__init__(events, **kwargs)
        self.interrupt_calls = 0

    def interrupt(self) -> None:
        self.interrupt_calls += 1
        self.queue.put(None)
        self._done.set()


@pytest.mark.parametrize("key", ["q", "ctrl+c", "ctrl+q"])
async def test_quitting_by_hand_passes_ctrl_c_on_to_a_live_script(key):
    """``q``, Ctrl-C and ``ctrl+q`` stop a live script as Ctrl-C stops it run alone
    (its ``except KeyboardInterrupt`` saves its work), not with SIGTERM."""
    run = _ScriptLikeRun(cpu_run()[:40], finish=False)
    app = build_app(LiveSource(run))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.settle()
        await pilot.press(key)
        await pilot.pause(0.2)
    assert (run.interrupt_calls, run.stop_calls) == (1, 0)


@pytest.mark.parametrize("name, by_hand", [("SIGTERM", False), ("SIGHUP", False), ("SIGINT", True)])
async def test_a_stop_signal_stops_a_live_script_as_the_signal_asks(name, by_hand):
    """SIGTERM, SIGHUP to gpuscale (run_until_stop_signal notes it, then quits the app):
    the script gets SIGTERM, as gpuscale is terminated; SIGINT is Ctrl-C, passed on."""
    run = _ScriptLikeRun(cpu_run()[:40], finish=False)
    app = build_app(LiveSource(run))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.settle()
        app.stop_signal = name
        app.action_quit_run()
        await pilot.pause(0.2)
    assert (run.interrupt_calls, run.stop_calls) == ((1, 0) if by_hand else (0, 1))


async def test_ctrl_c_after_the_run_ended_just_quits():
    """The run completed and its summary is on screen: Ctrl-C leaves, exit 0."""
    run = FakeLiveRun(cpu_run())
    app = build_app(LiveSource(run))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.settle()
        await pilot.pause()
        assert app.model.end is not None
        await pilot.press("ctrl+c")
        await pilot.pause(0.2)
    assert app.interrupted_by is None and app.return_value == 0


async def test_ctrl_c_just_quits_a_replay():
    app = build_app(replay(cpu_run(), end=True))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.settle()
        await pilot.press("ctrl+c")
        await pilot.pause(0.2)
    assert app.return_value == 0 and app.interrupted_by is None


async def test_the_header_shows_the_recording_once_renamed():
    """The recording is renamed when the run's own start arrives (live/base.py);
    the header follows it instead of keeping the provisional name."""
    events = cpu_run()
    run = FakeLiveRun(events[:5], finish=False)
    run.recording_path = Path("/runs/20260101_mnist-cnn_1xcpu.ndjson")
    source = LiveSource(run)
    app = build_app(source)
    async with app.run_test(size=(120, 30)) as pilot:
        await app.settle()
        assert "mnist-cnn_1xcpu" in source.info.label
        run.recording_path = Path("/runs/20260101_mnist-cnn-w32_2xcpu.ndjson")
        for event in events[5:10]:
            run.queue.put(event)
        await app.settle()
        await pilot.pause()
        assert source.info.label == "/runs/20260101_mnist-cnn-w32_2xcpu.ndjson"
        assert "mnist-cnn-w32_2xcpu" in str(app.header_panel.render())
        run.recording_path = None  # a run that ended before anything was written
        run.queue.put(None)
        await app.settle()
        await pilot.pause()
        assert source.info.label == "none (nothing was recorded)"


async def test_finished_run_stays_open_with_the_summary():
    app = build_app(LiveSource(FakeLiveRun(cpu_run())))
    async with app.run_test(size=(120, 40)) as pilot:
        await app.settle()
        await pilot.pause()
        assert app.is_running
        assert "COMPLETED" in text_of(app.query_one(RunHeader))
        assert app.query_one("#advice").border_title == "Final summary"
        body = text_of(app.query_one("#advice-body"))
        assert "step time" in body and "confidence" in body


async def test_failed_run_shows_the_error_screen():
    app = build_app(LiveSource(FakeLiveRun(synthetic_run(fail=True))))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.settle()
        await pilot.pause()
        assert isinstance(app.screen, ErrorScreen)
        message = text_of(app.screen.query_one("#error-message"))
        assert "ResourceExhaustedError" in message
        await pilot.press("escape")
        assert not isinstance(app.screen, ErrorScreen)
        assert "FAILED" in text_of(app.query_one(RunHeader))
        await pilot.press("e")
        assert isinstance(app.screen, ErrorScreen)


async def test_a_live_run_that_cannot_start_shows_why():
    class Broken(FakeLiveRun):
        def start(self):
            raise RuntimeError("cannot start the trainer process: no python")

    app = build_app(LiveSource(Broken([])))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.2)
        assert isinstance(app.screen, ErrorScreen)
        assert "no python" in text_of(app.screen.query_one("#error-message"))


async def test_damaged_recording_is_shown_with_a_warning(tmp_path):
    path = write_run(tmp_path / "cut.ndjson", cpu_run())
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 25])  # crash: last line cut, no end event
    app = build_app(ReplaySource(path, end=True))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.settle()
        await pilot.pause()
        log_text = "\n".join(str(line.text) for line in app.query_one(LogPane).lines)
        assert "cut.ndjson" in log_text
        assert app.model.last_step > 0
        assert app.is_running


async def test_help_screen_and_screenshot(tmp_path):
    app = build_app(replay(cpu_run(), end=True), screenshot_dir=tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.settle()
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("s")
        await pilot.pause()
    shots = list(tmp_path.glob("gpuscale_mnist-cnn_*.svg"))
    assert len(shots) == 1 and shots[0].read_text().startswith("<svg")


@pytest.mark.parametrize("height", [24, 16])
async def test_help_fits_or_scrolls_with_a_hint_and_speaks_of_replays_only(height):
    """80x24: every key and the closing hint shown (``ctrl+p`` and "escape or ?
    closes this" were cut off); shorter, the keys scroll and the hint says so. A
    replay's help says nothing of stopping a live run or its exit status."""
    from textual.containers import VerticalScroll
    from textual.widgets import Static

    app = build_app(replay(cpu_run(), end=True))
    async with app.run_test(size=(80, height)) as pilot:
        await app.settle()
        await pilot.press("question_mark")
        await pilot.pause()
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, HelpScreen)
        keys_view = screen.query_one("#help-keys", VerticalScroll)
        hint = screen.query_one("#help-hint", Static)
        assert hint.region.bottom <= height and hint.region.height == 1
        assert screen.query_one("#help-box").region.bottom <= height
        assert "escape or ? closes this" in str(hint.render())
        if height >= 24:
            assert keys_view.max_scroll_y == 0  # all of it, ctrl+p included
            assert "scroll" not in str(hint.render())
        else:
            assert keys_view.max_scroll_y > 0 and "↑/↓ scroll" in str(hint.render())
            await pilot.press("end")
            await pilot.pause()
            assert keys_view.scroll_y == keys_view.max_scroll_y
        text = str(keys_view.query_one(Static).render())
        assert "ctrl+p" in text and "live run" not in text and "130" not in text


async def test_live_help_speaks_of_stopping_the_run():
    app = build_app(LiveSource(FakeLiveRun(cpu_run()[:40], finish=False)))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.settle()
        await pilot.press("question_mark")
        await pilot.pause()
        text = str(app.screen.query_one("#help-keys").query_one("Static").render())
        assert "a live run is stopped cleanly first" in text and "130" in text
        assert "seek" not in text


async def test_toasts_do_not_pile_up(tmp_path):
    """The run's end, three charts and a screenshot: two toasts at most on screen,
    the newest chart's replacing the older ones, the oldest going first."""
    from textual.widgets._toast import Toast

    app = build_app(replay(cpu_run(), end=True), screenshot_dir=tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.settle()
        await pilot.pause()
        await pilot.press("c", "c", "c")
        await pilot.pause()
        await pilot.pause()
        texts = [f"{n.title} {n.message}" for n in app._notifications]
        assert len(texts) <= 2 and len(app.screen.query(Toast)) <= 2, texts
        charts = [t for t in texts if "Chart:" in t]
        assert len(charts) == 1 and app.charts[CHART_IDS[0]].border_title in charts[0]
        await pilot.press("s")
        await pilot.pause()
        await pilot.pause()
        texts = [f"{n.title} {n.message}" for n in app._notifications]
        assert len(texts) == 2 and "Screenshot" in texts[-1] and "Chart:" in texts[0], texts
        assert all(n.timeout <= 6 for n in app._notifications)


async def test_pause_display_freezes_the_screen_not_the_run():
    source = QueueSource()
    events = cpu_run()
    app = build_app(source)
    async with app.run_test(size=(80, 24)) as pilot:
        for event in events[:20]:
            source.put(event)
        await app.settle()
        await pilot.press("p")
        drawn = app.frames
        for event in events[20:]:
            source.put(event)
        await pilot.pause(0.35)
        assert app.frames == drawn, "no redraw while the display is frozen"
        assert app.model.end is not None, "events are still absorbed"
        assert "DISPLAY PAUSED" in text_of(app.query_one(RunHeader))
        await pilot.press("p")
        assert app.frames > drawn


async def test_cpu_run_cards_are_labelled_and_show_the_host():
    app = build_app(replay(cpu_run(), end=True))
    async with app.run_test(size=(120, 40)) as pilot:
        await app.settle()
        await pilot.pause()
        cards = list(app.query(DeviceCard))
        titles = [str(c.border_title) for c in cards]
        assert titles == ["host", "CPU:0 (logical)", "CPU:1 (logical)"]
        host = text_of(cards[0].query_one(".card-body"))
        assert "trainer CPU" in host and "RSS" in host


def screen_lines(app) -> list[str]:
    """The screen as plain text, one string per row."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


async def test_one_line_cards_at_80x24_do_not_run_into_each_other():
    app = build_app(replay(cpu_run(), end=True))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.settle()
        await pilot.pause()
        await app.settle()
        await pilot.pause()
        assert app.device_grid.compact
        host_row = next(line for line in screen_lines(app) if "trainer" in line)
        assert "CPU:0" in host_row  # two cards on the row, each starting with its mark
        assert host_row.count("▌") == 2 and "▌CPU:0" in host_row


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_the_host_card_shows_the_trainer_ended_not_a_zero(size):
    """The last host samples after the trainer exits measure no process (resident
    size 0, or none): the card says the trainer ended, not "RSS 0 B" or "n/a"."""
    events = cpu_run()
    end = events[-1]
    assert isinstance(end, EndEvent)
    gone = [
        HostSample(
            t=end.t - 0.2,
            cpu_pct=3.0,
            mem_used_bytes=10**9,
            mem_total_bytes=8 * 10**9,
            proc_cpu_pct=0.0,
            proc_rss_bytes=0,
        ),
        HostSample(t=end.t - 0.1, cpu_pct=3.0, mem_used_bytes=10**9, mem_total_bytes=8 * 10**9),
    ]
    for tail in (gone[:1], gone):
        app = build_app(replay([*events[:-1], *tail, end], end=True))
        async with app.run_test(size=size) as pilot:
            await app.settle()
            await pilot.pause()
            await app.settle()
            host = text_of(app.device_grid._cards[0].body)
            assert "trainer ended" in host, host
            assert "0 B" not in host and "n/a" not in host, host


async def test_gpu_cards_show_na_and_lost():
    start = synthetic_run(gpus=2, duration_s=3)[0]
    assert isinstance(start, StartEvent)
    source = QueueSource()
    app = build_app(source)
    async with app.run_test(size=(120, 40)) as pilot:
        source.put(start)
        source.put(GpuSample(t=start.t + 1, index=0, util_gpu_pct=50.0))
        source.put(GpuSample(t=start.t + 1, index=1, lost=True))
        await app.settle()
        await pilot.pause()
        cards = list(app.query(DeviceCard))
        gpu0 = text_of(cards[1].query_one(".card-body"))
        gpu1 = text_of(cards[2].query_one(".card-body"))
        assert "50%" in gpu0 and "n/a" in gpu0 and "GPM activity n/a" in gpu0
        assert "LOST" in gpu1


async def test_eight_gpus_condense_on_a_small_terminal():
    app = build_app(replay(gpu8_run(), end=True))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.settle()
        await pilot.pause()
        assert app.query_one(DeviceGrid).compact
    app = build_app(replay(gpu8_run(), end=True))
    async with app.run_test(size=(200, 50)) as pilot:
        await app.settle()
        await pilot.pause()
        assert not app.query_one(DeviceGrid).compact


async def test_redraws_are_coalesced_whatever_the_event_rate():
    source = QueueSource()
    events = gpu8_run()
    app = build_app(source)
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        frames_before = app.frames
        stop = threading.Event()

        def produce():
            for event in events:
                if stop.is_set():
                    return
                source.put(event)
                time.sleep(0.00005)

        producer = threading.Thread(target=produce)
        started = time.monotonic()
        producer.start()
        await pilot.pause(0.6)
        # on a loaded machine absorbing may lag: go on (counting the time) until
        # enough events are in, so the bound below is tested at a high event rate
        while app.model.events_absorbed <= 500 and time.monotonic() - started < 30:
            await pilot.pause(0.1)
        elapsed = time.monotonic() - started
        stop.set()
        producer.join()
        frames = app.frames - frames_before
        absorbed = app.model.events_absorbed
    assert absorbed > 500
    assert frames <= elapsed * app.refresh_hz + 3, (frames, absorbed)


async def test_theme_toggle_and_panels():
    app = build_app(replay(cpu_run(), end=True))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.settle()
        dark = app.current_theme.dark
        await pilot.press("t")
        assert app.current_theme.dark != dark
        await pilot.press("tab")
        first = app.focused
        await pilot.press("tab")
        assert app.focused is not None and app.focused is not first
        await pilot.press("c")
        shown = [c.id for c in app.query(".chart.-shown")]
        assert shown == ["chart-breakdown"]


async def test_debug_log_lines_are_hidden_until_asked_for():
    from gpuscale.events.schema import LogEvent

    events = cpu_run()
    t = events[0].t + 0.5
    events.insert(1, LogEvent(t=t, message="failed call to cuInit (harmless)", level="debug"))
    app = build_app(replay(events, end=True))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.settle()
        log = app.query_one(LogPane)

        def text() -> str:
            return "\n".join(str(line.text) for line in log.lines)

        assert "cuInit" not in text() and "1 debug line hidden" in str(log.border_subtitle)
        await pilot.press("d")
        await pilot.pause()
        assert "cuInit" in text()
        await pilot.press("d")
        await pilot.pause()
        assert "cuInit" not in text()


async def test_the_end_toast_gives_the_runs_recorded_duration_not_the_clock_since_launch(
    tmp_path,
):
    # the run's own start 2.5 s after the launch: the header's clock says 0:07, the
    # toast the run's 5.0 s (`gpuscale runs`', the log's), not "in 7.5 s"
    from test_run_duration_one import _trainer_recording

    from gpuscale.formatting import format_duration_s
    from gpuscale.recording.store import list_runs

    _trainer_recording(tmp_path / "run.ndjson")
    (listed,) = list_runs(tmp_path)
    app = build_app(ReplaySource(tmp_path / "run.ndjson", end=True))
    async with app.run_test(size=(100, 30)) as pilot:
        await app.settle()
        await pilot.pause()
        messages = [n.message for n in app._notifications if n.message.startswith("Run ")]
    assert listed.duration_s == pytest.approx(5.0)
    assert messages == [f"Run completed: 5 steps in {format_duration_s(listed.duration_s)}."]


async def test_a_finished_run_says_so_in_a_toast_and_a_cut_one_warns():
    app = build_app(replay(cpu_run(), end=True))
    async with app.run_test(size=(100, 30)) as pilot:
        await app.settle()
        await pilot.pause()
        messages = [n.message for n in app._notifications]
        assert any(m.startswith("Run completed: 144 steps in ") for m in messages), messages
    cut = [e for e in cpu_run() if not isinstance(e, EndEvent)]
    app = build_app(replay(cut, end=True))
    async with app.run_test(size=(100, 30)) as pilot:
        await app.settle()
        await pilot.pause()
        messages = [n.message for n in app._notifications]
        assert any(m.startswith("Run interrupted: 144 steps in ") for m in messages), messages
        assert "INTERRUPTED" in text_of(app.query_one(RunHeader)), "not RUNNING: it is over"
        assert app.advice_panel.border_title == "Summary (run interrupted)"
        said = [line for line in app.model.logs if "end event" in line.message]
        assert len(said) == 1, said  # once in the log, not once per layer
    # one line at 80x24, over the log's border as the completed run's (it was 3 lines
    # for 6 s, over the log's last lines): a toast is at most half the screen wide, less
    # its padding and border (tried in tmux: `replay sample_runs/*_killed.ndjson`)
    (warned,) = [m for m in messages if m.startswith("Run interrupted")]
    assert len(warned) <= 80 // 2 - 3, warned


async def test_one_duration_in_the_header_the_log_and_the_toast():
    """The run's duration is counted from its start event (start-up excluded)
    everywhere, whatever the producer put in EndEvent.duration_s."""
    events = cpu_run()
    end = events[-1]
    assert isinstance(end, EndEvent)
    end.duration_s = 47.5  # the trainer's own clock, start-up included
    app = build_app(replay(events, end=True))
    async with app.run_test(size=(100, 30)) as pilot:
        await app.settle()
        await pilot.pause()
        elapsed = end.t - events[0].t
        assert app.model.snapshot().elapsed_s == pytest.approx(elapsed)
        from gpuscale.formatting import format_clock_s, format_duration_s

        took = format_duration_s(elapsed)
        clock = format_clock_s(elapsed)  # a replay's one clock, at its end
        assert f"replay {clock}/{clock} 1x" in text_of(app.query_one(RunHeader))
        assert any(line.message.endswith(took) for line in app.model.logs)
        assert any(took in n.message for n in app._notifications)
        assert not any("47.5" in line.message for line in app.model.logs)


async def test_an_idle_replay_at_its_end_draws_nothing():
    """A replay at its final state has nothing new to show: the redraw timer
    draws nothing (it redrew the header ten times a second, ~11% of a core).
    Once the last batch, the end and the analysis are drawn (however long a busy
    machine takes), the next windows stay without a single draw."""
    app = build_app(replay(cpu_run(), end=True))
    async with app.run_test(size=(100, 30)) as pilot:
        await app.settle()
        drawn: list[str] = []
        draw_header, redraw = app._draw_header, app.redraw

        def counted_header(snap):
            drawn.append("header")
            draw_header(snap)

        def counted_redraw(force=False):
            drawn.append("redraw")
            redraw(force)

        app._draw_header, app.redraw = counted_header, counted_redraw
        deadline = time.monotonic() + 60
        while True:  # until a first quiet window
            before = len(drawn)
            await pilot.pause(0.3)
            if len(drawn) == before:
                break
            assert time.monotonic() < deadline, f"never idle: {drawn[-5:]}"
        for _ in range(3):
            before = len(drawn)
            await pilot.pause(0.3)
            assert len(drawn) == before, drawn[before:]


def test_warm_up_steps_plotted_alone_are_labelled_as_warm_up():
    """Before the first measured step the chart shows the warm-up steps (the
    panel says "no measured steps yet"): the axis says they are warm-up."""
    from gpuscale.events.schema import StepEvent
    from gpuscale.ui.model import RunModel
    from gpuscale.ui.widgets.charts import build_step_chart

    events = cpu_run()
    warm = [e for e in events if not isinstance(e, StepEvent) or e.warmup]
    model = RunModel()
    model.absorb([e for e in warm if not isinstance(e, EndEvent)])
    assert "warm-up, not measured" in build_step_chart(model.snapshot(), 80, 16).plain
    model.absorb([e for e in events if isinstance(e, StepEvent) and not e.warmup])
    assert "warm-up" not in build_step_chart(model.snapshot(), 80, 16).plain


async def test_screenshots_go_to_the_data_folder_and_the_toast_says_where(_isolated_data_dir):
    app = build_app(replay(cpu_run(), end=True))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.settle()
        await pilot.press("s")
        await pilot.pause()
        shots = list((_isolated_data_dir / "screenshots").glob("gpuscale_*.svg"))
        assert len(shots) == 1
        assert any(str(shots[0]) in n.message for n in app._notifications)


async def test_issue17_case9_a_line_of_8_mb_is_cut_for_display_and_q_still_quits():
    """A recording (or an old one) with a line of megabytes: the dashboard draws
    its first 2000 characters and a note, stays responsive, and quits on q."""
    from gpuscale.events.schema import LogEvent
    from gpuscale.ui.model import MAX_DISPLAY_LINE

    events = cpu_run()
    huge = LogEvent(t=events[3].t, message="z" * 8_000_000, source="script")
    events[4:4] = [huge]
    run = FakeLiveRun(events[:40], finish=False)
    app = build_app(LiveSource(run))
    began = time.monotonic()
    async with app.run_test(size=(100, 30)) as pilot:
        await app.settle()
        lines = [str(line.text) for line in app.query_one(LogPane).lines]
        assert any("more characters not shown" in line for line in lines)
        kept = [m.message for m in app.model.logs if m.message.startswith("zzz")]
        assert kept and len(kept[0]) < MAX_DISPLAY_LINE + 100
        await pilot.press("q")
        await pilot.pause(0.2)
    assert run.stop_calls == 1
    assert time.monotonic() - began < 60  # a hang guard: the uncut line took minutes


def test_issue17_a_provisional_start_is_superseded_in_the_model():
    """The run's own start replaces a provisional one: the header describes the
    real run, and the clock keeps its origin (first_t, the launch): the elapsed
    time counts from the provisional start, never back from the real one."""
    import msgspec

    from gpuscale.ui.model import RunModel

    events = cpu_run()
    real = events[0]
    provisional = msgspec.structs.replace(
        real, t=real.t - 10, provisional=True, model="train.py", num_replicas=1
    )
    model = RunModel()
    model.absorb([provisional, *events[1:5], real, *events[5:]])
    assert model.start.model == real.model and not model.start.provisional
    assert model.first_t == provisional.t  # same run, same clock
    assert model.snapshot().elapsed_s == pytest.approx(events[-1].t - provisional.t)


async def test_a_frozen_display_changes_nothing_until_p_again():
    """`p` while the run goes on and then ends: the panels, their titles and the
    notices wait (only the header's badge says the run ended); `p` again shows it
    all, the end's notice included."""
    events = cpu_run()
    run = FakeLiveRun(events[:40], finish=False)
    app = build_app(LiveSource(run))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.settle()
        await pilot.pause()
        await pilot.press("p")
        await pilot.pause()
        title = app.advice_panel.border_title
        steps = app.header_panel.render()
        for event in events[40:]:
            run.queue.put(event)
        run.queue.put(None)
        await app.workers.wait_for_complete()  # the pump has read the end
        for _ in range(5):
            await pilot.pause(0.1)
        assert app.model.end is not None  # the run did end, behind the frozen screen
        assert app.advice_panel.border_title == title != "Final summary"
        assert not app._notifications
        header = str(app.header_panel.render())
        assert "DISPLAY PAUSED (p): THE RUN ENDED" in header and "RUNNING" in header
        assert str(steps).splitlines()[1] == header.splitlines()[1]  # same step, same state
        await pilot.press("p")
        await pilot.pause()
        await app.settle()
        await pilot.pause()
        assert app.advice_panel.border_title == "Final summary"
        assert any("Run completed" in n.message for n in app._notifications)
        assert "COMPLETED" in str(app.header_panel.render())


async def test_a_script_waiting_for_its_start_is_named_and_says_why_nothing_shows():
    """Before a script's first sample (which comes with a provisional start) and its
    own start (its callback's first step, or gpuscale's made-up one after
    start_timeout_s): the header names the script and says when its output shows, and
    the host card waits for the first sample (telemetry flows from the launch)."""
    run = FakeLiveRun([], finish=False)
    run.name, run.start_timeout_s = "train.py", 15.0
    app = build_app(LiveSource(run))
    async with app.run_test(size=(120, 30)) as pilot:
        await app.settle()
        await pilot.pause()
        header = text_of(app.query_one(RunHeader))
        assert "train.py: starting" in header and "with its first step, or in 15 s" in header
        host = str(app.device_grid._cards[0].body.render())
        assert "host: waiting for the first sample" in host
        run.queue.put(None)


async def test_the_help_is_not_covered_by_toasts_at_80x24():
    """At 80x24 the toasts (a run's end, a screenshot's path) sat over the help box:
    while the help is open, no toast covers any of it."""
    from textual.widgets._toast import Toast

    app = build_app(replay(cpu_run(), end=True))
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await app.settle()
        for n in range(3):
            app.notify(f"a long notice number {n}, " * 4, timeout=60)
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen) and app.screen.query(Toast)
        box = app.screen.query_one("#help-box").region
        covered = {
            (x, y)
            for y in range(box.y, box.bottom)
            for x in range(box.x, box.right)
            if isinstance(app.screen.get_widget_at(x, y)[0], Toast)
        }
        assert not covered, f"{len(covered)} cells of the help under toasts"
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen.query(Toast), "the toasts come back with the dashboard"


async def test_a_one_device_run_leaves_the_step_chart_room_at_80x24():
    """Two full cards (the host and one device: a script's run on one device) took
    a third of 80x24 and left the step-time chart one row of plot: they condense
    there, and are full again where the screen has the room."""
    from gpuscale.ui.widgets.charts import PLOT_FRAME_ROWS, STEP_CHART

    events = synthetic_run(gpus=0, cpu_devices=1, duration_s=20.0)
    for size, compact in (((80, 24), True), ((80, 40), False)):
        app = build_app(replay(events, end=True))
        async with app.run_test(size=size) as pilot:
            await app.settle()
            await pilot.pause()
            await app.settle()
            await pilot.pause()
            assert app.device_grid.compact is compact, size
            chart = app.charts[STEP_CHART]
            assert chart.content_size.height - PLOT_FRAME_ROWS >= 4, size
            assert "┤" in str(chart.render())


class _AskedRun(FakeLiveRun):
    """A live run that begins as LiveRun does: its provisional start (what was
    asked) goes to the run base, and TensorFlow has not said anything yet."""

    def __init__(self, config: dict | None = None, platform: str = "gpu") -> None:
        super().__init__([], finish=False)
        self.record = None  # nothing written
        self.config = config or {}
        self.platform = platform

    def start(self) -> _AskedRun:
        super().start()
        asked = StartEvent(
            t=1.0,
            gpuscale_version="0",
            host="h",
            pid=1,
            provisional=True,
            model="mlp",
            strategy="mirrored",
            num_replicas=2,
            platform=self.platform,
            config=self.config,
        )
        self._begin_recording(asked, "mlp")
        return self


async def test_the_header_says_what_is_starting_before_the_run_does():
    run = _AskedRun()
    app = build_app(LiveSource(run))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.settle()
        await pilot.pause()
        header = text_of(app.query_one(RunHeader))
        assert "starting mlp on 2 GPUs (as asked)…" in header
        assert "waiting for the run to start" not in header
        await pilot.press("q")
        await pilot.pause(0.2)


@pytest.mark.parametrize(
    ("devices", "platform", "said"),
    [
        (None, "cpu-logical", "starting mlp on 2 CPU logical devices (the default)…"),
        (None, "gpu", "starting mlp on 2 GPUs (all GPUs found)…"),
        (2, "cpu-logical", "starting mlp on 2 CPU logical devices (as asked)…"),
    ],
)
async def test_the_header_says_as_asked_only_for_a_count_the_user_gave(devices, platform, said):
    """The run's options (the trainer's TrainConfig) leave ``devices`` at None
    where no --devices was given: the count is the default's, not "as asked"."""
    from gpuscale.trainer.options import TrainConfig

    config = {"devices": devices, "gpus": None, "model": "mlp", "strategy": "mirrored"}
    assert set(config) <= set(TrainConfig.__struct_fields__)
    app = build_app(LiveSource(_AskedRun(config, platform)))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.settle()
        await pilot.pause()
        assert said in text_of(app.query_one(RunHeader))
        await pilot.press("q")
        await pilot.pause(0.2)


TRIAL_RECORDING = Path("/tmp/trial9/data/runs/20261126-144038_train.py_2xcpu.ndjson")


def _header_lines(app) -> list[str]:
    return str(app.header_panel.render()).splitlines()


async def test_the_header_keeps_the_recordings_file_name_at_80_columns():
    """The trial at 80x24: "recording /tmp/trial9/data/runs/20261126-14…" cut the
    file name, the part that says which run; its folders go instead, and the whole
    path comes back on a wider screen."""
    run = FakeLiveRun(cpu_run()[:5], finish=False)
    run.recording_path = TRIAL_RECORDING
    app = build_app(LiveSource(run))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.settle()
        await pilot.pause()
        line = _header_lines(app)[1]
        # no room for the word too: the path's tail alone, the file name whole
        assert line.endswith(f"  …/runs/{TRIAL_RECORDING.name}"), line
        assert len(line) <= 78  # the header's padding leaves 78 cells
        await pilot.resize_terminal(160, 30)
        await pilot.pause()
        assert _header_lines(app)[1].endswith(f"recording {TRIAL_RECORDING}")


async def test_a_replayed_files_name_ends_the_header_however_narrow(tmp_path):
    folder = tmp_path / ("deep" * 10)
    folder.mkdir()
    path = write_run(folder / "20261126-144038_train.py_2xcpu.ndjson", cpu_run())
    app = build_app(ReplaySource(path, end=True))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.settle()
        await pilot.pause()
        line = _header_lines(app)[1]
        assert line.endswith("_2xcpu.ndjson") and "…" in line and len(line) <= 78, line


def test_path_tail_keeps_the_end():
    from gpuscale.ui.widgets.header import path_tail

    path = "/tmp/trial9/data/runs/20261126-144038_train.py_2xcpu.ndjson"
    assert path_tail(path, 100) == path
    assert path_tail(path, 45) == "…/runs/20261126-144038_train.py_2xcpu.ndjson"
    assert path_tail(path, 40) == "…/20261126-144038_train.py_2xcpu.ndjson"
    assert path_tail(path, 12) == "…xcpu.ndjson"  # the name's end, when it alone is too long


async def test_the_run_ended_toast_leaves_the_log_readable_at_80x24():
    """The trial: "Run ended" covered the log pane's last lines, which say the same,
    for 5 s. Now one line on the log's bottom border, for a few seconds."""
    from textual.widgets._toast import Toast

    app = build_app(LiveSource(FakeLiveRun(cpu_run())))
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await app.settle()
        await pilot.pause()
        await pilot.pause()
        (ended,) = [n for n in app._notifications if n.message.startswith("Run completed")]
        assert ended.timeout <= 3
        for _ in range(5):
            await pilot.pause(0.05)
        (toast,) = [t for t in app.screen.query(Toast) if "Run completed" in str(t.render())]
        assert toast.region.height == 1, toast.region
        assert not toast.region.overlaps(app.log_pane.content_region)
