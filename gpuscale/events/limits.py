"""The plausible range of every number gpuscale takes from outside: flags,
recordings, sweep files. One place, so the CLI, the readers and the docs agree.

A value outside its range is refused at the edge with one line (exit 2), so the
arithmetic behind it (throughput = batch / step time, speedup, predictions)
never meets zero, infinity, NaN or a number too large for a float to hold.
``docs/recording-format.md`` and ``docs/sweep-format.md`` list these limits.
"""

from __future__ import annotations

MAX_DEVICES = 65_536
"""Most devices (replicas, across all workers) a run or a sweep point may have:
more than any TensorFlow job has run on (the largest pods have a few thousand
accelerators), and small enough that a list of device counts up to it is cheap."""


def cpu_devices_allowed(cores: int) -> int:
    """Most CPU logical devices gpuscale makes on a machine of ``cores`` CPU cores:
    one a core, and 2 at least (a 1-core machine still compares 1 with 2)."""
    return max(2, cores)


MAX_WORKERS = MAX_DEVICES
"""Most workers (machines): never more than devices."""

MAX_BATCH = 2**31 - 1
"""Largest batch size: TensorFlow holds batch dimensions as int32 on devices."""

MIN_SEED = 0
MAX_SEED = 2**31 - 1
"""``tf.random.set_seed`` and NumPy take seeds in this range."""

MIN_STEP_TIME_S = 1e-9
"""Shortest plausible training step (one nanosecond): anything shorter is a unit
mistake or damage, and dividing by it would overflow the throughput."""

MAX_STEP_TIME_S = 1e7
"""Longest plausible training step (about 115 days)."""

MAX_THROUGHPUT = 1e12
"""Most samples per second a sweep point may state."""

MIN_THROUGHPUT = 1e-6
"""Fewest samples per second (one sample in 11 days)."""

MAX_STEPS = 10**12
"""Most training steps a measurement may count."""

MAX_BYTES_S = 1e15
"""Fastest plausible link (1 PB/s per direction)."""

MAX_PAYLOAD_BYTES = 10**15
"""Largest gradient payload per step (1 PB)."""

MAX_TIMESTAMP_S = 253_402_300_799.0
"""Latest ``t`` (seconds since the Unix epoch) a date can be shown for: the last
second of the year 9999, Python's ``datetime`` limit."""
