"""The Sampler against the stand-in NVML: every scenario, every failure path, the period."""

from __future__ import annotations

import os
import statistics
import threading
import time

import pytest
from fake_nvml import FakeClock, FakeNvml, GiB

from gpuscale.errors import GpuscaleError
from gpuscale.events.schema import GpuSample, HostSample, LogEvent, decode, encode
from gpuscale.telemetry.host import MIN_WINDOW_S
from gpuscale.telemetry.sampler import INTERVAL_HELP, Sampler, validate_interval

MY_PID = os.getpid()


def opened(fake: FakeNvml, **kwargs) -> Sampler:
    sampler = Sampler(lambda e: None, nvml=fake, **kwargs)
    sampler.open()
    return sampler


def of(events, kind):
    return [e for e in events if isinstance(e, kind)]


def gpu_samples(events) -> dict[int, GpuSample]:
    return {e.index: e for e in of(events, GpuSample)}


def test_healthy_box_every_field():
    clock = FakeClock()
    fake = FakeNvml.h100_box(8, clock=clock)
    fake.gpus[0].processes = [(MY_PID, 5 * GiB), (12345678, 1 * GiB)]
    sampler = opened(fake, pids=lambda: [MY_PID])
    assert sampler.status == "NVML: 8 GPUs, driver 550.54.15, CUDA 12.4"
    assert len(sampler.devices) == 8

    first = sampler.sample_once(t=100.0)
    assert of(first, HostSample) == []  # right after start: no CPU window to measure yet
    samples = gpu_samples(first)
    assert sorted(samples) == list(range(8))
    g0 = samples[0]
    assert g0.t == 100.0 and g0.worker == 0
    assert g0.util_gpu_pct == 95.0 and g0.util_mem_pct == 41.0
    assert g0.mem_used_bytes == 20 * GiB and g0.mem_total_bytes == 80 * GiB
    assert g0.power_w == 612.0 and g0.power_limit_w == 700.0
    assert g0.temp_c == 60.0 and g0.sm_clock_mhz == 1980.0 and g0.mem_clock_mhz == 2619.0
    assert g0.throttle_reasons == ["sw_power_cap"]
    assert g0.proc_mem_bytes == 5 * GiB  # only the run's PID counts
    assert samples[1].proc_mem_bytes == 0  # PIDs match elsewhere: truly nothing here
    # Rates need two readings; PCIe comes from its own thread (not run yet).
    assert g0.nvlink_rx_bytes_s is None and g0.gpm_sm_activity_pct is None
    assert g0.pcie_rx_bytes_s is None

    sampler.refresh_pcie()
    clock.advance(0.5)
    time.sleep(MIN_WINDOW_S)
    second = sampler.sample_once(t=100.5)
    assert [e.t for e in of(second, HostSample)] == [100.5]
    g0 = gpu_samples(second)[0]
    assert g0.pcie_rx_bytes_s == 1_200_000 * 1024
    assert g0.pcie_tx_bytes_s == 300_000 * 1024
    assert g0.nvlink_tx_bytes_s == pytest.approx(18 * 2_000_000 * 1024, rel=1e-6)
    assert g0.nvlink_rx_bytes_s == pytest.approx(18 * 1_900_000 * 1024, rel=1e-6)
    assert g0.gpm_sm_activity_pct == 71.5
    assert g0.gpm_tensor_activity_pct == 38.25
    assert g0.gpm_dram_bw_pct == 55.0
    # Every event survives the schema's wire format.
    assert decode(encode(g0)) == g0
    sampler.stop()
    assert not fake.initialized


def test_nvlink_rate_follows_the_counters_and_survives_a_reset():
    clock = FakeClock()
    fake = FakeNvml.h100_box(1, clock=clock)
    sampler = opened(fake)
    sampler.sample_once()
    fake.gpus[0].nvlink_tx_kib_s_per_link = 1000.0
    fake.gpus[0].nvlink_active_links = 18
    clock.advance(0.25)
    # Counter = rate x clock: lowering the rate makes the counter drop (a reset).
    g = gpu_samples(sampler.sample_once())[0]
    assert g.nvlink_tx_bytes_s is None
    clock.advance(0.25)
    g = gpu_samples(sampler.sample_once())[0]
    assert g.nvlink_tx_bytes_s == pytest.approx(18 * 1000 * 1024, rel=1e-3)
    sampler.stop()


def test_no_time_between_reads_gives_no_rate():
    clock = FakeClock()
    sampler = opened(FakeNvml.h100_box(1, clock=clock))
    sampler.sample_once()
    assert gpu_samples(sampler.sample_once())[0].nvlink_rx_bytes_s is None
    sampler.stop()


def test_not_supported_fields_are_none_never_an_exception():
    fake = FakeNvml.not_supported()
    sampler = opened(fake, pids=lambda: [MY_PID])
    sampler.refresh_pcie()
    sampler.refresh_pcie()
    assert fake.calls["nvmlDeviceGetPcieThroughput"] == 2  # unsupported: asked once only
    sampler.sample_once()
    g = gpu_samples(sampler.sample_once())[0]
    assert g.util_gpu_pct is None and g.util_mem_pct is None
    assert g.power_w is None and g.power_limit_w is None
    assert g.pcie_rx_bytes_s is None and g.pcie_tx_bytes_s is None
    assert g.nvlink_rx_bytes_s is None and g.nvlink_tx_bytes_s is None
    assert g.gpm_sm_activity_pct is None
    assert g.proc_mem_bytes is None  # process list unsupported: unknown, not 0
    # What is supported is still there; the old driver's throttle function is used.
    assert g.temp_c == 63.0 and g.mem_used_bytes == 1 * GiB
    assert g.throttle_reasons == ["sw_power_cap"]
    sampler.stop()


@pytest.mark.parametrize(
    "scenario",
    ["no-driver", "library-missing", "version-mismatch", "no-permission", "no-gpus"],
)
def test_without_nvml_only_host_samples_and_one_status_line(scenario):
    events: list = []
    done = threading.Event()

    threads = set()

    def emit(event):
        threads.add(threading.current_thread().name)
        events.append(event)
        if len(of(events, HostSample)) >= 3:
            done.set()

    sampler = Sampler(emit, interval_s=0.1, nvml=FakeNvml.scenario(scenario), pids=lambda: [MY_PID])
    sampler.start()
    assert sampler.devices == []
    assert sampler.status.endswith("host samples only")
    assert done.wait(5)
    sampler.stop()
    logs = of(events, LogEvent)
    assert len(logs) == 1
    assert logs[0].source == "telemetry" and logs[0].message == sampler.status
    # A machine without the driver is normal (a laptop); a broken driver is a warning.
    normal = scenario in ("no-gpus", "library-missing")
    assert logs[0].level == ("info" if normal else "warning")
    assert of(events, GpuSample) == []
    host = of(events, HostSample)[-1]
    assert host.mem_total_bytes > 0 and host.proc_rss_bytes > 0
    assert events[0] is logs[0]  # the status comes first
    assert threads == {"gpuscale-sampler"}  # every event from the sampler's thread


def test_the_real_machine_without_nvidia(monkeypatch):
    """This machine has no NVIDIA driver: the real bindings fail at init, not the sampler."""
    events: list = []
    sampler = Sampler(events.append, interval_s=0.1)
    monkeypatch.setattr("gpuscale.telemetry.nvml.load_bindings", lambda: FakeNvml.library_missing())
    sampler.start()
    deadline = time.monotonic() + 5
    while not of(events, HostSample) and time.monotonic() < deadline:
        time.sleep(0.02)
    sampler.stop()
    assert sampler.status.startswith("No NVIDIA driver found")
    assert of(events, HostSample)


def test_lost_gpu_mid_run_is_marked_once_and_the_others_go_on():
    fake = FakeNvml.lost_gpu(n=4, lost_index=2)
    sampler = opened(fake)
    assert len(gpu_samples(sampler.sample_once())) == 4
    fake.lose(2)
    events = sampler.sample_once()
    samples = of(events, GpuSample)
    lost = [s for s in samples if s.lost]
    assert [s.index for s in lost] == [2]
    assert lost[0].util_gpu_pct is None
    assert sorted(s.index for s in samples if not s.lost) == [0, 1, 3]
    (warning,) = of(events, LogEvent)
    assert warning.level == "warning" and warning.source == "telemetry"
    assert "GPU 2" in warning.message and "lost" in warning.message
    later = sampler.sample_once()
    assert sorted(gpu_samples(later)) == [0, 1, 3]
    assert of(later, LogEvent) == []
    sampler.stop()
    assert not fake.initialized


def test_lost_gpu_seen_first_by_the_pcie_thread():
    fake = FakeNvml.lost_gpu(n=2, lost_index=1)
    sampler = opened(fake)
    fake.lose(1)
    sampler.refresh_pcie()
    events = sampler.sample_once()
    assert [(s.index, s.lost) for s in of(events, GpuSample)] == [(0, False), (1, True)]
    sampler.stop()


def test_a_gpu_lost_while_starting_is_named():
    fake = FakeNvml.h100_box(3)
    # The probe (27 calls) passes; preparing the sampler does not.
    fake.gpus[2].lost_after_calls = 30
    sampler = opened(fake)
    assert [d.index for d in sampler.devices] == [0, 1]
    assert "GPU 2 lost while starting" in sampler.status
    sampler.stop()


def test_mig_gpu():
    fake = FakeNvml.mig()
    for gpu in fake.gpus:
        gpu.processes = [(MY_PID, 2 * GiB)]
    sampler = opened(fake, pids=lambda: [MY_PID])
    assert [d.mig for d in sampler.devices] == [True, False]
    sampler.sample_once()
    samples = gpu_samples(sampler.sample_once())
    mig, plain = samples[0], samples[1]
    assert mig.util_gpu_pct is None  # whole-GPU utilization is n/a under MIG
    assert mig.proc_mem_bytes is None  # NVML gives no per-process memory under MIG
    assert mig.gpm_sm_activity_pct is None  # device-level GPM not used under MIG
    assert mig.mem_used_bytes is not None
    assert plain.util_gpu_pct == 94.0 and plain.proc_mem_bytes == 2 * GiB
    assert plain.gpm_sm_activity_pct == 71.5
    sampler.stop()


def test_container_host_pids_give_na_and_one_notice():
    fake = FakeNvml.container_pids(run_pids=[MY_PID])
    sampler = opened(fake, pids=lambda: [MY_PID])
    events = sampler.sample_once() + sampler.sample_once()
    assert all(s.proc_mem_bytes is None for s in of(events, GpuSample))
    notices = of(events, LogEvent)
    assert len(notices) == 1 and "n/a" in notices[0].message
    sampler.stop()


def test_no_processes_listed_is_unknown_not_zero():
    sampler = opened(FakeNvml.h100_box(2), pids=lambda: [MY_PID])
    assert all(s.proc_mem_bytes is None for s in of(sampler.sample_once(), GpuSample))
    sampler.stop()


def test_without_pids_no_process_queries():
    fake = FakeNvml.h100_box(2)
    sampler = opened(fake)
    assert all(s.proc_mem_bytes is None for s in of(sampler.sample_once(), GpuSample))
    assert fake.calls["nvmlDeviceGetComputeRunningProcesses"] == 0
    sampler.stop()


def test_gpu_indices_limit_what_is_sampled():
    fake = FakeNvml.h100_box(4)
    sampler = opened(fake, gpu_indices=[1, 3])
    assert [d.index for d in sampler.devices] == [1, 3]
    assert sorted(gpu_samples(sampler.sample_once())) == [1, 3]
    sampler.stop()
    sampler = opened(FakeNvml.h100_box(2), gpu_indices=[7])
    assert sampler.devices == []
    assert "asked for GPU 7" in sampler.status and sampler.status.endswith("host samples only")
    assert of(sampler.sample_once(), GpuSample) == []
    sampler.stop()


def test_a_failing_pids_callable_is_a_notice_not_a_crash():
    def pids():
        raise RuntimeError("trainer gone")

    sampler = opened(FakeNvml.h100_box(1), pids=pids)
    events = sampler.sample_once() + sampler.sample_once()
    assert len(of(events, GpuSample)) == 2
    notices = of(events, LogEvent)
    assert len(notices) == 1 and "trainer gone" in notices[0].message
    sampler.stop()


def test_unexpected_exceptions_from_the_library_become_none():
    fake = FakeNvml.h100_box(1)

    def broken(*args):
        raise RuntimeError("ctypes went wrong")

    fake.nvmlDeviceGetPowerUsage = broken
    fake.nvmlDeviceGetFieldValues = broken
    sampler = opened(fake)
    g = gpu_samples(sampler.sample_once())[0]
    assert g.power_w is None and g.nvlink_rx_bytes_s is None and g.temp_c == 60.0
    sampler.stop()


def test_gpm_samples_are_freed_and_nvml_shut_down():
    fake = FakeNvml.h100_box(2)
    sampler = Sampler(lambda e: None, nvml=fake, interval_s=0.1)
    sampler.start()
    gpm = [s for g in sampler._gpus for s in g.gpm_samples]
    assert len(gpm) == 4
    sampler.stop()
    sampler.stop()
    assert all(s.freed for s in gpm)
    assert fake.shutdown_count == fake.init_count == 1


def test_stop_without_start_and_start_twice():
    sampler = Sampler(lambda e: None, nvml=FakeNvml.h100_box(1))
    sampler.stop()
    sampler = Sampler(lambda e: None, nvml=FakeNvml.h100_box(1), interval_s=0.1)
    sampler.start()
    sampler.start()
    assert len([t for t in sampler._threads if t.is_alive()]) == 2
    sampler.stop()
    assert not any(t.is_alive() for t in sampler._threads)


def test_the_period_holds_while_pcie_blocks():
    """8 GPUs x 2 PCIe reads x 30 ms = 0.48 s per PCIe round: the samples keep 0.1 s."""
    fake = FakeNvml.h100_box(8, pcie_delay_s=0.03)
    events: list = []
    with Sampler(events.append, interval_s=0.1, nvml=fake) as sampler:
        time.sleep(0.65)
    starts = list(sampler.tick_starts)
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    assert len(starts) >= 5
    assert statistics.median(gaps) == pytest.approx(0.1, abs=0.02)
    assert max(gaps) < 0.3  # a sampler waiting on PCIe would show gaps of 0.48 s
    assert fake.calls["nvmlDeviceGetPcieThroughput"] >= 2
    assert any(
        s.pcie_rx_bytes_s == 1_200_000 * 1024 for s in of(events, GpuSample)
    )  # the slow values arrive


def test_a_raising_emit_does_not_stop_sampling():
    calls = []

    def emit(event):
        calls.append(event)
        raise ValueError("consumer bug")

    with Sampler(emit, interval_s=0.1, nvml=FakeNvml.h100_box(1)) as sampler:
        deadline = time.monotonic() + 5
        while len(of(calls, HostSample)) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
    assert len(of(calls, HostSample)) >= 3
    assert sampler.emit_errors == len(calls)


def test_lost_gpu_in_a_threaded_run():
    fake = FakeNvml.h100_box(3)
    fake.gpus[1].lost_after_calls = 170  # starting takes ~110 calls (topology too), a sample ~15
    events: list = []
    with Sampler(events.append, interval_s=0.1, nvml=fake):
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if len([e for e in of(events, GpuSample) if e.index == 0]) >= 10:
                break
            time.sleep(0.02)
    lost = [e for e in of(events, GpuSample) if e.lost]
    assert [e.index for e in lost] == [1]
    after = [e.index for e in of(events, GpuSample) if e.t > lost[0].t]
    assert 1 not in after and {0, 2} <= set(after)
    assert len([e for e in of(events, LogEvent) if e.level == "warning"]) == 1


def test_interval_is_validated():
    assert validate_interval(0.1) == 0.1
    assert validate_interval("0.5") == 0.5
    for bad in (0.05, 0, -1, 61, "fast", None):
        with pytest.raises(GpuscaleError):
            validate_interval(bad)
    with pytest.raises(GpuscaleError, match="10 Hz"):
        Sampler(lambda e: None, interval_s=0.01)
    assert "1/6 s to 1 s" in INTERVAL_HELP and "10 Hz" in INTERVAL_HELP


def test_gpm_request_fills_the_real_ctypes_struct():
    """The GPM request is built on pynvml's own struct types (no NVML call)."""
    import pynvml

    class RealStructs(FakeNvml):
        c_nvmlGpmMetricsGet_t = pynvml.c_nvmlGpmMetricsGet_t

        def nvmlGpmSampleAlloc(self):
            return pynvml.c_nvmlGpmSample_t()

        def nvmlGpmSampleFree(self, sample):
            pass

        def nvmlGpmSampleGet(self, h, sample):
            return sample

        def nvmlGpmMetricsGet(self, request):
            assert request.version == pynvml.NVML_GPM_METRICS_GET_VERSION
            assert request.numMetrics == 3
            ids = [request.metrics[i].metricId for i in range(3)]
            assert ids == [
                pynvml.NVML_GPM_METRIC_SM_UTIL,
                pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL,
                pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL,
            ]
            for i, value in enumerate((12.5, 3.25, 80.0)):
                request.metrics[i].value = value
                request.metrics[i].nvmlReturn = 0 if i < 2 else 3  # DRAM: not supported
            return request

    fake = RealStructs.h100_box(1)
    sampler = opened(fake)
    sampler.sample_once()
    g = gpu_samples(sampler.sample_once())[0]
    assert (g.gpm_sm_activity_pct, g.gpm_tensor_activity_pct, g.gpm_dram_bw_pct) == (
        12.5,
        3.25,
        None,
    )
    sampler.stop()
