"""ScalingMonitor's place among fit's callbacks (gpuscale/keras/order.py): another
callback's end-of-batch work listed before the monitor is not timed as the step."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.tf


def test_the_monitor_moves_ahead_of_the_first_end_hook_only():
    import keras

    from gpuscale.keras.order import run_end_hook_first

    class Ends(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            pass

    class OldEnds(keras.callbacks.Callback):
        def on_batch_end(self, batch, logs=None):
            pass

    class Begins(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            pass

    monitor, begins, ends, old, after = Begins(), Begins(), Ends(), OldEnds(), Ends()
    callbacks = [begins, ends, old, monitor, after]
    assert run_end_hook_first(callbacks, monitor) is ends
    assert callbacks == [begins, monitor, ends, old, after]
    assert run_end_hook_first(callbacks, monitor) is None  # nothing ahead of it: no move
    alone = [begins, monitor]
    assert run_end_hook_first(alone, monitor) is None and alone == [begins, monitor]
    assert run_end_hook_first([ends], monitor) is None  # not in the list
    # a hook set on the instance counts; Keras's own no-op hooks do not
    lam = keras.callbacks.LambdaCallback(on_train_batch_end=lambda batch, logs: None)
    plain = keras.callbacks.Callback()
    callbacks = [plain, lam, monitor]
    assert run_end_hook_first(callbacks, monitor) is lam
    assert callbacks == [plain, monitor, lam]


def test_a_callback_listed_before_the_monitor_is_not_timed_as_the_step():
    """callbacks=[Begins(), Spy(), ScalingMonitor()], fitted twice: the monitor's step
    ends before Spy's end-of-batch hook runs (it was timed inside the step: a 20 ms
    hook made a 2.8 ms step 22.9 ms), and Begins' begin hook still runs before the
    step's timing starts. The script's own list is left as it was."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUSCALE_", "TF_CONFIG"))}
    env.update(TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    script = Path(__file__).parent / "scripts_keras" / "train_callback_order.py"
    proc = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["timing_at_spy_end"] == [False] * 6
    assert result["timing_at_begin_hook"] == [False] * 6
    assert result["script_list"] == ["Begins", "Spy", "ScalingMonitor"]
