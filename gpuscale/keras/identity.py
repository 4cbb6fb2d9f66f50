"""One workload, one name: what a script's runs are called, however they are launched.

``recommend`` compares runs of one workload (name, scaling, batch), so a script's
plain run (``python train.py``) and its run under ``gpuscale run|watch`` must
carry the same name. The name, in order of preference:

1. ``ScalingMonitor(name="...")``, when given;
2. the Keras model's own name, when the script chose it
   (``keras.Sequential(..., name="small-cnn")``);
3. the script's file name (``train.py``), when the model has a name Keras made up
   (``sequential``, ``functional_3``: they say nothing about the workload, and
   their number depends on how many models the process built before);
4. the Keras model's name (an interactive session has no script).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

KERAS_DEFAULT_NAME = re.compile(r"^(sequential|functional|model)(_\d+)?$")
"""Names Keras gives a model the script did not name."""


def script_file(argv: Sequence[str]) -> str:
    """The running script's file name (``train.py``), or ``""`` (interactive, ``-c``)."""
    first = argv[0] if argv else ""
    if not first or first == "-c" or first == "-":
        return ""
    return os.path.basename(first)


def workload_name(model: Any, explicit: str | None, argv: Sequence[str]) -> str:
    """The run's name (see the module docstring)."""
    if explicit:
        return explicit
    model_name = getattr(model, "name", "") or ""
    if model_name and not KERAS_DEFAULT_NAME.match(model_name):
        return model_name
    return script_file(argv) or model_name or "model"
