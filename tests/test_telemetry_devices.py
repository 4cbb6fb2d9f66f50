"""``gpuscale devices`` with the stand-in NVML; TensorFlow's view from a child process."""

from __future__ import annotations

import json
import sys

import pytest
from fake_nvml import FakeNvml
from rich.console import Console

from gpuscale import cli
from gpuscale.commands import devices
from gpuscale.commands.devices import _MARK, TfDevices, collect, render, tf_devices

CPU_ONLY_TF = TfDevices(
    ok=True,
    version="2.21.0",
    built_with_cuda=False,
    devices=[{"name": "/physical_device:CPU:0", "device_type": "CPU"}],
)


def shown(report) -> str:
    console = Console(width=200, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    render(report, console)
    return console.export_text()


@pytest.fixture
def machine(monkeypatch):
    """Make the command see a stand-in NVML scenario and a given TensorFlow answer."""

    def use(scenario: str, tf: TfDevices = CPU_ONLY_TF):
        monkeypatch.setattr(
            "gpuscale.telemetry.nvml.load_bindings", lambda: FakeNvml.scenario(scenario)
        )
        monkeypatch.setattr(devices, "tf_devices", lambda timeout_s: tf)

    return use


def test_h100_box_table(machine, capsys):
    machine("h100-box")
    assert cli.main(["devices"]) == 0
    out = capsys.readouterr().out
    assert "driver 550.54.15, CUDA 12.4" in out
    assert out.count("NVIDIA H100 80GB HBM3") == 8
    assert "85.9 GB" in out and "gen5 x16" in out and "18 links" in out
    assert "TensorFlow 2.21.0 (built without CUDA) sees: CPU:0" in out
    # NVML sees GPUs, TensorFlow none: say how to fix it (markup must not eat [and-cuda]).
    assert "pip install 'tensorflow[and-cuda]'" in out


def test_no_driver_is_one_sentence_and_exit_0(machine, capsys):
    machine("library-missing")
    assert cli.main(["devices"]) == 0
    out = capsys.readouterr().out
    first = " ".join(out.split("TensorFlow")[0].split())
    assert first == (
        "No NVIDIA driver found (libnvidia-ml.so.1 not found), so runs will use the CPU as "
        f"2 logical CPU devices on {devices.os.cpu_count()} cores (--devices N to change)."
    )
    assert "Warning" not in out


@pytest.mark.parametrize("scenario", ["no-driver", "version-mismatch", "no-permission", "no-gpus"])
def test_other_failures_also_exit_0_with_the_reason(machine, capsys, scenario):
    machine(scenario)
    assert cli.main(["devices", "--no-tf"]) == 0
    out = capsys.readouterr().out
    assert "logical CPU devices" in out
    assert "Traceback" not in out


def test_json(machine, capsys):
    machine("mig")
    assert cli.main(["devices", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["nvml"]["ok"] is True
    assert [d["mig"] for d in data["nvml"]["devices"]] == [True, False]
    assert data["nvml"]["devices"][0]["pcie_gen"] == 5
    assert data["tensorflow"]["devices"][0]["device_type"] == "CPU"
    assert data["cpu_fallback"] is None


def test_json_without_gpu(machine, capsys):
    machine("no-driver")
    assert cli.main(["devices", "--json", "--no-tf"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["nvml"]["reason"] == "driver-not-loaded"
    assert data["tensorflow"] is None
    assert data["cpu_fallback"]["logical_devices"] == 2


def test_not_supported_shows_na_and_none():
    report = collect(nvml=FakeNvml.not_supported(), tf=False)
    text = shown(report)
    assert "GeForce GTX 1080" in text and "gen3 x16" in text and "none" in text


def test_bad_timeout_is_one_line(capsys):
    for value in ("0", "1e308", "nan"):
        assert cli.main(["devices", "--tf-timeout", value]) == 2
        err = capsys.readouterr().err
        assert err.startswith("gpuscale: error: --tf-timeout must be above 0 and at most 3600 s")
        assert err.count("\n") == 1


def test_tf_missing():
    result = tf_devices(10, code="raise ModuleNotFoundError(\"No module named 'tensorflow'\")")
    assert not result.ok and "TensorFlow is not installed" in result.problem


def test_tf_too_slow():
    result = tf_devices(0.3, code="import time; time.sleep(20)")
    assert not result.ok and "did not list its devices within 0.3 s" in result.problem


def test_tf_failing():
    result = tf_devices(10, code="import sys; sys.exit('CUDA init exploded')")
    assert not result.ok and result.problem.endswith("CUDA init exploded")


def test_tf_python_missing():
    result = tf_devices(10, python="/nonexistent/python")
    assert not result.ok and "could not start" in result.problem


def test_tf_answer_is_parsed():
    payload = {
        "version": "9.9",
        "built_with_cuda": True,
        "cuda_version": "12.5",
        "devices": [{"name": "/physical_device:GPU:0", "device_type": "GPU"}],
    }
    code = f"print('noise'); print({_MARK!r} + {json.dumps(json.dumps(payload))})"
    result = tf_devices(10, code=code)
    assert result.ok and result.devices[0]["device_type"] == "GPU"
    report = collect(nvml=FakeNvml.h100_box(1), tf=False)
    report.tensorflow = result
    text = shown(report)
    assert "TensorFlow 9.9 (built with CUDA 12.5) sees: GPU:0" in text
    assert "Warning" not in text


def test_parent_never_imports_tensorflow():
    """`gpuscale devices` asks a child process for TensorFlow's view; its own process
    never imports TensorFlow. Checked in a fresh interpreter (the test process may
    hold TensorFlow from a `tf` test), with the stand-in NVML and the child's answer."""
    import subprocess
    from pathlib import Path

    code = (
        "import sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from fake_nvml import FakeNvml\n"
        "import gpuscale.telemetry.nvml as nvml\n"
        "nvml.load_bindings = lambda: FakeNvml.scenario('h100-box')\n"
        "from gpuscale import cli\n"
        "from gpuscale.commands import devices\n"
        "devices.tf_devices = lambda timeout_s: devices.TfDevices(ok=True, version='2.21.0',"
        " built_with_cuda=False, devices=[])\n"
        "assert cli.main(['devices', '--json']) == 0\n"
        "assert 'tensorflow' not in sys.modules, 'imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert '"nvml"' in done.stdout


@pytest.mark.tf
def test_real_tensorflow_child_lists_the_cpu():
    result = tf_devices(120)
    assert result.ok, result.problem
    assert any(d["device_type"] == "CPU" for d in result.devices)
    assert result.version and result.version[0].isdigit()


def test_topology_matrix_and_best_gpus(machine, capsys):
    machine("pcie-two-sockets")
    assert cli.main(["devices", "--no-tf"]) == 0
    out = capsys.readouterr().out
    assert "GPU topology (as nvidia-smi topo -m)" in out
    rows = [line for line in out.splitlines() if line.startswith("│ GPU")]
    assert rows[0].split("│")[2:10] == [
        f" {c:^4} " for c in ("X", "PIX", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS")
    ]
    assert "Legend: NV# = # NVLink links" in " ".join(out.split())
    assert "All 8 GPUs: across CPU sockets, PCIe 4.0 x16: 31.5 GB/s per direction" in out
    best = {
        cells[1].strip(): cells[2].strip()
        for line in out.splitlines()
        if line.startswith("│ ") and (cells := line.split("│"))[1].strip().isdigit()
    }
    assert best["2"] == "0,1" and best["4"] == "0,1,2,3" and best["7"] == "0,1,2,3,4,5,6"


def test_nvswitch_and_bridge_codes():
    text = shown(collect(nvml=FakeNvml.scenario("h100-box"), tf=False))
    assert text.count("NV18") == 56 and "All 8 GPUs: NVSwitch, NVLink x18: 450.0 GB/s" in text
    text = shown(collect(nvml=FakeNvml.scenario("nvlink-bridge"), tf=False))
    assert text.count("NV4") == 2 and "not known" in text


def test_topology_not_supported_is_one_line():
    text = shown(collect(nvml=FakeNvml.scenario("topology-not-supported"), tf=False))
    assert "GPU topology: not reported by NVML (driver or GPUs do not support it)." in text
    assert "Best GPUs" not in text


def test_one_gpu_shows_no_topology():
    text = shown(collect(nvml=FakeNvml.not_supported(), tf=False))
    assert "topology" not in text.lower()


def test_topology_json(machine, capsys):
    machine("nvlink-bridge")
    assert cli.main(["devices", "--json", "--no-tf"]) == 0
    data = json.loads(capsys.readouterr().out)
    pair = data["topology"]["pairs"][0]
    assert (pair["a"], pair["b"], pair["nvlinks"], pair["pcie"]) == (0, 1, 4, "node")
    assert data["all_gpus"]["link_class"] == "pcie-hostbridge"
    assert data["best_gpus"][1] == {
        "devices": 2,
        "gpus": [0, 1],
        "link_class": "nvlink",
        "peak_bytes_s": None,
        "description": "NVLink x4 (rate not known)",
    }


def test_no_gpu_json_has_no_topology(machine, capsys):
    machine("library-missing")
    assert cli.main(["devices", "--json", "--no-tf"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["topology"] is None and data["best_gpus"] == []
