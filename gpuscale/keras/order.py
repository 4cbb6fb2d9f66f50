"""ScalingMonitor's place among ``fit``'s callbacks.

Keras calls the callbacks' batch hooks in the list's order, so a step timed from
the monitor's ``on_train_batch_begin`` to its ``on_train_batch_end`` also holds
the ``on_train_batch_end`` (``on_batch_end``) of every callback listed before
it: ``callbacks=[ModelCheckpoint(save_freq=100), ScalingMonitor()]``, a logger
that writes every batch, a callback that sleeps. Those hooks are the script's
work between steps, not the step (a 20 ms hook timed a 2.8 ms step as 22.9 ms).
At ``on_train_begin`` (once a ``fit``, off the per-step path) the monitor moves
itself ahead of the first such callback in the ``CallbackList`` Keras made for
this ``fit`` (the script's own list stays as it was, unless the script passed a
``CallbackList`` itself, which Keras uses as it is); the others keep their
order. A callback it moves ahead of now runs its ``on_train_batch_begin``, if
it has one, inside the step: begin hooks are rarely where the work is
(``ModelCheckpoint`` saves, loggers write, at a batch's end).
"""

from __future__ import annotations

import sys
from typing import Any

import keras

_END_HOOKS = ("on_train_batch_end", "on_batch_end")


def _has_end_hook(callback: Any) -> bool:
    """Whether ``callback`` does something at a batch's end: a hook of its class's or
    set on it (``LambdaCallback(on_train_batch_end=...)``), not ``Callback``'s no-op."""
    for name in _END_HOOKS:
        method = getattr(callback, name, None)
        if method is None or getattr(method, "_is_default", False):
            continue  # Keras marks its no-op hooks (its async dispatch reads the mark)
        if getattr(method, "__func__", method) is not getattr(keras.callbacks.Callback, name):
            return True
    return False


def fit_callback_list(monitor: Any, depth: int = 4) -> list | None:
    """The list of the ``CallbackList`` calling ``monitor``'s hook now (Keras's
    ``fit``), found among the callers' frames; None if there is none (a test or a
    script calling the hook itself)."""
    try:
        frame = sys._getframe(2)  # this function's caller's caller: the hook's caller
    except ValueError:
        return None
    for _ in range(depth):
        if frame is None:
            break
        owner = frame.f_locals.get("self")
        if isinstance(owner, keras.callbacks.CallbackList):
            callbacks = getattr(owner, "callbacks", None)
            if isinstance(callbacks, list) and any(c is monitor for c in callbacks):
                return callbacks
        frame = frame.f_back
    return None


def run_end_hook_first(callbacks: list, monitor: Any) -> Any:
    """Move ``monitor`` in ``callbacks`` ahead of the first callback before it that has
    an end-of-batch hook; the callback it now precedes (None: nothing moved). Safe
    while the list is being iterated at the monitor's own index (the callbacks it
    moves past have already been called)."""
    index = next((i for i, c in enumerate(callbacks) if c is monitor), None)
    if index is None:
        return None
    first = next((i for i in range(index) if _has_end_hook(callbacks[i])), None)
    if first is None:
        return None
    del callbacks[index]
    callbacks.insert(first, monitor)
    return callbacks[first + 1]
