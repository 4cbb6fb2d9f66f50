"""The sampler: per-GPU NVML samples and host samples, in a background thread.

``Sampler(emit, ...)`` calls ``emit(event)`` from its own thread with
:class:`GpuSample` (one per GPU per period), :class:`HostSample` (one per
period, always, also without a GPU) and :class:`LogEvent` (``source="telemetry"``:
the NVML status line at start, a lost GPU, a container PID mismatch).
Every event carries ``t = time.time()``, the clock the trainer's events use, so
the streams merge.

How each GPU field is measured (all through the choke point in
:mod:`gpuscale.telemetry.nvml`; ``None`` = not supported / not available):

* ``util_gpu_pct``, ``util_mem_pct``: ``nvmlDeviceGetUtilizationRates``, the
  share of NVML's own sample period (1/6 s to 1 s, by GPU) in which a kernel ran
  / device memory was read or written. Sampling faster than that repeats values.
* ``mem_used_bytes``/``mem_total_bytes``: ``nvmlDeviceGetMemoryInfo``.
* ``power_w``/``power_limit_w``: ``nvmlDeviceGetPowerUsage`` and
  ``nvmlDeviceGetEnforcedPowerLimit`` (milliwatts / 1000).
* ``temp_c``, ``sm_clock_mhz``, ``mem_clock_mhz``: temperature and current clocks.
* ``throttle_reasons``: ``nvmlDeviceGetCurrentClocksEventReasons`` decoded to
  names (``[]``: nothing holds the clocks back).
* ``pcie_rx_bytes_s``/``pcie_tx_bytes_s``: ``nvmlDeviceGetPcieThroughput``
  (KiB/s over NVML's 20 ms window, times 1024). Each call blocks about 20 ms, so
  these run in a second thread and every sample carries the latest value.
* ``nvlink_rx_bytes_s``/``nvlink_tx_bytes_s``: the per-link counters
  ``NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX/TX`` (KiB, data without protocol
  overhead) summed over the active links, differenced between two samples and
  divided by the time between NVML's own timestamps. The first sample has none.
* ``gpm_*`` (Hopper and newer): NVML GPM metrics between two GPM samples one
  period apart: SM utilization, any-tensor-core utilization, DRAM bandwidth
  utilization, percent.
* ``proc_mem_bytes``: GPU memory of the run's PIDs from
  ``nvmlDeviceGetComputeRunningProcesses``. If processes are listed but none of
  the run's PIDs appears on any GPU (a container where NVML reports host PIDs),
  it is ``None`` and one LogEvent says why; it is never guessed.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from gpuscale.errors import GpuscaleError
from gpuscale.events.schema import DeviceInfo, Event, GpuSample, HostSample, LogEvent, Topology
from gpuscale.telemetry.host import HostSampler
from gpuscale.telemetry.nvml import (
    GpuLostError,
    Nvml,
    NvmlProbe,
    active_nvlinks,
    field_value,
    open_nvml,
    throttle_names,
)
from gpuscale.telemetry.topology import topology_of

DEFAULT_INTERVAL_S = 0.5
MIN_INTERVAL_S = 0.1
MAX_INTERVAL_S = 60.0
INTERVAL_HELP = (
    "seconds between telemetry samples (default 0.5 = 2 Hz; at least 0.1 = 10 Hz). "
    "NVML's GPU utilization is itself an average over the driver's sample period "
    "(1/6 s to 1 s, by GPU), so sampling faster does not sharpen it."
)

_KIB = 1024
# GPM metric ids (NVML ABI), read from the bindings when they have them.
_GPM_METRICS = (
    ("NVML_GPM_METRIC_SM_UTIL", 2, "gpm_sm_activity_pct"),
    ("NVML_GPM_METRIC_ANY_TENSOR_UTIL", 5, "gpm_tensor_activity_pct"),
    ("NVML_GPM_METRIC_DRAM_BW_UTIL", 10, "gpm_dram_bw_pct"),
)


def validate_interval(interval_s: float) -> float:
    """``interval_s`` as a float, or a :class:`GpuscaleError` saying the allowed range."""
    try:
        value = float(interval_s)
    except (TypeError, ValueError):
        raise GpuscaleError(
            f"sample interval must be a number of seconds, not {interval_s!r}"
        ) from None
    if not (MIN_INTERVAL_S <= value <= MAX_INTERVAL_S):
        raise GpuscaleError(
            f"sample interval {value:g} s is outside {MIN_INTERVAL_S:g}-{MAX_INTERVAL_S:g} s "
            f"(10 Hz at most; NVML utilization averages over 1/6-1 s anyway)"
        )
    return value


class _Gpu:
    """What the sampler keeps per GPU between samples."""

    def __init__(self, info: DeviceInfo, handle: Any):
        self.info = info
        self.index = info.index
        self.handle = handle
        self.lost = False
        self.links: list[int] = []
        self.nvlink_fields: list[tuple[int, int]] = []
        self.nvlink_prev: tuple[int, int, float] | None = None
        """(tx KiB, rx KiB, seconds) of the previous NVLink read."""
        self.gpm_samples: list[Any] = []
        self.gpm_primed = False
        self.pcie_supported = True


class Sampler:
    """Samples the GPUs NVML sees and the host, every ``interval_s`` seconds, in a thread.

    ``emit`` is called from the sampler's thread. ``pids`` returns the run's PIDs
    (may include dead ones). ``gpu_indices`` limits sampling to those NVML
    indices. ``nvml`` replaces the ``pynvml`` module (tests). Neither the
    constructor (after validation) nor the thread raises; problems become
    LogEvents.
    """

    def __init__(
        self,
        emit: Callable[[Event], Any],
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        pids: Callable[[], Iterable[int]] | None = None,
        gpu_indices: Iterable[int] | None = None,
        worker: int = 0,
        nvml: Any = None,
    ):
        self.interval_s = validate_interval(interval_s)
        self._emit = emit
        self._pids = pids
        self._gpu_indices = None if gpu_indices is None else sorted(set(gpu_indices))
        self._worker = worker
        self._nvml_module = nvml
        self._lib: Nvml | None = None
        self._gpus: list[_Gpu] = []
        self._host = HostSampler(pids, worker=worker)
        self._pcie: dict[int, tuple[float | None, float | None]] = {}
        self._lost_pending: set[int] = set()
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._threads: list[threading.Thread] = []
        self._started = False
        self._stopped = False
        self._said: set[str] = set()
        self._status_event: LogEvent | None = None
        self.status = "not started"
        """One line: what NVML sees, or why there are only host samples."""
        self.probe: NvmlProbe | None = None
        self.devices: list[DeviceInfo] = []
        """The GPUs being sampled (after ``gpu_indices``)."""
        self.topology: Topology | None = None
        """How all the GPUs NVML sees are connected (read once, by :meth:`open`)."""
        self.tick_starts: deque[float] = deque(maxlen=1000)
        """Monotonic start time of recent samples (to check the period holds)."""
        self.overruns = 0
        """Periods that took longer than ``interval_s`` (the next one starts at once)."""
        self.emit_errors = 0

    # -- life cycle -------------------------------------------------------

    def open(self) -> None:
        """Start NVML and set ``status``/``devices`` without starting the threads."""
        if self.probe is not None:
            return
        lib, probe = open_nvml(self._nvml_module)
        self.probe = probe
        self.status = probe.status
        if lib is None:
            return
        if not probe.ok:
            lib.close()
            return
        self._lib = lib
        self.topology = topology_of(lib, {d.index: d.name for d in probe.devices})
        wanted = self._gpu_indices
        failed: list[int] = []
        for info in probe.devices:
            if wanted is not None and info.index not in wanted:
                continue
            try:
                handle = lib.query("nvmlDeviceGetHandleByIndex", info.index)
                if handle is None:
                    failed.append(info.index)
                    continue
                gpu = _Gpu(info, handle)
                self._prepare(gpu)
            except GpuLostError:
                failed.append(info.index)
                continue
            self._gpus.append(gpu)
        self.devices = [g.info for g in self._gpus]
        if failed:
            self.status += f"; GPU {', '.join(map(str, failed))} lost while starting"
        if wanted is not None:
            missing = sorted(set(wanted) - {d.index for d in probe.devices})
            if missing:
                self.status += (
                    f"; asked for GPU {', '.join(map(str, missing))}, which NVML does not see"
                )
            if not self._gpus:
                self.status += ": host samples only"

    def _prepare(self, gpu: _Gpu) -> None:
        lib = self._lib
        assert lib is not None
        gpu.links = active_nvlinks(lib, gpu.handle)
        tx = lib.constant("NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX")
        rx = lib.constant("NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX")
        if gpu.links and tx is not None and rx is not None:
            gpu.nvlink_fields = [(tx, link) for link in gpu.links] + [
                (rx, link) for link in gpu.links
            ]
        support = lib.query("nvmlGpmQueryDeviceSupport", gpu.handle)
        if support is not None and getattr(support, "isSupportedDevice", 0) and not gpu.info.mig:
            samples = [lib.query("nvmlGpmSampleAlloc") for _ in range(2)]
            if all(s is not None for s in samples):
                gpu.gpm_samples = samples
            else:
                for sample in samples:
                    if sample is not None:
                        lib.query("nvmlGpmSampleFree", sample)

    def start(self) -> None:
        """Start NVML (``status`` and ``devices`` are set on return) and the threads."""
        if self._started:
            return
        self._started = True
        self.open()
        level = "info"
        if self.probe is not None and self.probe.reason in (
            "driver-not-loaded",
            "version-mismatch",
            "no-permission",
            "error",
        ):
            level = "warning"
        self._status_event = LogEvent(
            t=time.time(), worker=self._worker, message=self.status, source="telemetry", level=level
        )
        main = threading.Thread(target=self._run, name="gpuscale-sampler", daemon=True)
        self._threads.append(main)
        if self._gpus:
            slow = threading.Thread(
                target=self._run_pcie, name="gpuscale-sampler-pcie", daemon=True
            )
            self._threads.append(slow)
        for thread in self._threads:
            thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the threads (joins them) and shut NVML down. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self._stop_event.set()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout_s)
        self._close_nvml()

    def _close_nvml(self) -> None:
        lib = self._lib
        if lib is None:
            return
        self._lib = None
        for gpu in self._gpus:
            for sample in gpu.gpm_samples:
                try:
                    lib.query("nvmlGpmSampleFree", sample)
                except GpuLostError:
                    pass
            gpu.gpm_samples = []
        lib.close()

    def __enter__(self) -> Sampler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- threads ----------------------------------------------------------

    def _run(self) -> None:
        if self._status_event is not None:  # emitted from this thread, like every event
            self._send(self._status_event)
        next_at = time.monotonic()
        while not self._stop_event.is_set():
            start = time.monotonic()
            self.tick_starts.append(start)
            try:
                events = self.sample_once()
            except Exception as exc:  # a bug must not kill the thread
                events = [self._once(f"telemetry sample failed: {exc!r}", "warning")]
            for event in events:
                if event is not None:
                    self._send(event)
            next_at += self.interval_s
            now = time.monotonic()
            if next_at <= now:
                self.overruns += 1
                next_at = now
            self._stop_event.wait(next_at - now)

    def _run_pcie(self) -> None:
        """PCIe throughput blocks ~20 ms per call: refresh it here, apart from the samples."""
        while not self._stop_event.is_set():
            started = time.monotonic()
            try:
                self.refresh_pcie()
            except Exception:  # never let this thread die with a traceback
                pass
            spent = time.monotonic() - started
            self._stop_event.wait(max(0.0, self.interval_s - spent))

    def refresh_pcie(self) -> None:
        """Read PCIe rx/tx of every GPU once (blocking); the next samples carry the values."""
        lib = self._lib
        if lib is None:
            return
        rx_counter = lib.constant("NVML_PCIE_UTIL_RX_BYTES", 1)
        tx_counter = lib.constant("NVML_PCIE_UTIL_TX_BYTES", 0)
        for gpu in list(self._gpus):
            if gpu.lost or not gpu.pcie_supported or self._stop_event.is_set():
                continue
            try:
                rx = lib.query("nvmlDeviceGetPcieThroughput", gpu.handle, rx_counter)
                tx = lib.query("nvmlDeviceGetPcieThroughput", gpu.handle, tx_counter)
            except GpuLostError:
                with self._lock:
                    self._lost_pending.add(gpu.index)
                continue
            if rx is None and tx is None:
                gpu.pcie_supported = False  # not supported: stop asking every period
            with self._lock:
                self._pcie[gpu.index] = (
                    None if rx is None else float(rx) * _KIB,
                    None if tx is None else float(tx) * _KIB,
                )

    def _send(self, event: Event) -> None:
        try:
            self._emit(event)
        except Exception:
            self.emit_errors += 1

    def _once(self, message: str, level: str = "info") -> LogEvent | None:
        """A telemetry LogEvent, only the first time this message comes up."""
        if message in self._said:
            return None
        self._said.add(message)
        return LogEvent(
            t=time.time(), worker=self._worker, message=message, source="telemetry", level=level
        )

    # -- one sample -------------------------------------------------------

    def sample_once(self, t: float | None = None) -> list[Event]:
        """One period's events: a HostSample, then a GpuSample per GPU, plus any notices.

        Called by the thread; public so tests and benchmarks can drive it. Never raises.
        """
        t = time.time() if t is None else t
        events: list[Any] = []
        host: HostSample | None = self._host.sample(t)
        if host is not None:
            events.append(host)
        for problem in self._host.problems:
            events.append(self._once(problem, "warning"))
        lib = self._lib
        if lib is None or not self._gpus:
            return [e for e in events if e is not None]
        run_pids = set(self._host.run_pids()) if self._pids is not None else set()
        with self._lock:
            lost_now = set(self._lost_pending)
            self._lost_pending.clear()
        rows: list[tuple[_Gpu, dict[str, Any], list[Any] | None]] = []
        lost: dict[int, list[Any]] = {}
        for gpu in self._gpus:
            if gpu.lost:
                continue
            if gpu.index in lost_now:
                lost[gpu.index] = self._mark_lost(gpu, t)
                continue
            try:
                fields, procs = self._sample_gpu(lib, gpu)
            except GpuLostError:
                lost[gpu.index] = self._mark_lost(gpu, t)
                continue
            rows.append((gpu, fields, procs))
        proc_mem, notice = self._proc_memory(rows, run_pids)
        samples: dict[int, list[Any]] = dict(lost)
        for gpu, fields, _ in rows:
            samples[gpu.index] = [
                GpuSample(
                    t=t,
                    worker=self._worker,
                    index=gpu.index,
                    proc_mem_bytes=proc_mem.get(gpu.index),
                    **fields,
                )
            ]
        for index in sorted(samples):
            events.extend(samples[index])
        events.append(notice)
        return [e for e in events if e is not None]

    def _mark_lost(self, gpu: _Gpu, t: float) -> list[Any]:
        gpu.lost = True
        return [
            GpuSample(t=t, worker=self._worker, index=gpu.index, lost=True),
            LogEvent(
                t=t,
                worker=self._worker,
                source="telemetry",
                level="warning",
                message=(
                    f"GPU {gpu.index} ({gpu.info.name}) is lost (NVML: GPU is lost, it fell "
                    "off the bus): no more samples from it; the other GPUs are still sampled"
                ),
            ),
        ]

    def _sample_gpu(self, lib: Nvml, gpu: _Gpu) -> tuple[dict[str, Any], list[Any] | None]:
        h = gpu.handle
        util = lib.query("nvmlDeviceGetUtilizationRates", h)
        memory = lib.query("nvmlDeviceGetMemoryInfo", h)
        power_mw = lib.query("nvmlDeviceGetPowerUsage", h)
        limit_mw = lib.query("nvmlDeviceGetEnforcedPowerLimit", h)
        temp = lib.query("nvmlDeviceGetTemperature", h, lib.constant("NVML_TEMPERATURE_GPU", 0))
        sm_clock = lib.query("nvmlDeviceGetClockInfo", h, lib.constant("NVML_CLOCK_SM", 1))
        mem_clock = lib.query("nvmlDeviceGetClockInfo", h, lib.constant("NVML_CLOCK_MEM", 2))
        reasons = lib.query_first(
            ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"),
            h,
        )
        with self._lock:
            pcie_rx, pcie_tx = self._pcie.get(gpu.index, (None, None))
        nvlink_rx, nvlink_tx = self._nvlink_rates(lib, gpu)
        fields: dict[str, Any] = {
            "util_gpu_pct": _num(getattr(util, "gpu", None)),
            "util_mem_pct": _num(getattr(util, "memory", None)),
            "mem_used_bytes": _int(getattr(memory, "used", None)),
            "mem_total_bytes": _int(getattr(memory, "total", None)),
            "power_w": None if power_mw is None else power_mw / 1000.0,
            "power_limit_w": None if limit_mw is None else limit_mw / 1000.0,
            "temp_c": _num(temp),
            "sm_clock_mhz": _num(sm_clock),
            "mem_clock_mhz": _num(mem_clock),
            "throttle_reasons": throttle_names(reasons),
            "pcie_rx_bytes_s": pcie_rx,
            "pcie_tx_bytes_s": pcie_tx,
            "nvlink_rx_bytes_s": nvlink_rx,
            "nvlink_tx_bytes_s": nvlink_tx,
        }
        fields.update(self._gpm(lib, gpu))
        procs = None
        if self._pids is not None:
            procs = lib.query_first(
                (
                    "nvmlDeviceGetComputeRunningProcesses",
                    "nvmlDeviceGetComputeRunningProcesses_v3",
                    "nvmlDeviceGetComputeRunningProcesses_v2",
                ),
                h,
            )
        return fields, procs

    def _nvlink_rates(self, lib: Nvml, gpu: _Gpu) -> tuple[float | None, float | None]:
        """NVLink (rx, tx) bytes/s from the counter deltas since the previous sample."""
        if not gpu.nvlink_fields:
            return None, None
        values = lib.query("nvmlDeviceGetFieldValues", gpu.handle, gpu.nvlink_fields)
        if values is None:
            gpu.nvlink_prev = None
            return None, None
        n = len(gpu.links)
        tx_kib = rx_kib = 0
        stamp_us = 0
        for i, value in enumerate(values):
            number = field_value(value)
            if number is None:
                gpu.nvlink_prev = None
                return None, None
            counter = int(number)
            if i < n:
                tx_kib += counter
            else:
                rx_kib += counter
            stamp_us = max(stamp_us, int(getattr(value, "timestamp", 0) or 0))
        now_s = stamp_us / 1e6 if stamp_us > 0 else time.monotonic()
        prev = gpu.nvlink_prev
        gpu.nvlink_prev = (tx_kib, rx_kib, now_s)
        if prev is None:
            return None, None
        d_t = now_s - prev[2]
        d_tx = tx_kib - prev[0]
        d_rx = rx_kib - prev[1]
        if d_t <= 0 or d_tx < 0 or d_rx < 0:  # no time passed, or the counters were reset
            return None, None
        return d_rx * _KIB / d_t, d_tx * _KIB / d_t

    def _gpm(self, lib: Nvml, gpu: _Gpu) -> dict[str, float | None]:
        """GPM metrics between the previous GPM sample and one taken now (Hopper+)."""
        if not gpu.gpm_samples:
            return {}
        prev, cur = gpu.gpm_samples
        if lib.query("nvmlGpmSampleGet", gpu.handle, cur) is None:
            gpu.gpm_primed = False
            return {}
        gpu.gpm_samples = [cur, prev]
        if not gpu.gpm_primed:
            gpu.gpm_primed = True
            return {}
        struct_type = lib.constant("c_nvmlGpmMetricsGet_t")
        if struct_type is None:
            return {}
        try:
            request = struct_type()
            request.version = lib.constant("NVML_GPM_METRICS_GET_VERSION", 1)
            request.numMetrics = len(_GPM_METRICS)
            request.sample1 = prev
            request.sample2 = cur
            for i, (name, default_id, _) in enumerate(_GPM_METRICS):
                request.metrics[i].metricId = lib.constant(name, default_id)
        except Exception:
            return {}
        result = lib.query("nvmlGpmMetricsGet", request)
        if result is None:
            return {}
        out: dict[str, float | None] = {}
        for i, (_, _, field) in enumerate(_GPM_METRICS):
            metric = result.metrics[i]
            out[field] = (
                round(float(metric.value), 3) if getattr(metric, "nvmlReturn", 1) == 0 else None
            )
        return out

    def _proc_memory(
        self, rows: list[tuple[_Gpu, dict[str, Any], list[Any] | None]], run_pids: set[int]
    ) -> tuple[dict[int, int | None], LogEvent | None]:
        """Per GPU, the memory of the run's processes, or nothing (``None``) when unknowable.

        NVML's PIDs are trusted only if at least one of the run's PIDs shows up on
        some GPU; otherwise (processes listed, none of ours: a container seeing host
        PIDs; or nothing listed at all) every GPU gets ``None``.
        """
        if not run_pids:
            return {}, None
        matched_any = False
        listed_any = False
        for _, _, procs in rows:
            for proc in procs or ():
                listed_any = True
                if getattr(proc, "pid", None) in run_pids:
                    matched_any = True
        if not matched_any:
            notice = None
            if listed_any:
                notice = self._once(
                    "NVML lists GPU processes but none of the run's PIDs (a container "
                    "reporting host PIDs?): per-process GPU memory is n/a"
                )
            return {}, notice
        out: dict[int, int | None] = {}
        for gpu, _, procs in rows:
            if procs is None:
                continue
            total: int | None = 0
            for proc in procs:
                if getattr(proc, "pid", None) in run_pids:
                    used = getattr(proc, "usedGpuMemory", None)
                    if used is None or total is None:
                        total = None
                    else:
                        total += int(used)
            out[gpu.index] = total
        return out, None


def _num(value: Any) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _int(value: Any) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
