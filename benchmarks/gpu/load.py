"""A GPU load in named phases, for checking what gpuscale's telemetry reads on a real GPU.

Needs PyTorch and a CUDA GPU (not a gpuscale dependency: this is a device check, run
by ``benchmarks/gpu/check.sh``). Each phase starts with one line on stdout,
``gpuscale-load phase=NAME``, which ``gpuscale run -- python load.py`` records as a
log event with its time, so ``benchmarks/gpu/telemetry.py`` can split the samples
by phase:

* ``idle``: nothing runs on the GPU;
* ``matmul``: bf16 8192x8192 matrix products (tensor cores busy: "working");
* ``copy``: device-to-device copies of 1 GiB (kernels run, memory busy, no tensor
  cores: what NVML's utilization calls busy, like an all-reduce's copy kernels);
* ``h2d``: host-to-device copies from pinned memory (PCIe receive; copy engines,
  few or no kernels).
"""

from __future__ import annotations

import argparse
import time

import torch


def phase(name: str, seconds: float, work) -> None:
    print(f"gpuscale-load phase={name}", flush=True)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        work()
        torch.cuda.synchronize()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=6.0, help="length of each phase")
    args = parser.parse_args()
    dev = torch.device("cuda")
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    src = torch.empty(1 << 30, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    host = torch.empty(256 << 20, dtype=torch.uint8).pin_memory()
    landing = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    torch.cuda.synchronize()

    def matmul() -> None:
        for _ in range(10):
            torch.matmul(a, b)

    def copy() -> None:
        for _ in range(10):
            dst.copy_(src)

    def h2d() -> None:
        for _ in range(4):
            landing.copy_(host, non_blocking=True)

    phase("idle", args.seconds / 2, lambda: time.sleep(0.05))
    phase("matmul", args.seconds, matmul)
    phase("copy", args.seconds, copy)
    phase("h2d", args.seconds, h2d)
    phase("idle", args.seconds / 2, lambda: time.sleep(0.05))
    print("gpuscale-load phase=end", flush=True)


if __name__ == "__main__":
    main()
