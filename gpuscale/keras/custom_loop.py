"""The custom-loop helper: a training loop without ``fit`` reports its steps.

    monitor = ScalingMonitor(batch_size=64)
    monitor.start(model, strategy, scaling="strong")  # or "weak": 64 = a batch per replica x replicas
    for x, y in dataset:
        with monitor.step() as step:
            step.sync(train_step(x, y))   # waits for the step's outputs
    monitor.close()

:class:`CustomLoop` is mixed into :class:`gpuscale.keras.ScalingMonitor`, which
also gives it the run (:class:`gpuscale.keras.monitor.Monitor`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import tensorflow as tf

from gpuscale.keras.describe import strategy_of

NO_BATCH_HINT = (
    "the loop's samples per step are unknown, so its throughput is too (the summary "
    "says 'batch unknown'): give ScalingMonitor(batch_size=the global batch), or "
    "monitor.step(samples=N) / monitor.wrap(fn, samples=N)"
)
"""Said once a run where a custom loop's step comes without a sample count: a loop
has no count of Keras's to read, unlike ``fit``."""


class Step:
    """Handle of one timed step in :meth:`CustomLoop.step`."""

    def sync(self, outputs: Any) -> None:
        """Wait until ``outputs`` (tensors, distributed values, nests of them) are computed."""
        for value in tf.nest.flatten(outputs, expand_composites=False):
            if isinstance(value, tf.distribute.DistributedValues):
                for local in tf.distribute.get_strategy().experimental_local_results(value):
                    _fetch(local)
            else:
                _fetch(value)


def _fetch(value: Any) -> None:
    if hasattr(value, "numpy"):
        value.numpy()


class CustomLoop:
    """``start``, ``step``, ``wrap`` and ``close`` for a loop without ``fit``
    (needs the Monitor's ``_begin``, ``record_step`` and ``_finish``)."""

    def start(
        self,
        model: Any = None,
        strategy: tf.distribute.Strategy | None = None,
        *,
        scaling: str | None = None,
    ) -> None:
        """Send the start of the run (a custom loop calls it once; :meth:`step` and
        :meth:`wrap` call it for you). ``model`` gives the parameter count and the
        phase probe; ``strategy`` defaults to the current one. ``scaling``: what the
        loop's batch (``batch_size``, the global batch) is: ``"weak"`` where the loop
        multiplies a batch per replica by the replicas, ``"strong"`` where it splits a
        fixed one; unsaid, it is taken as ``fit``'s (strong, see README)."""
        if scaling not in (None, "strong", "weak"):
            raise ValueError("ScalingMonitor.start(scaling=...) is 'strong' or 'weak'")
        if scaling is not None:
            self.batch_scaling = scaling
        if model is not None:
            self.set_model(model)
        else:
            model = getattr(self, "_model", None)
        strategy = strategy or (
            strategy_of(model) if model is not None else tf.distribute.get_strategy()
        )
        self._batch_said = False
        self._begin(model, strategy, custom_loop=True)
        if type(strategy).__name__.startswith("_Default") and _several_devices():
            self._log(
                "the loop's run started without its strategy (no model or strategy given, "
                "outside any strategy's scope): it is reported as 1 device; call "
                "monitor.start(model, strategy) before the loop (step() and wrap() start "
                "it for you only inside `with strategy.scope()`)",
                "warning",
            )

    @contextlib.contextmanager
    def step(self, samples: int | None = None) -> Iterator[Step]:
        """Time one step of a custom loop. Call ``step.sync(outputs)`` inside the block
        with what the step returned: the step ends when those values are on the host
        (without it, the time is only the dispatch of the step)."""
        if not self._started:
            self.start()
        handle = Step()
        start = time.perf_counter()
        yield handle
        elapsed = time.perf_counter() - start
        count = samples if samples is not None else (self.batch_size or 0)
        if not count and not getattr(self, "_batch_said", False):
            self._batch_said = True  # once a run: its steps go on, without a throughput
            self._log(NO_BATCH_HINT, "warning")
        self.record_step(elapsed, count)

    def wrap(self, step_fn: Callable[..., Any], samples: int | None = None) -> Callable[..., Any]:
        """``step_fn`` timed as one step per call, synchronised on its return value."""

        def timed(*args: Any, **kwargs: Any) -> Any:
            with self.step(samples) as handle:
                result = step_fn(*args, **kwargs)
                handle.sync(result)
            return result

        return timed

    def close(self, status: str = "completed") -> None:
        """End a custom-loop run: sends the end event, closes the recording."""
        self._finish(status)


def _several_devices() -> bool:
    """More than one device this process could train on (GPUs, or CPU logical devices:
    ``--devices 2``)."""
    return any(len(tf.config.list_logical_devices(kind)) > 1 for kind in ("GPU", "CPU"))
