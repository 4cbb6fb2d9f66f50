"""The split training step: the built-in trainer's real step run as two compiled
halves, so a probe can time the gradient exchange and the optimizer update of a
step that trains (imports TensorFlow).

* *reduce* (A): on every replica forward + backward, then
  ``get_replica_context().all_reduce(SUM, grads)``; returns the summed gradients
  (they stay on the devices) and a value read from each, fetched on the host.
* *apply* (B): ``optimizer.apply(summed)`` on every replica, without summing
  again, synchronised as the fused step is (a small value fetched from every
  replica after the call, which comes back only once every update is done:
  :mod:`gpuscale.trainer.loop` says why).

Keras 3's TensorFlow optimizer sums the gradients across replicas itself, inside
``apply`` (``_backend_update_step`` calls ``_all_reduce_sum_gradients``), and has
no switch to turn that off. :class:`SkippableSum` is that switch: a mixin for the
optimizer class whose ``_all_reduce_sum_gradients`` hands the gradients back
unchanged while :meth:`SkippableSum.gradients_summed` is active (it is active
only while *apply* is traced, so the fused step keeps its one sum; the
multi-worker step that carries the workers' probe ballot uses it too, in
:mod:`gpuscale.trainer.loop`). A
``LossScaleOptimizer`` (mixed precision on GPU) wraps such an optimizer: it
unscales the summed gradients and its inner optimizer skips the sum.

:meth:`SplitStep.prepare` checks that the hook really ran while *apply* was
traced (another Keras version may sum elsewhere: the split would then sum twice)
and says why not otherwise; the trainer then keeps the two-pass probe of
:mod:`gpuscale.trainer.probe`. MirroredStrategy, MultiWorkerMirroredStrategy
and OneDeviceStrategy run the split step (:data:`SPLIT_STRATEGIES`);
CentralStorageStrategy refuses to update its one copy of a variable from
per-replica values.

On several workers (MultiWorkerMirroredStrategy) *reduce*'s all-reduce is a
collective every worker joins, and :meth:`SplitStep.prepare` runs one (and its
check, and *apply*) on every worker: so every worker must split the same steps
and prepare after the same step. The trainer sees to it: every worker prepares
after its first step, and the probes are decided for all by worker 0's ballot
(:mod:`gpuscale.trainer.vote`) or by ``--phase-every``'s count. The variables
``prepare`` saves and puts back are mirrored and the same on every worker, so
each puts back the same values. ``tests/test_trainer_split_step_workers.py``
checks it on two local workers: the split step leaves every variable and
optimizer slot as the fused step does, the same on both, and both probe on split
steps at the same steps. There a probe costs about two thirds of the two-pass one
(``benchmarks/multiworker_probe.py``, two CPU workers: 1.18-1.38 steps against
1.96-2.08).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import keras
import tensorflow as tf

from gpuscale.trainer.probe import touch


class SkippableSum:
    """Mixin for a Keras 3 TensorFlow optimizer: inside ``with
    opt.gradients_summed():`` (while a function is traced) ``apply`` takes the
    gradients as already summed across replicas."""

    _skip_sum = False
    _sum_skipped = False
    """Set when the hook ran with the switch on: the sum really was skipped."""

    @contextlib.contextmanager
    def gradients_summed(self) -> Iterator[None]:
        self._skip_sum = True
        try:
            yield
        finally:
            self._skip_sum = False

    def _all_reduce_sum_gradients(self, grads_and_vars):
        if self._skip_sum:
            self._sum_skipped = True
            return list(grads_and_vars)
        return super()._all_reduce_sum_gradients(grads_and_vars)


_CLASSES: dict[type, type] = {}

SPLIT_STRATEGIES = (
    tf.distribute.MirroredStrategy,
    tf.distribute.MultiWorkerMirroredStrategy,
    tf.distribute.OneDeviceStrategy,
)
"""The strategies whose step can be split (CentralStorageStrategy refuses to update its
one copy of a variable from per-replica values)."""


def with_skippable_sum(optimizer_class: type) -> type:
    """``optimizer_class`` with :class:`SkippableSum` mixed in (one class per base)."""
    if optimizer_class not in _CLASSES:
        _CLASSES[optimizer_class] = type(
            optimizer_class.__name__, (SkippableSum, optimizer_class), {}
        )
    return _CLASSES[optimizer_class]


def inner_optimizer(optimizer: Any) -> Any:
    """The optimizer that sums the gradients (inside a LossScaleOptimizer, its inner one)."""
    return getattr(optimizer, "inner_optimizer", optimizer)


def unsupported(strategy: tf.distribute.Strategy, optimizer: Any) -> str | None:
    """Why the split step cannot run here (None: it can, subject to the check in
    :meth:`SplitStep.prepare`)."""
    if type(strategy) not in SPLIT_STRATEGIES:
        return f"{type(strategy).__name__} is not split (Mirrored, MultiWorkerMirrored and OneDevice only)"
    if not isinstance(inner_optimizer(optimizer), SkippableSum):
        return "the optimizer cannot skip its cross-replica sum"
    if not hasattr(super(SkippableSum, inner_optimizer(optimizer)), "_all_reduce_sum_gradients"):
        return f"this Keras ({keras.__version__}) has no _all_reduce_sum_gradients"
    return None


class SplitStep:
    """The real training step in two timed halves (see the module docstring).

    ``replica_gradients(*batch)`` is forward + backward on one replica;
    ``apply_replica(grads)`` applies gradients on one replica and returns a
    small value to fetch from every replica (the fused step's own ending);
    ``state`` are the variables a step changes (the model's and the
    optimizer's), put back after :meth:`prepare` compiled *apply*."""

    def __init__(
        self,
        strategy: tf.distribute.Strategy,
        optimizer: Any,
        replica_gradients: Callable[..., list],
        apply_replica: Callable[[list], tf.Tensor],
        state: Sequence[Any],
    ):
        self.strategy = strategy
        self.optimizer = optimizer
        self.state = list(state)
        self.problem: str | None = unsupported(strategy, optimizer)
        """Why the split step cannot run (None: it can)."""
        sum_op = tf.distribute.ReduceOp.SUM
        summing = inner_optimizer(optimizer)

        def reduce_replica(*batch: Any) -> tuple[list, tf.Tensor]:
            grads = replica_gradients(*batch)
            summed = tf.distribute.get_replica_context().all_reduce(sum_op, grads)
            return summed, touch(summed)

        def apply_summed_replica(summed: list) -> tf.Tensor:
            with summing.gradients_summed():
                return apply_replica(list(summed))

        self.reduce_fn = tf.function(lambda batch: strategy.run(reduce_replica, args=batch))
        self.apply_fn = tf.function(
            lambda summed: strategy.run(apply_summed_replica, args=(summed,))
        )
        self._ready = False

    @property
    def usable(self) -> bool:
        return self.problem is None

    def sync(self, out: Any) -> None:
        """Wait until every replica's part of ``out`` is on the host."""
        for value in self.strategy.experimental_local_results(out):
            value.numpy()

    @property
    def ready(self) -> bool:
        """Whether both halves are compiled (:meth:`prepare` has nothing left to do)."""
        return self._ready

    def prepare(self, batch: tuple) -> bool:
        """Compile both halves on ``batch`` and run them once, untimed, then put
        every variable of ``state`` back (compiling is not a probe, and must not
        train); False, with :attr:`problem` set, where the optimizer's sum was not
        skipped while *apply* was traced."""
        if self._ready or self.problem is not None:
            return self.problem is None
        summing = inner_optimizer(self.optimizer)
        saved = [v.numpy() for v in self.state]
        summed, done = self.reduce_fn(batch)
        self.sync(done)
        summing._sum_skipped = False
        self.apply_fn.get_concrete_function(summed)  # traced: did the hook run?
        if not summing._sum_skipped:
            self.problem = "the optimizer summed the gradients elsewhere (another Keras version)"
            return False
        self.sync(self.apply_fn(summed))
        for variable, value in zip(self.state, saved, strict=True):
            variable.assign(value)
        self._ready = True
        return True

    def run(self, batch: tuple) -> tuple[float, float]:
        """One training step on ``batch``, split: (T(reduce), T(apply)) in seconds,
        each synchronised on the host."""
        start = time.perf_counter()
        summed, done = self.reduce_fn(batch)
        self.sync(done)
        reduced = time.perf_counter()
        self.sync(self.apply_fn(summed))
        return reduced - start, time.perf_counter() - reduced
