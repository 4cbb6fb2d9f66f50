"""`GPUSCALE_DEVICES=N python train.py` (no gpuscale in front): the same CPU-core
check as `--devices`, and one line, not TensorFlow's traceback, for a global batch
that does not split over the replicas (trial 8: `GPUSCALE_DEVICES=5` on 2 cores
ended in `AddN ... [13,28,28,1] != [12,28,28,1]`: Keras's fit splitting a batch of
64 over 5 replicas). The checks are TF-free; two tests run a script in TensorFlow."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from gpuscale.live.devices import (
    ENV_TRACEBACK,
    KERAS_FIRST_BATCH_BUILD,
    env_devices_refusal,
    error_frames,
    uneven_batch_hook,
    uneven_batch_message,
)

TRIAL_ERROR = (
    "{{function_node __wrapped__AddN_N_5_device_/job:localhost/replica:0/task:0/device:CPU:0}} "
    "Inputs to operation AddN of type AddN must have the same size and shape.  Input 0: "
    "[13,28,28,1] != input 4: [12,28,28,1] [Op:AddN] name: "
)
KERAS_FRAME = (
    f"{os.sep}site-packages{os.sep}keras{os.sep}src{os.sep}utils{os.sep}traceback_utils.py"
)
KERAS_TRAINER = os.sep.join(
    ["", "site-packages", "keras", "src", "backend", "tensorflow", "trainer.py"]
)
FIRST_BATCH = [("train.py", "<module>"), (KERAS_TRAINER, KERAS_FIRST_BATCH_BUILD)]
"""The frames of the error Keras's first-batch build raises (file, function)."""


def test_the_env_variable_gets_the_check_devices_gets():
    said = env_devices_refusal(5, cores=2)
    assert said == (
        "GPUSCALE_DEVICES=5 asks for 5 CPU logical devices but this machine has no GPU and "
        "2 CPU cores: devices beyond the cores only wait for one; use at most 2"
    )
    assert env_devices_refusal(2, cores=1) is None  # 2 are always allowed
    assert env_devices_refusal(8, cores=8) is None


def test_an_uneven_split_is_said_in_words():
    line = uneven_batch_message(TRIAL_ERROR, FIRST_BATCH)
    assert line is not None and "\n" not in line
    assert "unevenly over the 5 replicas (13 and 12 samples)" in line
    assert "batch_size that is a multiple of 5" in line


@pytest.mark.parametrize(
    ("error", "frames"),
    [
        (TRIAL_ERROR, [("train.py", "<module>")]),  # not raised in Keras
        # Keras frames, but not its first-batch build: a custom layer's own AddN
        (TRIAL_ERROR, [("train.py", "call"), (KERAS_FRAME, "error_handler")]),
        (TRIAL_ERROR, [(os.sep.join(["", "mine", "trainer.py"]), KERAS_FIRST_BATCH_BUILD)]),
        (TRIAL_ERROR.replace("[12,28,28,1]", "[13,28,28,2]"), FIRST_BATCH),  # not the batch
        ("Inputs to operation MatMul are incompatible", FIRST_BATCH),
    ],
)
def test_other_errors_are_left_alone(error, frames):
    assert uneven_batch_message(error, frames) is None


class InvalidArgumentError(Exception):
    """Stands for tf.errors.InvalidArgumentError (the hook goes by its name)."""


def _raised_in_keras(error: Exception, function: str = KERAS_FIRST_BATCH_BUILD) -> BaseException:
    """``error`` raised in Keras's ``function`` (its first-batch build by default)
    and re-raised with Keras's traceback filtering: the traceback keeps the deepest
    frame alone (TensorFlow's, where the op failed), not Keras's own frames."""
    source = f"def {function}(error):\n    deepest(error)\n"
    keras: dict = {}
    exec(compile(source, KERAS_TRAINER, "exec"), keras)
    tf_code: dict = {}
    exec(compile("def deepest(error):\n    raise error\n", "ops.py", "exec"), tf_code)
    keras["deepest"] = tf_code["deepest"]
    try:
        keras[function](error)
    except Exception as exc:  # noqa: BLE001 - returned to the test
        at = exc.__traceback__
        while at.tb_next is not None:
            at = at.tb_next
        return exc.with_traceback(types.TracebackType(None, at.tb_frame, at.tb_lasti, at.tb_lineno))
    raise AssertionError("not raised")


def test_the_first_batch_build_is_found_behind_kerass_traceback_filtering():
    error = _raised_in_keras(InvalidArgumentError(TRIAL_ERROR))
    at = error.__traceback__
    assert at.tb_next is None and at.tb_frame.f_code.co_name == "deepest"  # filtered
    assert (KERAS_TRAINER, KERAS_FIRST_BATCH_BUILD) in error_frames(error.__traceback__)


def test_the_hook_says_one_line_the_error_and_how_to_see_it_and_hands_on_the_rest(
    capsys, monkeypatch
):
    monkeypatch.delenv(ENV_TRACEBACK, raising=False)
    seen = []
    hook = uneven_batch_hook(lambda *args: seen.append(args))
    error = _raised_in_keras(InvalidArgumentError(TRIAL_ERROR + "\nmore detail"))
    hook(type(error), error, error.__traceback__)
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert lines[0].startswith("gpuscale: error: Keras's fit split the global batch unevenly")
    assert lines[1] == "  InvalidArgumentError: " + TRIAL_ERROR.strip()  # its own first line
    assert lines[2] == "  (GPUSCALE_TRACEBACK=1 shows the whole traceback)"
    assert len(lines) == 3 and not seen
    other = _raised_in_keras(ValueError("something else"))
    hook(type(other), other, other.__traceback__)
    assert seen == [(ValueError, other, other.__traceback__)] and not capsys.readouterr().err


def test_an_addn_mismatch_outside_the_first_batch_build_keeps_its_traceback(capsys):
    """A custom layer's bug (the same AddN error, from another Keras frame) is not
    told to change fit's batch_size: Python's traceback, cause included, as it was."""
    seen = []
    hook = uneven_batch_hook(lambda *args: seen.append(args))
    error = _raised_in_keras(InvalidArgumentError(TRIAL_ERROR), function="call")
    error.__cause__ = KeyError("the layer's own")
    hook(type(error), error, error.__traceback__)
    assert seen == [(InvalidArgumentError, error, error.__traceback__)]
    assert not capsys.readouterr().err


def test_gpuscale_traceback_hands_every_error_on_whole(capsys, monkeypatch):
    monkeypatch.setenv(ENV_TRACEBACK, "1")
    seen = []
    hook = uneven_batch_hook(lambda *args: seen.append(args))
    error = _raised_in_keras(InvalidArgumentError(TRIAL_ERROR))
    hook(type(error), error, error.__traceback__)
    assert seen == [(InvalidArgumentError, error, error.__traceback__)]
    assert not capsys.readouterr().err


def test_the_installed_keras_still_builds_its_first_batch_where_the_hook_looks():
    """The hook speaks only for ``_maybe_symbolic_build``: should Keras rename it, the
    hook would fall silent (tracebacks as before), and this says so. Read from the
    source, not imported (no TensorFlow in this process)."""
    spec = importlib.util.find_spec("keras")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("keras is not installed")
    root = Path(next(iter(spec.submodule_search_locations)))
    trainer = root / "src" / "backend" / "tensorflow" / "trainer.py"
    assert f"def {KERAS_FIRST_BATCH_BUILD}(" in trainer.read_text(encoding="utf-8")


def _script(code: str, devices: int, **extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUSCALE_", "TF_CONFIG"))}
    env.update(
        {"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": "", "GPUSCALE_DEVICES": str(devices)}
    )
    env.update(extra)
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.tf
def test_too_many_cpu_devices_are_refused_in_one_line():
    n = max(2, os.cpu_count() or 1) + 1
    proc = _script("import gpuscale.keras", n)
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("gpuscale")]
    assert lines == [
        f"gpuscale: error: GPUSCALE_DEVICES={n} asks for {n} CPU logical devices but this "
        f"machine has no GPU and {os.cpu_count()} CPU cores: devices beyond the cores only "
        f"wait for one; use at most {max(2, os.cpu_count() or 1)}"
    ], proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr


UNEVEN = """
import keras, tensorflow as tf
import gpuscale.keras
strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile("sgd", "mse")
model.fit(tf.zeros((63, 4)), tf.zeros((63, 2)), batch_size=63, epochs=1, verbose=0)
"""


@pytest.mark.tf
def test_a_batch_that_does_not_split_is_one_line_not_a_traceback():
    proc = _script(UNEVEN, 2)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    said = proc.stderr.rstrip().splitlines()[-3:]
    assert said[0] == (
        "gpuscale: error: Keras's fit split the global batch unevenly over the 2 replicas "
        "(32 and 31 samples): under tf.distribute it needs a global batch (fit's batch_size) "
        "divisible by the number of replicas; use a batch_size that is a multiple of 2, or a "
        "device count that divides the batch"
    ), proc.stderr[-3000:]
    assert said[1].startswith("  InvalidArgumentError: ") and "AddN" in said[1]
    assert said[2] == "  (GPUSCALE_TRACEBACK=1 shows the whole traceback)"


@pytest.mark.tf
def test_gpuscale_traceback_shows_the_uneven_batchs_whole_traceback():
    proc = _script(UNEVEN, 2, GPUSCALE_TRACEBACK="1")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback (most recent call last)" in proc.stderr, proc.stderr[-3000:]
    assert "InvalidArgumentError" in proc.stderr and "gpuscale: error:" not in proc.stderr


# GPUSCALE_DEVICES is checked as --devices is (trial: =3 on 2 cores was exit 2, but
# =0 and =abc were ignored with a warning, exit 0, where --devices 0 is exit 2).


class _FakeConfig:
    """Stands for ``tf.config``: ``gpus`` GPUs, one CPU; records what was set up."""

    def __init__(self, gpus: int):
        self.gpus = [f"GPU:{i}" for i in range(gpus)]
        self.visible: list | None = None
        self.logical: list | None = None

    def list_physical_devices(self, kind):
        return list(self.gpus) if kind == "GPU" else ["CPU:0"]

    def set_visible_devices(self, devices, kind):
        self.visible = list(devices)

    def set_logical_device_configuration(self, device, configs):
        self.logical = list(configs)

    @staticmethod
    def LogicalDeviceConfiguration():  # noqa: N802 - TensorFlow's name
        return object()


def _apply_device_request(monkeypatch, environ: dict[str, str], *, gpus: int = 0, cores: int = 2):
    """``gpuscale.keras.devices.apply_device_request`` on a stand-in TensorFlow
    (``gpus`` GPUs, ``cores`` cores): its result and the fake ``tf.config``. The
    module is loaded from its file, so neither TensorFlow nor ``gpuscale.keras``'s
    own imports run in this process."""
    config = _FakeConfig(gpus)
    monkeypatch.setitem(sys.modules, "tensorflow", types.SimpleNamespace(config=config))
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    path = Path(__file__).resolve().parents[1] / "gpuscale" / "keras" / "devices.py"
    spec = importlib.util.spec_from_file_location("_keras_devices_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.apply_device_request(environ), config


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("0", "GPUSCALE_DEVICES must be at least 1, not 0"),
        ("-2", "GPUSCALE_DEVICES must be at least 1, not -2"),
        ("abc", "GPUSCALE_DEVICES: invalid int value: 'abc'"),
        ("2.5", "GPUSCALE_DEVICES: invalid int value: '2.5'"),
        ("70000", "GPUSCALE_DEVICES 70000 is more than gpuscale supports (65,536)"),
        (
            "3",
            "GPUSCALE_DEVICES=3 asks for 3 CPU logical devices but this machine has no GPU "
            "and 2 CPU cores: devices beyond the cores only wait for one; use at most 2",
        ),
    ],
)
def test_a_value_devices_refuses_is_refused_in_one_line_exit_2(monkeypatch, capsys, value, said):
    with pytest.raises(SystemExit) as stopped:
        _apply_device_request(monkeypatch, {"GPUSCALE_DEVICES": value})
    assert stopped.value.code == 2
    assert capsys.readouterr().err.splitlines() == [f"gpuscale: error: {said}"]


def test_more_gpus_than_tensorflow_sees_are_refused_as_devices_refuses_them(monkeypatch, capsys):
    with pytest.raises(SystemExit) as stopped:
        _apply_device_request(monkeypatch, {"GPUSCALE_DEVICES": "5"}, gpus=2)
    assert stopped.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "gpuscale: error: GPUSCALE_DEVICES=5: this machine has 2 GPU(s) TensorFlow can use"
    ]
    got, config = _apply_device_request(monkeypatch, {"GPUSCALE_DEVICES": "1"}, gpus=2)
    assert got == 1 and config.visible == ["GPU:0"]


@pytest.mark.parametrize("value", ["1", "2", " 2 "])
def test_what_devices_takes_the_variable_takes(monkeypatch, capsys, value):
    """1 device too (the README once said at least 2: 2 are always allowed, even on one core)."""
    got, config = _apply_device_request(monkeypatch, {"GPUSCALE_DEVICES": value}, cores=1)
    assert got == int(value) and len(config.logical) == int(value)
    assert capsys.readouterr().err == ""


def test_unset_or_empty_is_the_script_deciding(monkeypatch, capsys):
    for environ in ({}, {"GPUSCALE_DEVICES": ""}):
        got, config = _apply_device_request(monkeypatch, environ)
        assert got is None and config.logical is None and config.visible is None
    assert capsys.readouterr().err == ""


def test_devices_and_the_variable_say_the_same_words(capsys):
    """`--devices 0` and `GPUSCALE_DEVICES=0`: one message, each naming its own."""
    from gpuscale.cli import main
    from gpuscale.errors import GpuscaleError
    from gpuscale.live.devices import env_devices_request

    assert main(["run", "--devices", "0", "--", sys.executable, "-c", "pass"]) == 2
    flag = capsys.readouterr().err.strip()
    with pytest.raises(GpuscaleError) as refused:
        env_devices_request({"GPUSCALE_DEVICES": "0"})
    assert flag == f"gpuscale: error: {refused.value}".replace("GPUSCALE_DEVICES", "--devices")
