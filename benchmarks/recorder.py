"""What recording costs a run, and what a killed gpuscale loses.

1. **Throughput.** A script printing ``--lines`` lines (100k by default) as fast
   as it can, run under :class:`gpuscale.live.script_run.ScriptRun` with
   recording off and on (alternated ``--rounds`` times, so drifting machine load
   hits both alike), its events drained by a consumer as the CLI does. For each:
   the wall time from start to the run's end and the events per second. Lines
   dropped because the script printed faster than gpuscale records (see
   ``docs/recording-format.md``) are counted and reported: a cost that hides in
   drops would not be a fair number.
2. **Loss window.** ``gpuscale run --record`` of a script printing its own
   ``time.time()`` every 10 ms, killed with SIGKILL after a second or two
   (``--kills`` times): the loss is the kill time minus the time of the last
   line on disk (the script prints until the kill; the kernel kills it with
   gpuscale). The promise is at most ``FLUSH_INTERVAL_S`` (0.2 s) plus
   scheduling delay.

Prints one line per measurement, then ``loss window: max X s``, the best-of-N
wall ratio and the median ratio of gpuscale's own CPU time (steadier on a busy
machine), and as its last line ``recording cost: X%`` = median wall time on /
off - 1 (goal under 10%).

Run: ``python benchmarks/recorder.py [--lines N] [--rounds R] [--kills K]``.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PRINTER = (
    "import sys\n"
    "out = sys.stdout\n"
    "for i in range({n}):\n"
    "    out.write(f'line {{i}} of the benchmark, about as long as a Keras progress line\\n')\n"
    "out.flush()\n"
)
TICKER = (
    "import time\nwhile True:\n    print(repr(time.time()), flush=True)\n    time.sleep(0.01)\n"
)


def one_run(lines: int, record: Path | None) -> tuple[float, float, int, int]:
    """``(wall seconds, CPU seconds of this process, events seen by the consumer,
    output lines dropped)``. The CPU time is gpuscale's own (the script is
    another process): steadier than wall time on a busy machine."""
    from gpuscale.events.schema import LogEvent
    from gpuscale.live.script_run import ScriptRun

    run = ScriptRun(
        [sys.executable, "-c", PRINTER.format(n=lines)],
        record=record,
        start_timeout_s=0.0,
        sampler=False,
    )
    began = time.perf_counter()
    cpu_began = time.process_time()
    run.start()
    seen = 0
    dropped = 0
    for event in run.events():
        seen += 1
        if isinstance(event, LogEvent) and event.source == "gpuscale":
            words = event.message.split()
            if words[:1] == ["dropped"] and words[1].isdigit():
                dropped += int(words[1])
    return time.perf_counter() - began, time.process_time() - cpu_began, seen, dropped


def loss_window(folder: Path, index: int) -> float:
    """Seconds between a SIGKILL of ``gpuscale run`` and its last line on disk."""
    from gpuscale.events.schema import LogEvent
    from gpuscale.recording.reader import load_run

    path = folder / f"killed-{index}.ndjson"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuscale", "run", "--record", str(path), "--"]
        + [sys.executable, "-c", TICKER],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not (path.exists() and path.stat().st_size > 4000):
        if time.monotonic() > deadline:
            proc.kill()
            raise SystemExit("gpuscale run did not start recording within 60 s")
        time.sleep(0.05)
    time.sleep(1.0 + 0.37 * index)  # kill at different points of the flush cycle
    killed_at = time.time()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    run = load_run(path)
    times = [
        float(e.message)
        for e in run.events
        if isinstance(e, LogEvent) and e.source == "script" and e.message[:1].isdigit()
    ]
    return killed_at - max(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kills", type=int, default=5)
    args = parser.parse_args()
    off: list[float] = []
    on: list[float] = []
    cpu: dict[str, list[float]] = {"off": [], "on": []}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for r in range(args.rounds):
            for label, record in (("off", None), ("on", folder / f"run-{r}.ndjson")):
                wall, cpu_s, seen, dropped = one_run(args.lines, record)
                (off if record is None else on).append(wall)
                cpu[label].append(cpu_s)
                size = f", {record.stat().st_size / 1e6:.1f} MB" if record else ""
                print(
                    f"recording {label:3}: {args.lines} lines in {wall:6.2f} s = "
                    f"{args.lines / wall:9.0f} lines/s, gpuscale CPU {cpu_s:5.2f} s "
                    f"({seen} events seen, {dropped} dropped{size})",
                    flush=True,
                )
        losses = []
        for k in range(args.kills):
            loss = loss_window(folder, k)
            losses.append(loss)
            print(f"kill -9 #{k + 1}: last event on disk {loss:.3f} s before the kill", flush=True)
    print(f"loss window: max {max(losses):.3f} s, median {statistics.median(losses):.3f} s")
    cost = statistics.median(on) / statistics.median(off) - 1
    cpu_cost = statistics.median(cpu["on"]) / statistics.median(cpu["off"]) - 1
    best = min(on) / min(off) - 1
    print(
        f"best of {args.rounds}: {best * 100:+.1f}% wall; "
        f"median CPU of the gpuscale process: {cpu_cost * 100:+.1f}%"
    )
    print(
        f"recording cost: {cost * 100:+.1f}% (median {statistics.median(on):.2f} s on, "
        f"{statistics.median(off):.2f} s off)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
