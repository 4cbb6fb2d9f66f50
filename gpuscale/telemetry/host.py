"""Host samples with psutil: CPU, memory, and the run's own processes.

CPU percentages are computed here from CPU-time counters between two samples
(not with ``psutil.cpu_percent``, whose module-level state other callers in the
same process would reset):

* ``cpu_pct``: busy share of all cores over the last period, 0-100
  (busy = total CPU time minus idle and iowait);
* ``proc_cpu_pct``: user + system CPU time of the run's processes over the last
  period, in percent of one core (200 = two cores busy);
* ``mem_used_bytes``: total minus available memory (what the OS cannot hand out
  without swapping), ``proc_rss_bytes``: resident memory of the run's processes.

A host sample needs 50 ms since the previous one (or since the sampler was
made): the kernel's CPU counters tick every 10 ms. At 10 Hz the CPU figures
therefore have a resolution of a few percent.

A process seen for the first time has no previous counter, so it adds to
``proc_cpu_pct`` from its second sample on; a process that died or cannot be
read is dropped without a word (the run's PID list may be stale).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import psutil

from gpuscale.events.schema import HostSample

PidsFn = Callable[[], Iterable[int]]

MIN_WINDOW_S = 0.05
"""A host sample needs at least this much time since the previous one."""


def _busy_and_total(times: object) -> tuple[float, float]:
    fields = getattr(times, "_fields", ())
    total = sum(getattr(times, name) for name in fields if name not in ("guest", "guest_nice"))
    idle = getattr(times, "idle", 0.0) + getattr(times, "iowait", 0.0)
    return total - idle, total


class HostSampler:
    """Samples the host and the processes ``pids()`` names; never raises from :meth:`sample`.

    ``clock`` (seconds, monotonic) times the windows the CPU shares are taken
    over; tests give one they move by hand, so that what they check does not
    depend on how fast a busy machine runs them."""

    def __init__(
        self,
        pids: PidsFn | None = None,
        *,
        worker: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._pids = pids
        self._worker = worker
        self._clock = clock
        self._cpu_prev = _busy_and_total(psutil.cpu_times())
        self._cpu_prev_at = clock()
        self._procs: dict[int, psutil.Process] = {}
        self._proc_prev: dict[int, tuple[float, float]] = {}
        """PID -> (CPU seconds, monotonic time) at the previous sample."""
        self.problems: list[str] = []

    def _system_cpu_pct(self) -> float | None:
        """Busy share of all cores since the previous call; ``None`` when that was
        less than :data:`MIN_WINDOW_S` ago (CPU counters tick every 10 ms, so a
        shorter window would read 0 or 100)."""
        now = self._clock()
        if now - self._cpu_prev_at < MIN_WINDOW_S:
            return None
        busy, total = _busy_and_total(psutil.cpu_times())
        prev_busy, prev_total = self._cpu_prev
        self._cpu_prev = (busy, total)
        self._cpu_prev_at = now
        d_total = total - prev_total
        if d_total <= 0:
            return 0.0
        return max(0.0, min(100.0, 100.0 * (busy - prev_busy) / d_total))

    def run_pids(self) -> list[int]:
        """The run's PIDs now (``[]`` when no callable was given or it failed)."""
        if self._pids is None:
            return []
        try:
            return sorted({int(pid) for pid in self._pids()})
        except Exception as exc:  # the caller's callable must not stop the sampler
            self._note(f"the run's PID list is unavailable ({exc})")
            return []

    def _note(self, message: str) -> None:
        if message not in self.problems:
            self.problems.append(message)

    def _processes(self, pids: list[int]) -> tuple[float | None, int | None]:
        if not pids:
            return None, None
        now = self._clock()
        cpu_pct = 0.0
        rss = 0
        measured_cpu = False
        alive = False
        for pid in pids:
            proc = self._procs.get(pid)
            try:
                if proc is None:
                    proc = psutil.Process(pid)
                    self._procs[pid] = proc
                with proc.oneshot():
                    cpu = proc.cpu_times()
                    mem = proc.memory_info()
            except (psutil.Error, OSError):
                self._procs.pop(pid, None)
                self._proc_prev.pop(pid, None)
                continue
            alive = True
            rss += mem.rss
            seconds = cpu.user + cpu.system
            prev = self._proc_prev.get(pid)
            self._proc_prev[pid] = (seconds, now)
            if prev is not None and now > prev[1]:
                cpu_pct += 100.0 * max(0.0, seconds - prev[0]) / (now - prev[1])
                measured_cpu = True
        for pid in list(self._procs):
            if pid not in pids:
                self._procs.pop(pid, None)
                self._proc_prev.pop(pid, None)
        if not alive:
            return None, None
        return (cpu_pct if measured_cpu else None), rss

    def sample(self, t: float | None = None) -> HostSample | None:
        """One :class:`HostSample` stamped ``t`` (default ``time.time()``); ``None``
        when the previous sample was less than :data:`MIN_WINDOW_S` ago (the first
        call right after construction) or psutil itself fails."""
        try:
            cpu_pct = self._system_cpu_pct()
            if cpu_pct is None:
                return None
            vm = psutil.virtual_memory()
            proc_cpu, proc_rss = self._processes(self.run_pids())
        except Exception as exc:
            self._note(f"host sampling failed ({exc})")
            return None
        return HostSample(
            t=time.time() if t is None else t,
            worker=self._worker,
            cpu_pct=round(cpu_pct, 2),
            mem_used_bytes=int(vm.total - vm.available),
            mem_total_bytes=int(vm.total),
            proc_cpu_pct=None if proc_cpu is None else round(proc_cpu, 2),
            proc_rss_bytes=proc_rss,
        )
