"""A stand-in for the ``pynvml`` module (nvidia-ml-py), for tests and demo screens.

``FakeNvml`` offers the functions, constants and exception classes of
``pynvml`` that gpuscale uses, backed by plain Python :class:`FakeGpu` records,
so the telemetry can be exercised on a machine without a GPU. Pass an instance
where gpuscale accepts ``nvml=``::

    fake = FakeNvml.scenario("h100-box")          # 8 x H100 with NVLink
    Sampler(emit, nvml=fake)

Scenarios (:data:`SCENARIOS`): ``h100-box``, ``not-supported``, ``no-driver``,
``library-missing``, ``version-mismatch``, ``no-permission``, ``no-gpus``,
``lost-gpu``, ``mig``, ``container-pids``, and for the topology
(``h100-box`` is NVSwitch-connected) ``pcie-two-sockets``, ``pcie-one-switch``,
``nvlink-bridge``, ``topology-not-supported``. Values are those of an idle-ish
busy box; set ``animate=True`` to have utilization, power and memory move with
the clock (for a demo dashboard). Error codes and constants equal NVML's (a
test checks them against the real bindings).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

# --- NVML constants (same values as pynvml) -------------------------------

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_NO_DATA = 21
NVML_ERROR_UNKNOWN = 999

NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_PCIE_UTIL_TX_BYTES = 0
NVML_PCIE_UTIL_RX_BYTES = 1
NVML_NVLINK_MAX_LINKS = 36
NVML_DEVICE_MIG_DISABLE = 0
NVML_DEVICE_MIG_ENABLE = 1
NVML_FI_DEV_NVLINK_LINK_COUNT = 91
NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX = 138
NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX = 139
NVML_VALUE_TYPE_UNSIGNED_INT = 1
NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3
NVML_GPM_METRIC_SM_UTIL = 2
NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5
NVML_GPM_METRIC_DRAM_BW_UTIL = 10
NVML_GPM_METRICS_GET_VERSION = 1
NVML_GPM_METRIC_MAX = 477
NVML_TOPOLOGY_INTERNAL = 0
NVML_TOPOLOGY_SINGLE = 10
NVML_TOPOLOGY_MULTIPLE = 20
NVML_TOPOLOGY_HOSTBRIDGE = 30
NVML_TOPOLOGY_NODE = 40
NVML_TOPOLOGY_SYSTEM = 50
NVML_NVLINK_DEVICE_TYPE_GPU = 0x00
NVML_NVLINK_DEVICE_TYPE_IBMNPU = 0x01
NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02
NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xFF

nvmlClocksEventReasonGpuIdle = 0x001
nvmlClocksEventReasonSwPowerCap = 0x004
nvmlClocksEventReasonHwSlowdown = 0x008
nvmlClocksEventReasonSwThermalSlowdown = 0x020

_ERROR_NAMES = {
    NVML_ERROR_UNINITIALIZED: "Uninitialized",
    NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
    NVML_ERROR_NOT_SUPPORTED: "Not Supported",
    NVML_ERROR_NO_PERMISSION: "Insufficient Permissions",
    NVML_ERROR_NOT_FOUND: "Not Found",
    NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
    NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
    NVML_ERROR_FUNCTION_NOT_FOUND: "Function Not Found",
    NVML_ERROR_GPU_IS_LOST: "GPU is lost",
    NVML_ERROR_LIB_RM_VERSION_MISMATCH: "RM has detected an NVML/RM version mismatch.",
    NVML_ERROR_NO_DATA: "No data",
    NVML_ERROR_UNKNOWN: "Unknown Error",
}


class NVMLError(Exception):
    """Like pynvml's: ``.value`` is the NVML return code."""

    def __init__(self, value: int):
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return _ERROR_NAMES.get(self.value, f"NVML Error with code {self.value}")


def _error_class(code: int, name: str) -> type[NVMLError]:
    def __init__(self, *args):
        NVMLError.__init__(self, code)

    return type(name, (NVMLError,), {"__init__": __init__})


NVMLError_Uninitialized = _error_class(NVML_ERROR_UNINITIALIZED, "NVMLError_Uninitialized")
NVMLError_NotSupported = _error_class(NVML_ERROR_NOT_SUPPORTED, "NVMLError_NotSupported")
NVMLError_NoPermission = _error_class(NVML_ERROR_NO_PERMISSION, "NVMLError_NoPermission")
NVMLError_DriverNotLoaded = _error_class(NVML_ERROR_DRIVER_NOT_LOADED, "NVMLError_DriverNotLoaded")
NVMLError_LibraryNotFound = _error_class(NVML_ERROR_LIBRARY_NOT_FOUND, "NVMLError_LibraryNotFound")
NVMLError_FunctionNotFound = _error_class(
    NVML_ERROR_FUNCTION_NOT_FOUND, "NVMLError_FunctionNotFound"
)
NVMLError_GpuIsLost = _error_class(NVML_ERROR_GPU_IS_LOST, "NVMLError_GpuIsLost")
NVMLError_LibRmVersionMismatch = _error_class(
    NVML_ERROR_LIB_RM_VERSION_MISMATCH, "NVMLError_LibRmVersionMismatch"
)
NVMLError_InvalidArgument = _error_class(NVML_ERROR_INVALID_ARGUMENT, "NVMLError_InvalidArgument")

_ERROR_CLASSES = {
    cls(0).value: cls
    for cls in (
        NVMLError_Uninitialized,
        NVMLError_NotSupported,
        NVMLError_NoPermission,
        NVMLError_DriverNotLoaded,
        NVMLError_LibraryNotFound,
        NVMLError_FunctionNotFound,
        NVMLError_GpuIsLost,
        NVMLError_LibRmVersionMismatch,
        NVMLError_InvalidArgument,
    )
}


def nvml_error(code: int) -> NVMLError:
    """The exception pynvml would raise for ``code``."""
    cls = _ERROR_CLASSES.get(code)
    return cls() if cls is not None else NVMLError(code)


# --- the devices ----------------------------------------------------------

GiB = 1024**3


@dataclass
class FakeGpu:
    """One GPU as NVML would report it. Units as NVML's: mW, MHz, KiB/s."""

    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    memory_total_bytes: int = 80 * GiB
    memory_used_bytes: int = 20 * GiB
    util_gpu: int = 97
    util_mem: int = 41
    power_mw: int = 612_000
    power_limit_mw: int = 700_000
    temp_c: int = 63
    sm_clock_mhz: int = 1980
    mem_clock_mhz: int = 2619
    throttle_mask: int = nvmlClocksEventReasonSwPowerCap
    pcie_gen: int = 5
    pcie_width: int = 16
    pcie_max_gen: int = 5
    pcie_max_width: int = 16
    pcie_rx_kib_s: int = 1_200_000
    pcie_tx_kib_s: int = 300_000
    nvlink_total_links: int = 18
    """Links the chip has (NVLINK_LINK_COUNT); 0: no NVLink at all."""
    nvlink_active_links: int = 18
    nvlink_remotes: list[tuple[int, str]] = field(default_factory=list)
    """Per active link: (``NVML_NVLINK_DEVICE_TYPE_*``, far end's PCI bus id);
    empty: the remote calls answer NotSupported."""
    pci_bus_id: str = ""
    """Empty: one is made from the GPU's index."""
    nvlink_tx_kib_s_per_link: float = 2_000_000.0
    nvlink_rx_kib_s_per_link: float = 1_900_000.0
    gpm: bool = True
    """Hopper or newer: GPM metrics supported."""
    gpm_sm_util: float = 71.5
    gpm_tensor_util: float = 38.25
    gpm_dram_bw: float = 55.0
    processes: list[tuple[int, int | None]] = field(default_factory=list)
    """(pid, used GPU memory bytes or None = not available) of compute processes."""
    mig: bool = False
    unsupported: set[str] = field(default_factory=set)
    """Function names that raise NotSupported for this GPU."""
    lost: bool = False
    """Every call for this GPU raises GpuIsLost."""
    lost_after_calls: int | None = None
    """Become lost after this many calls for this GPU (for threaded tests)."""
    calls: int = 0


class FakeClock:
    """A clock tests move by hand (seconds)."""

    def __init__(self, start: float = 1000.0):
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class _Handle:
    index: int


class _GpmSample:
    def __init__(self) -> None:
        self.handle: _Handle | None = None
        self.time_s: float | None = None
        self.freed = False


class c_nvmlGpmMetricsGet_t:
    """Stand-in for pynvml's ctypes struct (same field names)."""

    def __init__(self) -> None:
        self.version = 0
        self.numMetrics = 0
        self.sample1: Any = None
        self.sample2: Any = None
        # The real struct holds NVML_GPM_METRIC_MAX entries; 16 are plenty here.
        self.metrics = [SimpleNamespace(metricId=0, nvmlReturn=0, value=0.0) for _ in range(16)]


# --- the module -----------------------------------------------------------


class FakeNvml:
    """A ``pynvml`` stand-in. Module-level names of this file are its attributes too."""

    def __init__(
        self,
        gpus: Iterable[FakeGpu] = (),
        *,
        init_error: int | None = None,
        driver_version: str = "550.54.15",
        cuda_version: int = 12040,
        clock: Callable[[], float] | None = None,
        pcie_delay_s: float = 0.0,
        absent: Iterable[str] = (),
        missing_in_driver: Iterable[str] = (),
        animate: bool = False,
        ancestors: dict[tuple[int, int], int] | None = None,
    ):
        self.gpus = list(gpus)
        for i, gpu in enumerate(self.gpus):
            if not gpu.pci_bus_id:
                gpu.pci_bus_id = bus_id_of(i)
        self.ancestors = ancestors
        """``NVML_TOPOLOGY_*`` level per pair of indices ``(a, b)``, ``a < b``;
        ``None``: the call answers NotSupported."""
        self.init_error = init_error
        self.driver_version = driver_version
        self.cuda_version = cuda_version
        self.clock = clock or time.monotonic
        self.pcie_delay_s = pcie_delay_s
        self.absent = set(absent)
        """Names the bindings do not have at all (AttributeError, an old nvidia-ml-py)."""
        self.missing_in_driver = set(missing_in_driver)
        """Functions the driver lacks (FunctionNotFound, an old driver)."""
        self.animate = animate
        self.calls: Counter[str] = Counter()
        self.init_count = 0
        self.shutdown_count = 0
        self._start = self.clock()

    # Constants and exception classes of this module, as attributes.
    def __getattr__(self, name: str) -> Any:
        if name in self.__dict__.get("absent", ()):
            raise AttributeError(name)
        value = globals().get(name)
        if value is None or name.startswith("_") or name in ("FakeNvml", "FakeGpu"):
            raise AttributeError(name)
        return value

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("nvml") and name in object.__getattribute__(self, "absent"):
            raise AttributeError(name)
        return object.__getattribute__(self, name)

    # -- scenarios --------------------------------------------------------

    @classmethod
    def scenario(cls, name: str, **kwargs: Any) -> FakeNvml:
        """A ready-made machine; see :data:`SCENARIOS`."""
        try:
            return SCENARIOS[name](**kwargs)
        except KeyError:
            raise ValueError(f"unknown scenario {name!r}; one of {sorted(SCENARIOS)}") from None

    @classmethod
    def h100_box(cls, n: int = 8, **kwargs: Any) -> FakeNvml:
        """A healthy DGX H100-like box: ``n`` H100 SXM, PCIe gen5 x16, each with 18
        NVLink links to four NVSwitches (5, 4, 4, 5 links); GPUs 0-3 on one CPU
        socket, 4-7 on the other (``nvidia-smi topo -m``: NV18 everywhere,
        NODE within a socket, SYS across)."""
        switches = [(SWITCH_BUS_IDS[s], count) for s, count in enumerate((5, 4, 4, 5))]
        remotes = [
            (NVML_NVLINK_DEVICE_TYPE_SWITCH, bus) for bus, count in switches for _ in range(count)
        ]
        gpus = [
            FakeGpu(
                uuid=f"GPU-{i:08x}-1111-2222-3333-444455556666",
                util_gpu=95 - i,
                memory_used_bytes=(20 + i) * GiB,
                temp_c=60 + i,
                nvlink_remotes=list(remotes),
            )
            for i in range(n)
        ]
        kwargs.setdefault("ancestors", _ancestors(n, lambda a, b: _socket_level(a, b, 4)))
        return cls(gpus, **kwargs)

    @classmethod
    def pcie_two_sockets(cls, **kwargs: Any) -> FakeNvml:
        """8 PCIe GPUs (A100 PCIe, no NVLink), 4 per CPU socket, two per PCIe
        switch: 0-1 and 2-3 PIX, 0-2 NODE, 0-4 SYS."""

        def level(a: int, b: int) -> int:
            if a // 2 == b // 2:
                return NVML_TOPOLOGY_SINGLE
            return _socket_level(a, b, 4)

        gpus = [_pcie_gpu("NVIDIA A100 80GB PCIe", i, pcie_gen=4) for i in range(8)]
        kwargs.setdefault("ancestors", _ancestors(8, level))
        return cls(gpus, **kwargs)

    @classmethod
    def pcie_one_switch(cls, **kwargs: Any) -> FakeNvml:
        """4 PCIe GPUs (L40S) under one PCIe switch: every pair PIX."""
        gpus = [_pcie_gpu("NVIDIA L40S", i, pcie_gen=4) for i in range(4)]
        kwargs.setdefault("ancestors", _ancestors(4, lambda a, b: NVML_TOPOLOGY_SINGLE))
        return cls(gpus, **kwargs)

    @classmethod
    def nvlink_bridge(cls, **kwargs: Any) -> FakeNvml:
        """4 RTX 3090 on one socket's root ports (every pair NODE), GPUs 0 and 1
        joined by an NVLink bridge (4 links each way, ``NV4``)."""
        gpus = [_pcie_gpu("NVIDIA GeForce RTX 3090", i, pcie_gen=4) for i in range(4)]
        for me, peer in ((0, 1), (1, 0)):
            gpus[me].nvlink_total_links = 4
            gpus[me].nvlink_active_links = 4
            gpus[me].nvlink_remotes = [(NVML_NVLINK_DEVICE_TYPE_GPU, bus_id_of(peer))] * 4
        kwargs.setdefault("ancestors", _ancestors(4, lambda a, b: NVML_TOPOLOGY_NODE))
        return cls(gpus, **kwargs)

    @classmethod
    def topology_not_supported(cls, **kwargs: Any) -> FakeNvml:
        """4 PCIe GPUs on a driver that answers NotSupported to the topology calls
        (common ancestor, PCI info, NVLink state and far ends)."""
        gpus = [_pcie_gpu("NVIDIA A10", i, pcie_gen=4) for i in range(4)]
        for gpu in gpus:
            gpu.unsupported |= {"nvmlDeviceGetPciInfo", "nvmlDeviceGetMaxPcieLinkGeneration"}
        kwargs.setdefault("missing_in_driver", {"nvmlDeviceGetNvLinkState"})
        return cls(gpus, **kwargs)

    @classmethod
    def not_supported(cls, **kwargs: Any) -> FakeNvml:
        """A consumer GPU on an old driver and old bindings: much is unsupported."""
        gpu = FakeGpu(
            name="NVIDIA GeForce GTX 1080",
            uuid="GPU-1080",
            memory_total_bytes=8 * GiB,
            memory_used_bytes=1 * GiB,
            pcie_gen=3,
            pcie_max_gen=3,
            nvlink_total_links=0,
            nvlink_active_links=0,
            gpm=False,
            unsupported={
                "nvmlDeviceGetPowerUsage",
                "nvmlDeviceGetEnforcedPowerLimit",
                "nvmlDeviceGetPcieThroughput",
                "nvmlDeviceGetComputeRunningProcesses",
                "nvmlDeviceGetMigMode",
                "nvmlDeviceGetUtilizationRates",
            },
        )
        kwargs.setdefault("missing_in_driver", {"nvmlDeviceGetCurrentClocksEventReasons"})
        kwargs.setdefault(
            "absent",
            {
                "nvmlGpmQueryDeviceSupport",
                "nvmlGpmSampleAlloc",
                "nvmlSystemGetCudaDriverVersion_v2",
            },
        )
        return cls([gpu], **kwargs)

    @classmethod
    def no_driver(cls, **kwargs: Any) -> FakeNvml:
        """libnvidia-ml is there, the kernel driver is not loaded."""
        return cls([], init_error=NVML_ERROR_DRIVER_NOT_LOADED, **kwargs)

    @classmethod
    def library_missing(cls, **kwargs: Any) -> FakeNvml:
        """No libnvidia-ml.so.1 (a machine without the NVIDIA driver)."""
        return cls([], init_error=NVML_ERROR_LIBRARY_NOT_FOUND, **kwargs)

    @classmethod
    def version_mismatch(cls, **kwargs: Any) -> FakeNvml:
        """The driver was upgraded, the kernel module not reloaded."""
        return cls([], init_error=NVML_ERROR_LIB_RM_VERSION_MISMATCH, **kwargs)

    @classmethod
    def no_permission(cls, **kwargs: Any) -> FakeNvml:
        """/dev/nvidia* not accessible to this user."""
        return cls([], init_error=NVML_ERROR_NO_PERMISSION, **kwargs)

    @classmethod
    def no_gpus(cls, **kwargs: Any) -> FakeNvml:
        """The driver runs, no GPU is visible."""
        return cls([], **kwargs)

    @classmethod
    def lost_gpu(cls, n: int = 4, lost_index: int = 2, **kwargs: Any) -> FakeNvml:
        """``n`` H100s; call :meth:`lose` (or set ``lost_after_calls``) to drop one."""
        fake = cls.h100_box(n, **kwargs)
        fake.lost_index = lost_index
        return fake

    @classmethod
    def mig(cls, **kwargs: Any) -> FakeNvml:
        """Two H100s, GPU 0 in MIG mode: whole-GPU utilization and per-process memory n/a."""
        fake = cls.h100_box(2, **kwargs)
        gpu = fake.gpus[0]
        gpu.mig = True
        gpu.unsupported |= {"nvmlDeviceGetUtilizationRates"}
        return fake

    @classmethod
    def container_pids(cls, run_pids: Iterable[int] = (), **kwargs: Any) -> FakeNvml:
        """Processes are listed with host PIDs that match none of ``run_pids``."""
        fake = cls.h100_box(2, **kwargs)
        offset = 4_000_000
        pids = list(run_pids) or [100]
        for i, gpu in enumerate(fake.gpus):
            gpu.processes = [(offset + pids[i % len(pids)], 3 * GiB)]
        return fake

    def lose(self, index: int | None = None) -> None:
        """From now on every call for GPU ``index`` raises GpuIsLost."""
        if index is None:
            index = getattr(self, "lost_index", 0)
        self.gpus[index].lost = True

    # -- plumbing ---------------------------------------------------------

    def _enter(self, name: str) -> None:
        self.calls[name] += 1
        if name in self.missing_in_driver:
            raise nvml_error(NVML_ERROR_FUNCTION_NOT_FOUND)
        if self.init_count <= self.shutdown_count:
            raise nvml_error(NVML_ERROR_UNINITIALIZED)

    def _gpu(self, name: str, handle: _Handle) -> FakeGpu:
        self._enter(name)
        if not isinstance(handle, _Handle) or not 0 <= handle.index < len(self.gpus):
            raise nvml_error(NVML_ERROR_INVALID_ARGUMENT)
        gpu = self.gpus[handle.index]
        gpu.calls += 1
        if gpu.lost_after_calls is not None and gpu.calls > gpu.lost_after_calls:
            gpu.lost = True
        if gpu.lost:
            raise nvml_error(NVML_ERROR_GPU_IS_LOST)
        if name in gpu.unsupported:
            raise nvml_error(NVML_ERROR_NOT_SUPPORTED)
        return gpu

    def _wave(self, gpu: FakeGpu, base: float, amplitude: float, lo: float, hi: float) -> float:
        if not self.animate:
            return base
        phase = self.gpus.index(gpu) * 0.7
        value = base + amplitude * math.sin((self.clock() - self._start) * 1.3 + phase)
        return max(lo, min(hi, value))

    # -- system -----------------------------------------------------------

    def nvmlInit(self) -> None:
        self.calls["nvmlInit"] += 1
        if self.init_error is not None:
            raise nvml_error(self.init_error)
        self.init_count += 1

    def nvmlShutdown(self) -> None:
        self.calls["nvmlShutdown"] += 1
        if self.init_count <= self.shutdown_count:
            raise nvml_error(NVML_ERROR_UNINITIALIZED)
        self.shutdown_count += 1

    @property
    def initialized(self) -> bool:
        return self.init_count > self.shutdown_count

    def nvmlSystemGetDriverVersion(self) -> str:
        self._enter("nvmlSystemGetDriverVersion")
        return self.driver_version

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._enter("nvmlSystemGetCudaDriverVersion")
        return self.cuda_version

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        self._enter("nvmlSystemGetCudaDriverVersion_v2")
        return self.cuda_version

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> _Handle:
        self._enter("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self.gpus):
            raise nvml_error(NVML_ERROR_INVALID_ARGUMENT)
        if self.gpus[index].lost:
            raise nvml_error(NVML_ERROR_GPU_IS_LOST)
        return _Handle(index)

    # -- device properties ------------------------------------------------

    def nvmlDeviceGetName(self, h: _Handle) -> str:
        return self._gpu("nvmlDeviceGetName", h).name

    def nvmlDeviceGetUUID(self, h: _Handle) -> str:
        return self._gpu("nvmlDeviceGetUUID", h).uuid

    def nvmlDeviceGetMemoryInfo(self, h: _Handle) -> SimpleNamespace:
        gpu = self._gpu("nvmlDeviceGetMemoryInfo", h)
        used = int(self._wave(gpu, gpu.memory_used_bytes, 4 * GiB, 0, gpu.memory_total_bytes))
        return SimpleNamespace(
            total=gpu.memory_total_bytes, used=used, free=gpu.memory_total_bytes - used
        )

    def nvmlDeviceGetMigMode(self, h: _Handle) -> list[int]:
        gpu = self._gpu("nvmlDeviceGetMigMode", h)
        mode = NVML_DEVICE_MIG_ENABLE if gpu.mig else NVML_DEVICE_MIG_DISABLE
        return [mode, mode]

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: _Handle) -> int:
        return self._gpu("nvmlDeviceGetCurrPcieLinkGeneration", h).pcie_gen

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: _Handle) -> int:
        return self._gpu("nvmlDeviceGetCurrPcieLinkWidth", h).pcie_width

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: _Handle) -> int:
        return self._gpu("nvmlDeviceGetMaxPcieLinkGeneration", h).pcie_max_gen

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: _Handle) -> int:
        return self._gpu("nvmlDeviceGetMaxPcieLinkWidth", h).pcie_max_width

    def nvmlDeviceGetNvLinkState(self, h: _Handle, link: int) -> int:
        gpu = self._gpu("nvmlDeviceGetNvLinkState", h)
        if gpu.nvlink_total_links == 0:
            raise nvml_error(NVML_ERROR_NOT_SUPPORTED)
        if not 0 <= link < gpu.nvlink_total_links:
            raise nvml_error(NVML_ERROR_INVALID_ARGUMENT)
        return 1 if link < gpu.nvlink_active_links else 0

    def nvmlDeviceGetPciInfo(self, h: _Handle) -> SimpleNamespace:
        gpu = self._gpu("nvmlDeviceGetPciInfo", h)
        return _pci_info(gpu.pci_bus_id)

    def _remote(self, name: str, h: _Handle, link: int) -> tuple[int, str]:
        gpu = self._gpu(name, h)
        if gpu.nvlink_total_links == 0 or not gpu.nvlink_remotes:
            raise nvml_error(NVML_ERROR_NOT_SUPPORTED)
        if not 0 <= link < gpu.nvlink_total_links:
            raise nvml_error(NVML_ERROR_INVALID_ARGUMENT)
        if link >= min(gpu.nvlink_active_links, len(gpu.nvlink_remotes)):
            raise nvml_error(NVML_ERROR_NOT_SUPPORTED)  # an inactive link has no far end
        return gpu.nvlink_remotes[link]

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h: _Handle, link: int) -> SimpleNamespace:
        return _pci_info(self._remote("nvmlDeviceGetNvLinkRemotePciInfo", h, link)[1])

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, h: _Handle, link: int) -> int:
        return self._remote("nvmlDeviceGetNvLinkRemoteDeviceType", h, link)[0]

    def nvmlDeviceGetTopologyCommonAncestor(self, h1: _Handle, h2: _Handle) -> int:
        self._gpu("nvmlDeviceGetTopologyCommonAncestor", h1)
        self._gpu("nvmlDeviceGetTopologyCommonAncestor", h2)
        self.calls["nvmlDeviceGetTopologyCommonAncestor"] -= 1  # one call, two GPUs checked
        if self.ancestors is None:
            raise nvml_error(NVML_ERROR_NOT_SUPPORTED)
        if h1.index == h2.index:
            return NVML_TOPOLOGY_INTERNAL
        key = (min(h1.index, h2.index), max(h1.index, h2.index))
        if key not in self.ancestors:
            raise nvml_error(NVML_ERROR_NOT_SUPPORTED)
        return self.ancestors[key]

    # -- samples ----------------------------------------------------------

    def nvmlDeviceGetUtilizationRates(self, h: _Handle) -> SimpleNamespace:
        gpu = self._gpu("nvmlDeviceGetUtilizationRates", h)
        return SimpleNamespace(
            gpu=int(self._wave(gpu, gpu.util_gpu, 30, 0, 100)),
            memory=int(self._wave(gpu, gpu.util_mem, 20, 0, 100)),
        )

    def nvmlDeviceGetPowerUsage(self, h: _Handle) -> int:
        gpu = self._gpu("nvmlDeviceGetPowerUsage", h)
        return int(self._wave(gpu, gpu.power_mw, 150_000, 60_000, gpu.power_limit_mw))

    def nvmlDeviceGetEnforcedPowerLimit(self, h: _Handle) -> int:
        return self._gpu("nvmlDeviceGetEnforcedPowerLimit", h).power_limit_mw

    def nvmlDeviceGetTemperature(self, h: _Handle, sensor: int) -> int:
        gpu = self._gpu("nvmlDeviceGetTemperature", h)
        if sensor != NVML_TEMPERATURE_GPU:
            raise nvml_error(NVML_ERROR_INVALID_ARGUMENT)
        return gpu.temp_c

    def nvmlDeviceGetClockInfo(self, h: _Handle, clock_type: int) -> int:
        gpu = self._gpu("nvmlDeviceGetClockInfo", h)
        if clock_type == NVML_CLOCK_SM:
            return gpu.sm_clock_mhz
        if clock_type == NVML_CLOCK_MEM:
            return gpu.mem_clock_mhz
        raise nvml_error(NVML_ERROR_INVALID_ARGUMENT)

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: _Handle) -> int:
        return self._gpu("nvmlDeviceGetCurrentClocksEventReasons", h).throttle_mask

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h: _Handle) -> int:
        return self._gpu("nvmlDeviceGetCurrentClocksThrottleReasons", h).throttle_mask

    def nvmlDeviceGetPcieThroughput(self, h: _Handle, counter: int) -> int:
        gpu = self._gpu("nvmlDeviceGetPcieThroughput", h)
        if self.pcie_delay_s:
            time.sleep(self.pcie_delay_s)  # the real call blocks for its 20 ms window
        if counter == NVML_PCIE_UTIL_RX_BYTES:
            return gpu.pcie_rx_kib_s
        if counter == NVML_PCIE_UTIL_TX_BYTES:
            return gpu.pcie_tx_kib_s
        raise nvml_error(NVML_ERROR_INVALID_ARGUMENT)

    def nvmlDeviceGetFieldValues(self, h: _Handle, field_ids: list[Any]) -> list[SimpleNamespace]:
        gpu = self._gpu("nvmlDeviceGetFieldValues", h)
        now = self.clock()
        out = []
        for item in field_ids:
            field_id, scope = item if isinstance(item, tuple) else (item, 0)
            value = SimpleNamespace(ullVal=0, uiVal=0)
            ret = NVML_SUCCESS
            value_type = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
            if gpu.nvlink_total_links == 0:
                ret = NVML_ERROR_NOT_SUPPORTED
            elif field_id == NVML_FI_DEV_NVLINK_LINK_COUNT:
                value.uiVal = value.ullVal = gpu.nvlink_total_links
                value_type = NVML_VALUE_TYPE_UNSIGNED_INT
            elif field_id in (
                NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX,
                NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX,
            ):
                if not 0 <= scope < gpu.nvlink_total_links:
                    ret = NVML_ERROR_INVALID_ARGUMENT
                elif scope < gpu.nvlink_active_links:
                    rate = (
                        gpu.nvlink_tx_kib_s_per_link
                        if field_id == NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX
                        else gpu.nvlink_rx_kib_s_per_link
                    )
                    value.ullVal = int(rate * now)  # a cumulative KiB counter
            else:
                ret = NVML_ERROR_NOT_SUPPORTED
            out.append(
                SimpleNamespace(
                    fieldId=field_id,
                    scopeId=scope,
                    timestamp=int(now * 1e6),
                    latencyUsec=0,
                    valueType=value_type,
                    nvmlReturn=ret,
                    value=value,
                )
            )
        return out

    def nvmlDeviceGetComputeRunningProcesses(self, h: _Handle) -> list[SimpleNamespace]:
        gpu = self._gpu("nvmlDeviceGetComputeRunningProcesses", h)
        return [
            SimpleNamespace(pid=pid, usedGpuMemory=None if gpu.mig else used)
            for pid, used in gpu.processes
        ]

    # -- GPM (Hopper+) ----------------------------------------------------

    def nvmlGpmQueryDeviceSupport(self, h: _Handle) -> SimpleNamespace:
        gpu = self._gpu("nvmlGpmQueryDeviceSupport", h)
        return SimpleNamespace(version=1, isSupportedDevice=1 if gpu.gpm else 0)

    def nvmlGpmSampleAlloc(self) -> _GpmSample:
        self._enter("nvmlGpmSampleAlloc")
        return _GpmSample()

    def nvmlGpmSampleFree(self, sample: _GpmSample) -> None:
        self._enter("nvmlGpmSampleFree")
        sample.freed = True

    def nvmlGpmSampleGet(self, h: _Handle, sample: _GpmSample) -> _GpmSample:
        gpu = self._gpu("nvmlGpmSampleGet", h)
        if not gpu.gpm:
            raise nvml_error(NVML_ERROR_NOT_SUPPORTED)
        sample.handle = h
        sample.time_s = self.clock()
        return sample

    def nvmlGpmMetricsGet(self, request: c_nvmlGpmMetricsGet_t) -> c_nvmlGpmMetricsGet_t:
        self._enter("nvmlGpmMetricsGet")
        s1, s2 = request.sample1, request.sample2
        if (
            not isinstance(s1, _GpmSample)
            or not isinstance(s2, _GpmSample)
            or s1.handle is None
            or s2.handle is None
            or s1.handle.index != s2.handle.index
            or s1.freed
            or s2.freed
        ):
            raise nvml_error(NVML_ERROR_INVALID_ARGUMENT)
        gpu = self._gpu("nvmlGpmMetricsGet", s1.handle)
        values = {
            NVML_GPM_METRIC_SM_UTIL: self._wave(gpu, gpu.gpm_sm_util, 25, 0, 100),
            NVML_GPM_METRIC_ANY_TENSOR_UTIL: self._wave(gpu, gpu.gpm_tensor_util, 20, 0, 100),
            NVML_GPM_METRIC_DRAM_BW_UTIL: self._wave(gpu, gpu.gpm_dram_bw, 20, 0, 100),
        }
        for metric in request.metrics[: request.numMetrics]:
            if metric.metricId in values:
                metric.value = values[metric.metricId]
                metric.nvmlReturn = NVML_SUCCESS
            else:
                metric.nvmlReturn = NVML_ERROR_NOT_SUPPORTED
        return request


SWITCH_BUS_IDS = [f"00000000:{0x05 + s:02X}:00.0" for s in range(4)]
"""PCI bus ids of the stand-in NVSwitches."""


def bus_id_of(index: int) -> str:
    """The stand-in PCI bus id of GPU ``index`` (``00000000:18:00.0``, ...)."""
    return f"00000000:{0x18 + 0x10 * index:02X}:00.0"


def _pci_info(bus_id: str) -> SimpleNamespace:
    """Like pynvml's ``nvmlPciInfo_t``: ``busId`` bytes and the numbers."""
    domain, bus, rest = bus_id.split(":")
    return SimpleNamespace(
        busId=bus_id.encode(),
        domain=int(domain, 16),
        bus=int(bus, 16),
        device=int(rest.split(".")[0], 16),
    )


def _ancestors(n: int, level: Callable[[int, int], int]) -> dict[tuple[int, int], int]:
    return {(a, b): level(a, b) for a in range(n) for b in range(a + 1, n)}


def _socket_level(a: int, b: int, per_socket: int) -> int:
    return NVML_TOPOLOGY_NODE if a // per_socket == b // per_socket else NVML_TOPOLOGY_SYSTEM


def _pcie_gpu(name: str, index: int, pcie_gen: int) -> FakeGpu:
    """A PCIe card without NVLink or GPM."""
    return FakeGpu(
        name=name,
        uuid=f"GPU-{index:08x}-pcie",
        memory_total_bytes=48 * GiB,
        pcie_gen=pcie_gen,
        pcie_max_gen=pcie_gen,
        nvlink_total_links=0,
        nvlink_active_links=0,
        gpm=False,
        power_mw=280_000,
        power_limit_mw=350_000,
    )


SCENARIOS: dict[str, Callable[..., FakeNvml]] = {
    "h100-box": FakeNvml.h100_box,
    "not-supported": FakeNvml.not_supported,
    "no-driver": FakeNvml.no_driver,
    "library-missing": FakeNvml.library_missing,
    "version-mismatch": FakeNvml.version_mismatch,
    "no-permission": FakeNvml.no_permission,
    "no-gpus": FakeNvml.no_gpus,
    "lost-gpu": FakeNvml.lost_gpu,
    "mig": FakeNvml.mig,
    "container-pids": FakeNvml.container_pids,
    "pcie-two-sockets": FakeNvml.pcie_two_sockets,
    "pcie-one-switch": FakeNvml.pcie_one_switch,
    "nvlink-bridge": FakeNvml.nvlink_bridge,
    "topology-not-supported": FakeNvml.topology_not_supported,
}
