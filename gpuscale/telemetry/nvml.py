"""The one choke point for NVML calls, and the probe that says what NVML sees.

Every NVML call in gpuscale goes through :meth:`Nvml.query`. A value the device
does not support (``NotSupported``), a function the driver or the bindings lack
(``FunctionNotFound``, a missing attribute), a field with no data, or any other
NVML error becomes the default (``None``, shown "n/a"), never an exception. The
one exception that leaves the choke point is :class:`GpuLostError`, raised when
NVML says the GPU fell off the bus (``GpuIsLost``): the sampler marks that GPU
lost and goes on with the others.

The library is NVIDIA's own bindings, the ``pynvml`` module of the
``nvidia-ml-py`` package. Tests inject a stand-in module (``nvml=``) that
offers the same functions, constants and exception classes.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterable
from types import ModuleType
from typing import Any, Literal

import msgspec

from gpuscale.events.schema import DeviceInfo

# NVML return codes (part of NVML's ABI; read from the module when it has them).
_ERR_NOT_SUPPORTED = 3
_ERR_NO_PERMISSION = 4
_ERR_DRIVER_NOT_LOADED = 9
_ERR_LIBRARY_NOT_FOUND = 12
_ERR_FUNCTION_NOT_FOUND = 13
_ERR_GPU_IS_LOST = 15
_ERR_LIB_RM_VERSION_MISMATCH = 18

# Clock event ("throttle") reason bits, NVML's nvmlClocksEventReason* values.
THROTTLE_REASON_BITS: dict[int, str] = {
    0x001: "gpu_idle",
    0x002: "applications_clocks",
    0x004: "sw_power_cap",
    0x008: "hw_slowdown",
    0x010: "sync_boost",
    0x020: "sw_thermal",
    0x040: "hw_thermal",
    0x080: "hw_power_brake",
    0x100: "display_clocks",
    0x200: "board_limit",
    0x400: "reliability",
}

ProbeReason = Literal[
    "ok",
    "no-bindings",
    "no-library",
    "driver-not-loaded",
    "version-mismatch",
    "no-permission",
    "no-gpus",
    "error",
]

HOST_ONLY = "host samples only"


class GpuLostError(Exception):
    """NVML reported ``GpuIsLost`` for a device: it fell off the bus."""


class NvmlProbe(msgspec.Struct, kw_only=True):
    """What NVML sees on this machine, and one line that says so."""

    ok: bool
    """NVML initialised and found at least one GPU."""
    status: str
    """One line for humans, e.g. ``NVML: 8 GPUs, driver 550.54.15, CUDA 12.4``."""
    reason: ProbeReason = "ok"
    """Machine-readable cause when not ``ok``."""
    driver_version: str | None = None
    cuda_version: str | None = None
    """The CUDA version the driver supports, e.g. ``12.4``."""
    devices: list[DeviceInfo] = []


def load_bindings() -> ModuleType | None:
    """The ``pynvml`` module from nvidia-ml-py, or ``None`` when not installed."""
    try:
        return importlib.import_module("pynvml")
    except Exception:  # ImportError, or a broken install
        return None


def throttle_names(mask: int | None) -> list[str] | None:
    """Decode NVML's clock event reason bit mask into names (``[]``: none active)."""
    if mask is None:
        return None
    names = [name for bit, name in THROTTLE_REASON_BITS.items() if mask & bit]
    unknown = mask & ~sum(THROTTLE_REASON_BITS)
    if unknown:
        names.append(f"other_0x{unknown:x}")
    return names


def format_cuda_version(value: int | None) -> str | None:
    """NVML's CUDA driver version integer (``12040``) as ``"12.4"``."""
    if not isinstance(value, int) or value <= 0:
        return None
    return f"{value // 1000}.{(value % 1000) // 10}"


class Nvml:
    """An initialised NVML library behind one choke point.

    Use :func:`open_nvml` to get one; :meth:`close` shuts NVML down (NVML counts
    initialisations, so several ``Nvml`` objects may coexist).
    """

    def __init__(self, module: Any):
        self.module = module
        self._closed = False
        self._lock = threading.Lock()
        self.failures: dict[str, str] = {}
        """Function name -> the last NVML error it returned (for diagnostics)."""
        self._codes = {
            "not_supported": getattr(module, "NVML_ERROR_NOT_SUPPORTED", _ERR_NOT_SUPPORTED),
            "function_not_found": getattr(
                module, "NVML_ERROR_FUNCTION_NOT_FOUND", _ERR_FUNCTION_NOT_FOUND
            ),
            "gpu_is_lost": getattr(module, "NVML_ERROR_GPU_IS_LOST", _ERR_GPU_IS_LOST),
        }

    def constant(self, name: str, default: Any = None) -> Any:
        """A constant of the bindings (a field id, an enum value), or ``default``."""
        return getattr(self.module, name, default)

    def has(self, name: str) -> bool:
        """Whether the bindings offer the function ``name``."""
        return callable(getattr(self.module, name, None))

    def query(self, name: str, *args: Any, default: Any = None) -> Any:
        """Call ``pynvml.<name>(*args)``; ``default`` on any failure except a lost GPU.

        Raises :class:`GpuLostError` when NVML says ``GpuIsLost``; never anything else.
        """
        fn = getattr(self.module, name, None)
        if fn is None:
            self.failures[name] = "not in the NVML bindings"
            return default
        try:
            return fn(*args)
        except Exception as exc:
            code = getattr(exc, "value", None)
            if code == self._codes["gpu_is_lost"]:
                raise GpuLostError(f"{name}: GPU is lost") from None
            self.failures[name] = _error_text(exc)
            return default

    def query_first(self, names: Iterable[str], *args: Any, default: Any = None) -> Any:
        """The first of several equivalent functions (new name, deprecated name) that answers."""
        for name in names:
            value = self.query(name, *args, default=None)
            if value is not None:
                return value
        return default

    def close(self) -> None:
        """Shut NVML down (once)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self.module.nvmlShutdown()
        except Exception:
            pass


def _error_text(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:  # pynvml's __str__ may itself call into NVML
        text = ""
    return text or type(exc).__name__


def _failed_init(reason: ProbeReason, detail: str) -> NvmlProbe:
    messages = {
        "no-bindings": "NVML bindings not installed (pip install nvidia-ml-py)",
        "no-library": "No NVIDIA driver found (libnvidia-ml.so.1 not found)",
        "driver-not-loaded": (
            "NVIDIA driver not loaded (NVML: Driver Not Loaded; check 'nvidia-smi')"
        ),
        "version-mismatch": (
            "NVIDIA driver/library version mismatch (the kernel module and "
            "libnvidia-ml differ; reboot or reload the nvidia module)"
        ),
        "no-permission": (
            "No permission to use NVML (Insufficient Permissions; check access to /dev/nvidia*)"
        ),
        "error": f"NVML failed to start ({detail})",
    }
    return NvmlProbe(ok=False, reason=reason, status=f"{messages[reason]}: {HOST_ONLY}")


def open_nvml(nvml: Any = None) -> tuple[Nvml | None, NvmlProbe]:
    """Initialise NVML and describe its devices.

    Returns ``(Nvml, probe)`` when NVML started (even with no GPUs: then the caller
    should close it), else ``(None, probe)`` with the reason in ``probe.status``.
    Never raises.
    """
    module = nvml if nvml is not None else load_bindings()
    if module is None:
        return None, _failed_init("no-bindings", "")
    try:
        module.nvmlInit()
    except Exception as exc:
        code = getattr(exc, "value", None)
        reasons: dict[int, ProbeReason] = {
            getattr(module, "NVML_ERROR_LIBRARY_NOT_FOUND", _ERR_LIBRARY_NOT_FOUND): "no-library",
            getattr(
                module, "NVML_ERROR_DRIVER_NOT_LOADED", _ERR_DRIVER_NOT_LOADED
            ): "driver-not-loaded",
            getattr(
                module, "NVML_ERROR_LIB_RM_VERSION_MISMATCH", _ERR_LIB_RM_VERSION_MISMATCH
            ): "version-mismatch",
            getattr(module, "NVML_ERROR_NO_PERMISSION", _ERR_NO_PERMISSION): "no-permission",
        }
        reason = reasons.get(code, "error") if isinstance(code, int) else "error"
        if reason == "error" and type(exc).__name__ == "NVMLLibraryMismatchError":
            reason = "version-mismatch"
        return None, _failed_init(reason, _error_text(exc))
    lib = Nvml(module)
    driver = lib.query("nvmlSystemGetDriverVersion")
    driver = _text(driver)
    cuda = format_cuda_version(
        lib.query_first(("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"))
    )
    count = lib.query("nvmlDeviceGetCount")
    if count is None:
        detail = lib.failures.get("nvmlDeviceGetCount", "")
        lowered = detail.lower()
        if "permission" in lowered:
            probe = _failed_init("no-permission", detail)
        else:
            probe = _failed_init("error", f"cannot count GPUs: {detail}")
        lib.close()
        return None, probe
    devices: list[DeviceInfo] = []
    lost: list[int] = []
    for index in range(count):
        try:
            handle = lib.query("nvmlDeviceGetHandleByIndex", index)
            if handle is None:
                lost.append(index)
                continue
            devices.append(describe_device(lib, index, handle))
        except GpuLostError:
            lost.append(index)
    version = f"driver {driver or 'n/a'}" + (f", CUDA {cuda}" if cuda else "")
    if not devices:
        status = f"NVML: no NVIDIA GPUs found ({version}): {HOST_ONLY}"
        if lost:
            status = f"NVML: {count} GPU(s) but none answers ({version}): {HOST_ONLY}"
        return lib, NvmlProbe(
            ok=False,
            reason="no-gpus",
            status=status,
            driver_version=driver,
            cuda_version=cuda,
        )
    plural = "GPU" if len(devices) == 1 else "GPUs"
    status = f"NVML: {len(devices)} {plural}, {version}"
    mig = [d.index for d in devices if d.mig]
    if mig:
        status += f"; MIG on GPU {', '.join(map(str, mig))} (utilization n/a there)"
    if lost:
        status += f"; GPU {', '.join(map(str, lost))} not answering"
    return lib, NvmlProbe(
        ok=True, status=status, driver_version=driver, cuda_version=cuda, devices=devices
    )


def probe(nvml: Any = None) -> NvmlProbe:
    """What NVML sees (starts NVML, describes the GPUs, shuts NVML down). Never raises."""
    lib, result = open_nvml(nvml)
    if lib is not None:
        lib.close()
    return result


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return str(value)


def active_nvlinks(lib: Nvml, handle: Any) -> list[int]:
    """Indices of the device's active NVLink links (``[]``: none, or no NVLink)."""
    max_links = lib.constant("NVML_NVLINK_MAX_LINKS", 18)
    count_field = lib.constant("NVML_FI_DEV_NVLINK_LINK_COUNT")
    if count_field is not None:
        values = lib.query("nvmlDeviceGetFieldValues", handle, [count_field])
        count = _field_int(values[0]) if values else None
        if count is not None:
            max_links = count
    links: list[int] = []
    for link in range(max_links):
        state = lib.query("nvmlDeviceGetNvLinkState", handle, link)
        if state is None:
            if link == 0 or count_field is None:
                break
            continue
        if state:
            links.append(link)
    return links


_VALUE_MEMBERS = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")
"""``nvmlValue_t`` union members, indexed by NVML's ``NVML_VALUE_TYPE_*``."""


def field_value(value: Any) -> float | int | None:
    """The number in one ``nvmlFieldValue_t``: the union member its ``valueType``
    names; ``None`` if NVML returned an error for this field."""
    if value is None or getattr(value, "nvmlReturn", 0) != 0:
        return None
    union = getattr(value, "value", None)
    kind = getattr(value, "valueType", 3)
    member = _VALUE_MEMBERS[kind] if isinstance(kind, int) and 0 <= kind < 7 else "ullVal"
    number = getattr(union, member, None)
    if number is None:
        return None
    return float(number) if member == "dVal" else int(number)


def _field_int(value: Any) -> int | None:
    number = field_value(value)
    return None if number is None else int(number)


def describe_device(lib: Nvml, index: int, handle: Any) -> DeviceInfo:
    """A :class:`DeviceInfo` for one GPU; unsupported properties are ``None``.

    Raises :class:`GpuLostError` if the GPU is lost.
    """
    memory = lib.query("nvmlDeviceGetMemoryInfo", handle)
    mig_mode = lib.query("nvmlDeviceGetMigMode", handle)
    mig_enabled = bool(mig_mode and mig_mode[0] == lib.constant("NVML_DEVICE_MIG_ENABLE", 1))
    return DeviceInfo(
        index=index,
        name=_text(lib.query("nvmlDeviceGetName", handle)) or f"GPU {index}",
        kind="gpu",
        uuid=_text(lib.query("nvmlDeviceGetUUID", handle)),
        memory_total_bytes=getattr(memory, "total", None),
        pcie_gen=lib.query("nvmlDeviceGetCurrPcieLinkGeneration", handle),
        pcie_width=lib.query("nvmlDeviceGetCurrPcieLinkWidth", handle),
        pcie_max_gen=lib.query("nvmlDeviceGetMaxPcieLinkGeneration", handle),
        pcie_max_width=lib.query("nvmlDeviceGetMaxPcieLinkWidth", handle),
        nvlink_links=len(active_nvlinks(lib, handle)),
        mig=mig_enabled,
    )
