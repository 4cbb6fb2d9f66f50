"""What the parent checks before the trainer starts (issue 19): --gpus and a
GPU-only all-reduce on a machine without those GPUs, a --model module that
cannot be found. One line, exit 2, no trainer process, no TensorFlow."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import pytest
from fake_nvml import FakeNvml

import gpuscale.telemetry.nvml as nvml
import gpuscale.trainer.preflight as preflight
from gpuscale.errors import GpuscaleError
from gpuscale.trainer.preflight import check_machine, check_model_module


def _probe(scenario: str, **kwargs):
    return functools.partial(nvml.probe, FakeNvml.scenario(scenario, **kwargs))


@pytest.fixture
def no_driver(monkeypatch):
    monkeypatch.setattr(preflight, "_nvidia_driver_loaded", lambda: False)
    return _probe("no-driver")


def test_gpus_and_gpu_only_all_reduce_are_refused_without_a_gpu(no_driver):
    with pytest.raises(GpuscaleError, match=r"--gpus: this machine has no NVIDIA GPU.*--devices N"):
        check_machine(model="mlp", gpus=[0, 2], all_reduce="auto", probe=no_driver)
    for choice in ("nccl", "hierarchical-copy"):
        # every choice that runs on CPU is named, collective too
        hint = "on CPU logical devices use collective, reduce-to-one or auto"
        with pytest.raises(GpuscaleError, match=f"--all-reduce {choice} needs GPUs.*{hint}"):
            check_machine(model="mlp", gpus=None, all_reduce=choice, probe=no_driver)
    check_machine(model="mlp", gpus=None, all_reduce="reduce-to-one", probe=no_driver)


def test_gpus_that_do_not_exist_are_named():
    box = _probe("h100-box", n=2)
    with pytest.raises(GpuscaleError, match=r"no GPU 2 on this machine \(its GPUs: 0, 1\)"):
        check_machine(model="mlp", gpus=[0, 2], all_reduce="nccl", probe=box)
    check_machine(model="mlp", gpus=[1], all_reduce="nccl", probe=box)


def test_when_it_cannot_tell_it_leaves_the_answer_to_the_trainer(monkeypatch):
    """NVML missing where an NVIDIA driver is loaded: never refuse a run that may work."""
    monkeypatch.setattr(preflight, "_nvidia_driver_loaded", lambda: True)
    check_machine(model="mlp", gpus=[0], all_reduce="nccl", probe=_probe("library-missing"))


def test_gpu_checks_ask_nvml_only_when_the_configuration_needs_a_gpu():
    def never():
        raise AssertionError("NVML asked for a CPU configuration")

    check_machine(model="mnist-cnn", gpus=None, all_reduce="auto", probe=never)


def test_a_model_module_is_found_without_importing_it(tmp_path, monkeypatch):
    package = tmp_path / "mypkg"
    package.mkdir()
    (package / "__init__.py").write_text("raise RuntimeError('imported')\n")
    (package / "models.py").write_text("def build(): pass\n")
    (tmp_path / "flat.py").write_text("raise RuntimeError('imported')\ndef build(): pass\n")
    monkeypatch.chdir(tmp_path)
    check_model_module("mypkg.models:build")
    check_model_module("flat:build")
    check_model_module("json:loads")  # the standard library
    assert "mypkg" not in sys.modules and "flat" not in sys.modules
    with pytest.raises(GpuscaleError, match=r"--model nonexist:foo: cannot find module 'nonexist'"):
        check_model_module("nonexist:foo")
    with pytest.raises(GpuscaleError, match="cannot find module 'mypkg.nothing'"):
        check_model_module("mypkg.nothing:build")
    with pytest.raises(GpuscaleError, match="cannot find module 'flat.sub'"):
        check_model_module("flat.sub:build")  # flat is a module, not a package


def test_a_missing_function_is_found_from_the_source_without_running_it(tmp_path, monkeypatch):
    """The module's top level would run (here: raise) on import; its syntax tree
    says whether it binds the function. Where the source cannot tell, no refusal."""
    (tmp_path / "script.py").write_text(
        "raise RuntimeError('ran')\n"
        "import keras as k, os.path\n"
        "from json import loads as parse\n"
        "def build(): pass\n"
        "async def _hidden(): pass\n"
        "class Net: pass\n"
        "try:\n    import fancy\n    made = fancy.make\nexcept ImportError:\n    made = None\n"
        "if True:\n    def later(): pass\n"
        "alias: object = build\n"
        "def setter():\n    global assigned\n    assigned = build\n"
    )
    monkeypatch.chdir(tmp_path)
    for name in ("build", "Net", "made", "later", "alias", "assigned", "parse", "k", "os", "fancy"):
        check_model_module(f"script:{name}")
    assert "script" not in sys.modules
    with pytest.raises(GpuscaleError) as info:
        check_model_module("script:nothing")
    message = str(info.value)
    assert message.startswith(
        "--model script:nothing: module 'script' has no function 'nothing' "
        "(its functions: build, setter; read from "
    )
    assert message.endswith("script.py, not run)") and "\n" not in message
    # what the source cannot rule out is left to the trainer
    for i, dynamic in enumerate(
        [
            "from os.path import *",
            "globals()['nothing'] = print",
            "def __getattr__(name): return print",
            "import sys\nsetattr(sys.modules[__name__], 'nothing', print)",
            "exec('def nothing(): pass')",
            "def broken(:",
        ]
    ):
        (tmp_path / f"dyn{i}.py").write_text(dynamic + "\n")
        check_model_module(f"dyn{i}:nothing")


def test_run_refuses_a_missing_function_of_a_script_in_one_line(monkeypatch, capsys):
    """examples/train_keras.py trains on import: naming a function it lacks is one
    line and exit 2 before any trainer starts, not the script's own error."""
    import gpuscale.live.trainer_run as trainer_run
    from gpuscale.cli import main

    root = Path(__file__).resolve().parent.parent
    monkeypatch.chdir(root)
    monkeypatch.setattr(
        trainer_run.LiveRun, "start", lambda *a, **k: pytest.fail("a trainer was started")
    )
    assert main(["run", "--model", "examples.train_keras:nothing", "--no-record"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(
        "gpuscale: error: --model examples.train_keras:nothing: module 'examples.train_keras' "
        "has no function 'nothing'"
    )
    assert "\n" not in err and "examples.train_keras" not in sys.modules


@pytest.mark.parametrize(
    "argv",
    [
        ["--model", "nonexist:foo"],
        ["--all-reduce", "nccl"],
        ["--gpus", "0,2"],
    ],
)
@pytest.mark.parametrize("command", ["run", "watch"])
def test_run_and_watch_refuse_in_one_line_before_any_trainer_starts(
    command, argv, no_driver, monkeypatch, capsys
):
    import gpuscale.live.trainer_run as trainer_run
    from gpuscale.cli import main

    monkeypatch.setattr(nvml, "probe", lambda: no_driver())

    def no_trainer(*args, **kwargs):
        raise AssertionError("a trainer was started")

    monkeypatch.setattr(trainer_run.LiveRun, "start", no_trainer)
    assert main([command, *argv, "--no-record"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gpuscale: error: ") and "\n" not in err, err


@pytest.mark.parametrize("watch", [[], ["--watch"]], ids=["recommend", "recommend-watch"])
def test_a_live_sweep_refuses_in_one_line_before_any_trainer_starts(
    watch, no_driver, monkeypatch, capsys
):
    import gpuscale.live.trainer_run as trainer_run
    from gpuscale.cli import main

    monkeypatch.setattr(nvml, "probe", lambda: no_driver())
    monkeypatch.setattr(
        trainer_run.LiveRun, "start", lambda *a, **k: pytest.fail("a trainer was started")
    )
    argv = ["recommend", *watch, "--sweep", "1,2", "--model", "nonexist:foo", "--no-record"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gpuscale: error: --model nonexist:foo") and "\n" not in err, err
