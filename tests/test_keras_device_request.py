"""`GPUSCALE_DEVICES=N python train.py` (no gpuscale in front): the same CPU-core
check as `--devices`, and one line, not TensorFlow's traceback, for a global batch
that does not split over the replicas (trial 8: `GPUSCALE_DEVICES=5` on 2 cores
ended in `AddN ... [13,28,28,1] != [12,28,28,1]`: Keras's fit splitting a batch of
64 over 5 replicas). The checks are TF-free; two tests run a script in TensorFlow."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gpuscale.live.devices import env_devices_refusal, uneven_batch_hook, uneven_batch_message

TRIAL_ERROR = (
    "{{function_node __wrapped__AddN_N_5_device_/job:localhost/replica:0/task:0/device:CPU:0}} "
    "Inputs to operation AddN of type AddN must have the same size and shape.  Input 0: "
    "[13,28,28,1] != input 4: [12,28,28,1] [Op:AddN] name: "
)
KERAS_FRAME = (
    f"{os.sep}site-packages{os.sep}keras{os.sep}src{os.sep}utils{os.sep}traceback_utils.py"
)


def test_the_env_variable_gets_the_check_devices_gets():
    said = env_devices_refusal(5, gpus=0, cores=2)
    assert said == (
        "GPUSCALE_DEVICES=5 asks for 5 CPU logical devices but this machine has no GPU and "
        "2 CPU cores: devices beyond the cores only wait for one; use at most 2"
    )
    assert env_devices_refusal(2, gpus=0, cores=1) is None  # 2 are always allowed
    assert env_devices_refusal(8, gpus=0, cores=8) is None
    assert env_devices_refusal(5, gpus=1, cores=2) is None  # with GPUs the count is of GPUs


def test_an_uneven_split_is_said_in_words():
    line = uneven_batch_message(TRIAL_ERROR, ["train.py", KERAS_FRAME])
    assert line is not None and "\n" not in line
    assert "unevenly over the 5 replicas (13 and 12 samples)" in line
    assert "batch_size that is a multiple of 5" in line


@pytest.mark.parametrize(
    ("error", "frames"),
    [
        (TRIAL_ERROR, ["train.py"]),  # not raised in Keras
        (TRIAL_ERROR.replace("[12,28,28,1]", "[13,28,28,2]"), [KERAS_FRAME]),  # not the batch
        ("Inputs to operation MatMul are incompatible", [KERAS_FRAME]),
    ],
)
def test_other_errors_are_left_alone(error, frames):
    assert uneven_batch_message(error, frames) is None


class InvalidArgumentError(Exception):
    """Stands for tf.errors.InvalidArgumentError (the hook goes by its name)."""


def _raised_in_keras(error: Exception) -> BaseException:
    code = compile("raise error", KERAS_FRAME, "exec")
    try:
        exec(code, {"error": error})
    except Exception as exc:  # noqa: BLE001 - returned to the test
        return exc
    raise AssertionError("not raised")


def test_the_hook_says_one_line_and_hands_on_the_rest(capsys):
    seen = []
    hook = uneven_batch_hook(lambda *args: seen.append(args))
    error = _raised_in_keras(InvalidArgumentError(TRIAL_ERROR))
    hook(type(error), error, error.__traceback__)
    err = capsys.readouterr().err
    assert err.startswith("gpuscale: error: Keras's fit split the global batch unevenly")
    assert err.count("\n") == 1 and not seen
    other = _raised_in_keras(ValueError("something else"))
    hook(type(other), other, other.__traceback__)
    assert seen == [(ValueError, other, other.__traceback__)] and not capsys.readouterr().err


def _script(code: str, devices: int) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUSCALE_", "TF_CONFIG"))}
    env.update(
        {"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": "", "GPUSCALE_DEVICES": str(devices)}
    )
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
    assert proc.stderr.rstrip().endswith(
        "gpuscale: error: Keras's fit split the global batch unevenly over the 2 replicas "
        "(32 and 31 samples): under tf.distribute it needs a global batch (fit's batch_size) "
        "divisible by the number of replicas; use a batch_size that is a multiple of 2, or a "
        "device count that divides the batch"
    ), proc.stderr[-3000:]
