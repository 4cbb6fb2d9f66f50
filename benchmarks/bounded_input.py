"""What the bounded readers cost at scale: a 1M-event recording and a sweep file
of 100k points, each read through the safe path (size capped before decoding,
depth checked, values range-checked), with time and peak memory.

* recording: the 8-GPU recording of :mod:`benchmarks.load` (one million events),
  read with ``load_run`` (every event kept) and streamed with ``iter_events``;
* sweep: 100,000 measured points (1,000 configurations x 100 device counts),
  read with ``read_sweep_file`` (bounded read, depth check, validation,
  normalization of every point).

Times are taken without tracemalloc (it slows every allocation several times);
peak memory is then the process's peak RSS growth for ``load_run`` (what a user
sees) and tracemalloc's peak for the streaming and sweep reads, in a second pass.
The last line is ``bounded input: ...`` with the figures.

Run: ``python benchmarks/bounded_input.py [--events N] [--points P]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load import generate  # noqa: E402 - the same recording as benchmarks/load.py

from gpuscale.analysis.sweep import read_sweep_file  # noqa: E402
from gpuscale.recording.reader import iter_events, load_run  # noqa: E402


def timed(fn):
    """(result, seconds) of ``fn()``."""
    gc.collect()
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def traced_peak(fn) -> int:
    """tracemalloc's peak bytes while ``fn()`` runs (a separate, slower pass)."""
    gc.collect()
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def write_sweep(path: Path, n_points: int) -> None:
    counts = 100
    points = [
        {
            "devices": 1 + i % counts,
            "config": f"config {i // counts}",
            "step_time_s": 0.1 * (1 + 0.01 * (i % counts)),
            "steps": 50,
        }
        for i in range(n_points)
    ]
    doc = {
        "format": "gpuscale-sweep",
        "version": 1,
        "defaults": {"scaling": "weak", "per_replica_batch": 64},
        "points": points,
    }
    path.write_text(json.dumps(doc))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--points", type=int, default=100_000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="gpuscale-bench-") as tmp:
        recording = Path(tmp) / "bench.ndjson"
        n_events, _ = generate(recording, args.events)
        size_mb = recording.stat().st_size / 1e6
        count, stream_s = timed(lambda: sum(1 for _ in iter_events(recording)))
        assert count == n_events
        stream_peak = traced_peak(lambda: sum(1 for _ in iter_events(recording)))
        rss_before = peak_rss_bytes()
        run, load_s = timed(lambda: load_run(recording))
        load_peak = peak_rss_bytes() - rss_before
        assert len(run.events) == n_events
        del run
        print(
            f"recording: {n_events} events, {size_mb:.0f} MB: load_run {load_s:.1f} s, "
            f"peak RSS +{load_peak / 1e6:.0f} MB; iter_events {stream_s:.1f} s, "
            f"peak {stream_peak / 1e6:.1f} MB"
        )
        sweep_path = Path(tmp) / "sweep.json"
        write_sweep(sweep_path, args.points)
        sweep_mb = sweep_path.stat().st_size / 1e6
        sweep, sweep_s = timed(lambda: read_sweep_file(sweep_path))
        assert len(sweep.points) == args.points
        sweep_peak = traced_peak(lambda: read_sweep_file(sweep_path))
        print(
            f"sweep: {args.points} points, {sweep_mb:.1f} MB: read_sweep_file {sweep_s:.1f} s, "
            f"peak {sweep_peak / 1e6:.0f} MB"
        )
    print(
        f"bounded input: {n_events / 1e6:g}M events load in {load_s:.1f} s "
        f"(peak RSS +{load_peak / 1e6:.0f} MB, {load_peak / (size_mb * 1e6):.1f}x the text), "
        f"streamed in {stream_s:.1f} s (peak {stream_peak / 1e6:.1f} MB); "
        f"{args.points / 1e3:g}k sweep points read in {sweep_s:.1f} s "
        f"(peak {sweep_peak / 1e6:.0f} MB, {sweep_peak / (sweep_mb * 1e6):.1f}x the file)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
