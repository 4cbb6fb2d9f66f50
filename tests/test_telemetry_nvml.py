"""The NVML choke point and probe, against the stand-in NVML (never the real one)."""

from __future__ import annotations

import sys

import pynvml  # the bindings module only: its constants, never a call into NVML
import pytest
from fake_nvml import SCENARIOS, FakeNvml, nvml_error

from gpuscale.telemetry import nvml as tnvml
from gpuscale.telemetry.nvml import GpuLostError, Nvml, probe, throttle_names


def test_stand_in_constants_equal_the_real_bindings():
    import fake_nvml

    names = [n for n in dir(fake_nvml) if n.startswith(("NVML_", "nvmlClocksEventReason"))]
    assert len(names) > 30
    for name in names:
        if hasattr(pynvml, name):
            assert getattr(fake_nvml, name) == getattr(pynvml, name), name
    # The field ids the sampler needs exist in the real bindings.
    for name in (
        "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX",
        "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX",
        "NVML_FI_DEV_NVLINK_LINK_COUNT",
        "NVML_GPM_METRIC_SM_UTIL",
        "NVML_GPM_METRIC_ANY_TENSOR_UTIL",
        "NVML_GPM_METRIC_DRAM_BW_UTIL",
    ):
        assert hasattr(pynvml, name), name
    # Every function the stand-in offers exists in the real bindings.
    for name in dir(FakeNvml):
        if name.startswith("nvml"):
            assert callable(getattr(pynvml, name, None)), name
    assert hasattr(pynvml, "c_nvmlGpmMetricsGet_t")


def test_healthy_h100_box():
    result = probe(FakeNvml.h100_box(8))
    assert result.ok and result.reason == "ok"
    assert result.status == "NVML: 8 GPUs, driver 550.54.15, CUDA 12.4"
    assert result.driver_version == "550.54.15"
    assert result.cuda_version == "12.4"
    assert [d.index for d in result.devices] == list(range(8))
    first = result.devices[0]
    assert first.name == "NVIDIA H100 80GB HBM3"
    assert first.memory_total_bytes == 80 * 1024**3
    assert (first.pcie_gen, first.pcie_width, first.pcie_max_gen, first.pcie_max_width) == (
        5,
        16,
        5,
        16,
    )
    assert first.nvlink_links == 18
    assert first.mig is False
    assert len({d.uuid for d in result.devices}) == 8


def test_probe_shuts_nvml_down():
    fake = FakeNvml.h100_box(2)
    probe(fake)
    assert fake.init_count == 1 and fake.shutdown_count == 1


@pytest.mark.parametrize(
    ("scenario", "reason", "words"),
    [
        ("no-driver", "driver-not-loaded", "driver not loaded"),
        ("library-missing", "no-library", "No NVIDIA driver found"),
        ("version-mismatch", "version-mismatch", "version mismatch"),
        ("no-permission", "no-permission", "No permission"),
        ("no-gpus", "no-gpus", "no NVIDIA GPUs found"),
    ],
)
def test_every_failure_is_one_status_line(scenario, reason, words):
    fake = FakeNvml.scenario(scenario)
    result = probe(fake)
    assert not result.ok
    assert result.reason == reason
    assert words in result.status
    assert result.status.endswith("host samples only")
    assert "\n" not in result.status
    assert result.devices == []
    assert not fake.initialized  # nothing left open


def test_bindings_not_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` fail
    assert tnvml.load_bindings() is None
    result = probe()
    assert not result.ok and result.reason == "no-bindings"
    assert "pip install nvidia-ml-py" in result.status


def test_unexpected_init_error_is_reported_not_raised():
    fake = FakeNvml([], init_error=999)
    result = probe(fake)
    assert not result.ok and result.reason == "error"
    assert "Unknown Error" in result.status


def test_init_raising_a_non_nvml_exception():
    class Broken(FakeNvml):
        def nvmlInit(self):
            raise OSError("libnvidia-ml.so.1: cannot open shared object file")

    result = probe(Broken([]))
    assert result.reason == "error" and "cannot open" in result.status


def test_count_refused_for_permission():
    fake = FakeNvml.h100_box(2)

    def refuse():
        raise nvml_error(4)

    fake.nvmlDeviceGetCount = refuse
    result = probe(fake)
    assert result.reason == "no-permission"
    assert not fake.initialized


def test_not_supported_fields_are_none():
    result = probe(FakeNvml.not_supported())
    assert result.ok
    (gpu,) = result.devices
    assert gpu.name == "NVIDIA GeForce GTX 1080"
    assert gpu.nvlink_links == 0  # no NVLink: 0, not an error
    assert gpu.mig is False  # MIG mode query unsupported -> not MIG
    assert result.cuda_version == "12.4"  # fell back from the absent _v2 function


def test_mig_device_is_marked():
    result = probe(FakeNvml.mig())
    assert result.ok
    assert [d.mig for d in result.devices] == [True, False]
    assert "MIG on GPU 0" in result.status


def test_a_gpu_lost_before_the_probe_is_named():
    fake = FakeNvml.h100_box(3)
    fake.lose(1)
    result = probe(fake)
    assert result.ok
    assert [d.index for d in result.devices] == [0, 2]
    assert "GPU 1 not answering" in result.status


def test_all_gpus_lost():
    fake = FakeNvml.h100_box(1)
    fake.lose(0)
    result = probe(fake)
    assert not result.ok and result.reason == "no-gpus"
    assert "none answers" in result.status


def test_query_returns_default_for_every_kind_of_failure():
    fake = FakeNvml.not_supported()
    fake.nvmlInit()
    lib = Nvml(fake)
    handle = lib.query("nvmlDeviceGetHandleByIndex", 0)
    assert lib.query("nvmlDeviceGetPowerUsage", handle) is None  # NotSupported
    assert lib.query("nvmlDeviceGetCurrentClocksEventReasons", handle) is None  # FunctionNotFound
    assert lib.query("nvmlGpmSampleAlloc") is None  # absent from the bindings
    assert lib.query("nvmlNoSuchFunction", default="n/a") == "n/a"
    assert lib.query("nvmlDeviceGetTemperature", handle, 99) is None  # InvalidArgument
    assert lib.query("nvmlDeviceGetTemperature", handle, 0) == 63
    assert "Not Supported" in lib.failures["nvmlDeviceGetPowerUsage"]
    # The deprecated name answers where the new one is missing from the driver.
    mask = lib.query_first(
        ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"),
        handle,
    )
    assert mask == 0x004
    lib.close()
    lib.close()  # idempotent
    assert fake.shutdown_count == 1
    assert lib.query("nvmlDeviceGetCount") is None  # after shutdown: Uninitialized -> None


def test_query_raises_only_for_a_lost_gpu():
    fake = FakeNvml.h100_box(2)
    fake.nvmlInit()
    lib = Nvml(fake)
    handle = lib.query("nvmlDeviceGetHandleByIndex", 1)
    fake.lose(1)
    with pytest.raises(GpuLostError):
        lib.query("nvmlDeviceGetUtilizationRates", handle)


def test_query_survives_an_exception_whose_str_fails():
    class Nasty(Exception):
        value = 3

        def __str__(self):
            raise RuntimeError("str() calls into NVML")

    fake = FakeNvml.h100_box(1)

    def boom(*args):
        raise Nasty()

    fake.nvmlDeviceGetName = boom
    fake.nvmlInit()
    lib = Nvml(fake)
    assert lib.query("nvmlDeviceGetName", object()) is None
    assert lib.failures["nvmlDeviceGetName"] == "Nasty"


def test_throttle_names():
    assert throttle_names(None) is None
    assert throttle_names(0) == []
    assert throttle_names(0x001 | 0x004 | 0x040) == ["gpu_idle", "sw_power_cap", "hw_thermal"]
    assert throttle_names(0x10000) == ["other_0x10000"]


def test_cuda_version_format():
    assert tnvml.format_cuda_version(12040) == "12.4"
    assert tnvml.format_cuda_version(11080) == "11.8"
    assert tnvml.format_cuda_version(None) is None
    assert tnvml.format_cuda_version(0) is None


def test_every_scenario_probes_without_raising():
    for name in SCENARIOS:
        result = probe(FakeNvml.scenario(name))
        assert result.status
    with pytest.raises(ValueError, match="unknown scenario"):
        FakeNvml.scenario("nope")


def test_field_value_reads_the_member_its_type_names():
    from types import SimpleNamespace

    union = SimpleNamespace(dVal=1.5, uiVal=7, ulVal=8, ullVal=2**40, sllVal=-3, siVal=-4, usVal=9)
    assert tnvml.field_value(SimpleNamespace(nvmlReturn=0, valueType=0, value=union)) == 1.5
    assert tnvml.field_value(SimpleNamespace(nvmlReturn=0, valueType=1, value=union)) == 7
    assert tnvml.field_value(SimpleNamespace(nvmlReturn=0, valueType=3, value=union)) == 2**40
    assert tnvml.field_value(SimpleNamespace(nvmlReturn=0, valueType=4, value=union)) == -3
    assert tnvml.field_value(SimpleNamespace(nvmlReturn=3, valueType=3, value=union)) is None
    assert tnvml.field_value(None) is None


def test_field_value_on_the_real_ctypes_struct():
    """The real bindings' struct, filled by hand (no NVML call)."""
    field = pynvml.c_nvmlFieldValue_t()
    field.nvmlReturn = 0
    field.valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
    field.value.uiVal = 18
    assert tnvml.field_value(field) == 18
    field.valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
    field.value.ullVal = 5 * 2**33
    assert tnvml.field_value(field) == 5 * 2**33
