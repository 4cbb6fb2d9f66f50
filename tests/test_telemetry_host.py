"""Host samples with real psutil: the machine, the run's processes, dead PIDs."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil

from gpuscale.telemetry.host import MIN_WINDOW_S, HostSampler

MY_PID = os.getpid()


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_machine_fields_are_sane():
    sampler = HostSampler()
    assert sampler.sample() is None  # no window to measure CPU over yet: no sample
    time.sleep(MIN_WINDOW_S)
    sample = sampler.sample(t=123.0)
    assert sample.t == 123.0
    assert 0.0 <= sample.cpu_pct <= 100.0
    vm = psutil.virtual_memory()
    assert sample.mem_total_bytes == vm.total
    assert 0 < sample.mem_used_bytes <= vm.total
    assert sample.proc_cpu_pct is None and sample.proc_rss_bytes is None  # no run PIDs


class HandClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _cpu_s(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def test_busy_child_cpu_is_counted_from_the_second_sample():
    """The run's CPU share is its CPU seconds over the window: checked against
    the child's own CPU seconds read around each sample, over a window of the
    test's clock, so that a busy machine (which gives the child less CPU) cannot
    fail it (it once read 9.97% where 25% was expected)."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import time\nend = time.time() + 60\nwhile time.time() < end: pass"]
    )
    try:
        clock = HandClock()
        sampler = HostSampler(lambda: [child.pid], clock=clock)
        clock.now += 1.0
        before_low = _cpu_s(child.pid)
        first = sampler.sample()
        before_high = _cpu_s(child.pid)
        assert first.proc_cpu_pct is None  # no previous counter yet: unknown, not 0
        assert first.proc_rss_bytes > 0
        deadline = time.monotonic() + 60
        while _cpu_s(child.pid) < before_high + 0.05:  # the child spins: its CPU time grows
            assert time.monotonic() < deadline, "the child never ran"
            time.sleep(0.02)
        clock.now += 2.0
        after_low = _cpu_s(child.pid)
        second = sampler.sample()
        after_high = _cpu_s(child.pid)
        low = 100.0 * (after_low - before_high) / 2.0
        high = 100.0 * (after_high - before_low) / 2.0
        assert low - 0.5 <= second.proc_cpu_pct <= high + 0.5  # (percent rounded to 0.01)
        assert second.proc_cpu_pct > 0.0
        assert 0.0 <= second.cpu_pct <= 100.0
    finally:
        child.kill()
        child.wait()


def test_dead_pids_are_dropped():
    gone = dead_pid()
    sampler = HostSampler(lambda: [MY_PID, gone])
    time.sleep(MIN_WINDOW_S)
    a = sampler.sample()
    time.sleep(MIN_WINDOW_S)
    b = sampler.sample()
    own_rss = psutil.Process(MY_PID).memory_info().rss
    assert abs(b.proc_rss_bytes - own_rss) < 64 * 1024**2
    assert a.proc_rss_bytes > 0 and b.proc_cpu_pct is not None


def test_all_pids_dead_is_unknown():
    sampler = HostSampler(lambda: [dead_pid()])
    time.sleep(MIN_WINDOW_S)
    sample = sampler.sample()
    assert sample.proc_cpu_pct is None and sample.proc_rss_bytes is None


def test_a_process_that_dies_between_samples():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    sampler = HostSampler(lambda: [MY_PID, child.pid])
    time.sleep(MIN_WINDOW_S)
    with_child = sampler.sample().proc_rss_bytes
    child.kill()
    child.wait()
    time.sleep(MIN_WINDOW_S)
    after = sampler.sample()
    assert after.proc_rss_bytes < with_child
    assert after.proc_cpu_pct is not None  # our own process still counts


def test_pids_callable_that_raises():
    def pids():
        raise RuntimeError("no trainer yet")

    sampler = HostSampler(pids)
    time.sleep(MIN_WINDOW_S)
    sample = sampler.sample()
    assert sample is not None and sample.proc_rss_bytes is None
    assert any("no trainer yet" in p for p in sampler.problems)
