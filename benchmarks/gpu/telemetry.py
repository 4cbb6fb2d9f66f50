"""What gpuscale's telemetry read on a real GPU, phase by phase, and whether it is right.

Reads a recording made by ``gpuscale run --record R -- python benchmarks/gpu/load.py``
(the load marks its phases on stdout; see ``load.py``), groups the GPU samples by
phase (skipping the first second of each, since NVML's utilization averages over
up to a second), and prints each field's median per phase. Then it checks what a
user relies on:

* utilization is high under matrix products and low when idle;
* the copy phase is *busy but not working*: utilization high, GPM tensor activity
  near zero (Hopper and newer; skipped where GPM is n/a);
* the matrix products drive the tensor cores (GPM tensor activity high);
* power rises under load; the run's own GPU memory is seen (or its absence said);
* host-to-device copies show as PCIe receive traffic.

No TensorFlow, no GPU needed to read a recording: this runs here on the recording
that came back from the device. Last line: ``real NVML: K of M checks passed``.
"""

from __future__ import annotations

import argparse
import statistics
import sys

from gpuscale.events.schema import GpuSample, LogEvent
from gpuscale.recording.reader import load_run

MARK = "gpuscale-load phase="
SETTLE_S = 1.0
FIELDS = (
    "util_gpu_pct",
    "util_mem_pct",
    "gpm_sm_activity_pct",
    "gpm_tensor_activity_pct",
    "gpm_dram_bw_pct",
    "power_w",
    "sm_clock_mhz",
    "pcie_rx_bytes_s",
    "pcie_tx_bytes_s",
    "proc_mem_bytes",
)


def phases(events) -> list[tuple[str, float, float]]:
    """(name, start, end) of each phase, from the load's stdout lines."""
    marks = [
        (e.message.split(MARK, 1)[1].strip(), e.t)
        for e in events
        if isinstance(e, LogEvent) and MARK in e.message
    ]
    return [(name, t, marks[i + 1][1]) for i, (name, t) in enumerate(marks[:-1])]


def by_phase(events) -> dict[str, dict[str, list[float]]]:
    """Per phase name, per field, the values of the samples inside the phase."""
    out: dict[str, dict[str, list[float]]] = {}
    spans = phases(events)
    for e in events:
        if not isinstance(e, GpuSample):
            continue
        for name, start, end in spans:
            if start + SETTLE_S <= e.t < end:
                row = out.setdefault(name, {f: [] for f in FIELDS})
                for f in FIELDS:
                    value = getattr(e, f)
                    if value is not None:
                        row[f].append(float(value))
    return out


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recording", help="a recording of benchmarks/gpu/load.py")
    args = parser.parse_args()
    run = load_run(args.recording)
    table = by_phase(run.events)
    if not table:
        print("gpuscale: error: no GPU samples inside the load's phases", file=sys.stderr)
        return 1
    names = list(table)
    print(f"{'field':<26}" + "".join(f"{n:>12}" for n in names))
    for f in FIELDS:
        cells = []
        for n in names:
            m = median(table[n][f])
            if m is None:
                cells.append(f"{'n/a':>12}")
            elif f.endswith("bytes_s"):
                cells.append(f"{m / 1e9:>9.2f} GB/s"[-12:])
            elif f.endswith("bytes"):
                cells.append(f"{m / 2**30:>8.2f} GiB")
            else:
                cells.append(f"{m:>12.1f}")
        print(f"{f:<26}" + "".join(cells))
    print("samples per phase: " + ", ".join(f"{n} {len(table[n]['util_gpu_pct'])}" for n in names))

    def m(phase: str, field: str) -> float | None:
        return median(table.get(phase, {}).get(field, []))

    def at_least(phase: str, field: str, floor: float) -> bool | None:
        value = m(phase, field)
        return None if value is None else value >= floor

    def at_most(phase: str, field: str, ceiling: float) -> bool | None:
        value = m(phase, field)
        return None if value is None else value <= ceiling

    def both(a: bool | None, b: bool | None) -> bool | None:
        return None if a is None or b is None else a and b

    idle_power, load_power = m("idle", "power_w"), m("matmul", "power_w")
    checks: list[tuple[str, bool | None]] = [
        ("utilization >= 90% under matmul", at_least("matmul", "util_gpu_pct", 90)),
        ("utilization <= 10% idle", at_most("idle", "util_gpu_pct", 10)),
        (
            "GPM tensor activity >= 30% under matmul",
            at_least("matmul", "gpm_tensor_activity_pct", 30),
        ),
        (
            "copy is busy, not working: utilization >= 80%, tensor activity <= 5%",
            both(
                at_least("copy", "util_gpu_pct", 80), at_most("copy", "gpm_tensor_activity_pct", 5)
            ),
        ),
        (
            "host-to-device copies: utilization >= 80% with GPM SM activity <= 5%",
            both(at_least("h2d", "util_gpu_pct", 80), at_most("h2d", "gpm_sm_activity_pct", 5)),
        ),
        (
            "power under matmul > idle + 50 W",
            None if idle_power is None or load_power is None else load_power > idle_power + 50,
        ),
        ("the run's own GPU memory seen (> 1 GiB)", at_least("matmul", "proc_mem_bytes", 2**30)),
        ("host-to-device copies read as PCIe rx > 1 GB/s", at_least("h2d", "pcie_rx_bytes_s", 1e9)),
    ]
    passed = sum(1 for _, ok in checks if ok)
    counted = sum(1 for _, ok in checks if ok is not None)
    for text, ok in checks:
        print(f"  {'n/a ' if ok is None else ('ok  ' if ok else 'FAIL')} {text}")
    print(f"real NVML: {passed} of {counted} checks passed ({len(checks) - counted} n/a)")
    return 0 if passed == counted else 1


if __name__ == "__main__":
    raise SystemExit(main())
