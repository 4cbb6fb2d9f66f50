"""How long each NVML call the sampler makes takes on this machine (median of N).

The sampler's main thread makes the fast calls every period; the PCIe throughput
calls block (about 20 ms each, NVIDIA says) and run in a thread of their own. This
says whether that split still holds on a real GPU, and what one sample of one GPU
costs in wall and CPU time through the sampler itself. Last line:
``one GPU: raw calls X ms; a sample W ms wall / C ms CPU; PCIe refresh ...``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from gpuscale.telemetry.nvml import open_nvml
from gpuscale.telemetry.sampler import Sampler


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    lib, probe = open_nvml()
    print(probe.status)
    if lib is None or not probe.ok:
        return 1
    m = lib.module
    h = m.nvmlDeviceGetHandleByIndex(0)
    calls = {
        "nvmlDeviceGetUtilizationRates": (h,),
        "nvmlDeviceGetMemoryInfo": (h,),
        "nvmlDeviceGetPowerUsage": (h,),
        "nvmlDeviceGetEnforcedPowerLimit": (h,),
        "nvmlDeviceGetTemperature": (h, 0),
        "nvmlDeviceGetClockInfo": (h, 1),
        "nvmlDeviceGetCurrentClocksEventReasons": (h,),
        "nvmlDeviceGetComputeRunningProcesses": (h,),
        "nvmlDeviceGetPcieThroughput": (h, 1),
    }
    gpm = lib.query("nvmlGpmSampleAlloc")
    if gpm is not None:
        calls["nvmlGpmSampleGet"] = (h, gpm)
    main_ms = 0.0
    pcie_ms = 0.0
    for name, call_args in calls.items():
        times = []
        failed = ""
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            try:
                getattr(m, name)(*call_args)
            except Exception as exc:
                failed = f" (fails: {exc})"
            times.append((time.perf_counter() - t0) * 1000)
        med = statistics.median(times)
        print(f"{name:<42} median {med:7.3f} ms  max {max(times):7.3f} ms{failed}")
        if name == "nvmlDeviceGetPcieThroughput":
            pcie_ms = 2 * med  # rx and tx
        elif name == "nvmlDeviceGetClockInfo":
            main_ms += 2 * med  # SM and memory clocks
        else:
            main_ms += med
    lib.close()
    # The sampler's own periods, as its threads run them: wall and CPU time of one
    # sample_once (host + every GPU, GPM metrics included) and of one refresh_pcie.
    sampler = Sampler(lambda event: None, interval_s=0.5, pids=lambda: [os.getpid()])
    sampler.open()
    sampler.sample_once()  # primes GPM and the host counters
    rows = {"sample_once": sampler.sample_once, "refresh_pcie": sampler.refresh_pcie}
    measured = {}
    for name, fn in rows.items():
        walls, cpus = [], []
        for _ in range(args.repeat):
            time.sleep(0.02)
            w0, c0 = time.perf_counter(), time.thread_time()
            fn()
            cpus.append((time.thread_time() - c0) * 1000)
            walls.append((time.perf_counter() - w0) * 1000)
        measured[name] = (statistics.median(walls), statistics.median(cpus))
        print(
            f"Sampler.{name:<34} median {measured[name][0]:7.3f} ms wall, {measured[name][1]:7.3f} ms CPU"
        )
    sampler.stop()
    (s_wall, s_cpu), (p_wall, p_cpu) = measured["sample_once"], measured["refresh_pcie"]
    print(
        f"one GPU: raw calls {main_ms:.2f} ms; a sample {s_wall:.2f} ms wall / {s_cpu:.2f} ms CPU; "
        f"PCIe refresh {p_wall:.1f} ms wall / {p_cpu:.2f} ms CPU (raw {pcie_ms:.1f} ms)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
