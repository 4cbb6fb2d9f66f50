"""Dashboard throughput: a recorded-style stream of 8 GPUs sampled at 10 Hz plus
steps, pushed through the app headless (``App.run_test``) as fast as it goes.

Two measurements in one run, side by side with the stream's real-time rate:

1. absorption: every event of the stream handed to the app at once (an in-memory
   source); the app's reader thread folds them into the model while its 10 Hz
   redraw timer and chart threads run as in real use. Reported as events per
   second and as a multiple of the real-time event rate.
2. frames: the same stream replayed 100 ms of run time per frame; each frame is
   the redraw from the model (all panels) plus Textual's layout and compositor
   render of what changed (``Screen._on_timer_update``, called directly so the
   frame is timed alone). Charts are built off the UI thread and timed apart.

Usage: python benchmarks/ui.py [--seconds 300] [--size 200x50]
Last line: ``ui: N events/s, frame M ms``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpuscale.ui.app import build_app  # noqa: E402
from gpuscale.ui.sources import QueueSource  # noqa: E402
from gpuscale.ui.synthetic import synthetic_run  # noqa: E402


async def absorb_all(events: list, size: tuple[int, int]) -> tuple[float, int]:
    """Seconds to absorb every event with the dashboard live; redraws meanwhile."""
    source = QueueSource("benchmark")
    app = build_app(source)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        frames_before = app.frames
        started = time.perf_counter()
        for event in events:
            source.put(event)
        while app.model.events_absorbed < len(events):
            await asyncio.sleep(0.002)
        elapsed = time.perf_counter() - started
        return elapsed, app.frames - frames_before


async def frame_times(events: list, size: tuple[int, int]) -> tuple[list[float], list[float]]:
    """Per-frame seconds (redraw + compositor) at 100 ms of run per frame, and
    chart build seconds (done off the UI thread in real use)."""
    source = QueueSource("benchmark")
    app = build_app(source, refresh_hz=0.001)  # frames driven by hand below
    frames: list[float] = []
    charts: list[float] = []
    t0 = events[0].t
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        index = 0
        frame_end = t0
        while index < len(events):
            frame_end += 0.1
            chunk = []
            while index < len(events) and events[index].t <= frame_end:
                chunk.append(events[index])
                index += 1
            app.model.absorb(chunk)
            started = time.perf_counter()
            app.redraw()
            app.screen._on_timer_update()  # layout + compositor render of the changes
            frames.append(time.perf_counter() - started)
            if len(frames) % 5 == 0:  # charts: at most every 0.5 s in the app
                started = time.perf_counter()
                app.compute_charts(app._chart_sizes())
                charts.append(time.perf_counter() - started)
            if len(frames) % 50 == 0:
                await pilot.pause()  # let queued messages (mounts, resizes) run
    return frames, charts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=300.0, help="run time of the stream")
    parser.add_argument("--size", default="200x50", help="terminal size WxH")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.lower().split("x"))
    events = synthetic_run(
        gpus=8, duration_s=args.seconds, sample_hz=10.0, steps_per_s=20.0, phase_every=10
    )
    run_s = events[-1].t - events[0].t
    realtime_rate = len(events) / run_s
    kinds: dict[str, int] = {}
    for event in events:
        kinds[type(event).__name__] = kinds.get(type(event).__name__, 0) + 1
    print(
        f"stream: {len(events)} events over {run_s:.0f} s of run "
        f"({realtime_rate:.0f} events/s in real time): "
        + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    )
    elapsed, redraws = asyncio.run(absorb_all(events, (width, height)))
    rate = len(events) / elapsed
    print(
        f"absorb: {len(events)} events in {elapsed:.2f} s with the dashboard live "
        f"({redraws} redraws meanwhile) = {rate:,.0f} events/s = "
        f"{rate / realtime_rate:.0f}x real time (goal >= 20x)"
    )
    all_frames, charts = asyncio.run(frame_times(events, (width, height)))
    first, frames = all_frames[0], all_frames[1:]  # the first frame mounts the device cards
    mean_ms = statistics.mean(frames) * 1000
    p95_ms = statistics.quantiles(frames, n=20)[-1] * 1000
    print(
        f"frames: {len(frames)} at {width}x{height}, mean {mean_ms:.1f} ms, p95 {p95_ms:.1f} ms, "
        f"max {max(frames) * 1000:.1f} ms (goal < 16 ms); first frame (mounts the cards) "
        f"{first * 1000:.0f} ms; charts, built off the UI thread every 0.5 s: "
        f"mean {statistics.mean(charts) * 1000:.1f} ms for all visible charts"
    )
    print(f"ui: {rate:.0f} events/s, frame {mean_ms:.1f} ms")


if __name__ == "__main__":
    main()
