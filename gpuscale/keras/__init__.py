"""gpuscale for your own training script: a Keras callback and a custom-loop helper.

Add one line to ``model.fit``::

    from gpuscale.keras import ScalingMonitor
    model.fit(dataset, epochs=3, callbacks=[ScalingMonitor()])

and run the script as usual (it then writes a recording you can open with
``gpuscale replay``), or under gpuscale (``gpuscale run -- python train.py`` or
``gpuscale watch -- python train.py``), which finds the callback through the
environment and shows its steps live. A loop without ``fit``::

    monitor = ScalingMonitor(batch_size=64)
    for x, y in dataset:
        with monitor.step() as step:
            step.sync(train_step(x, y))   # waits for the step's outputs
    monitor.close()

What it measures
----------------
*Step time* (:class:`~gpuscale.events.schema.StepEvent`): wall-clock time
(``time.perf_counter``) from ``on_train_batch_begin`` to ``on_train_batch_end``.
Keras's TensorFlow backend calls every callback's batch hooks on ``fit``'s own
thread, with the logs (the loss and metrics, computed after the optimizer update)
converted to Python floats first, with or without this callback (Keras 3 runs
callbacks asynchronously only on backends it deems thread-safe, not TensorFlow):
that waits until the step's device work is finished. So the time is synchronised,
not the time to enqueue. With ``steps_per_execution=N`` Keras calls the callback once per N
steps: one StepEvent then stands for the execution, with ``step`` the last step
index and ``step_time_s`` the execution's time divided by N (a mean, never a
per-step measurement). The first ``warmup_steps`` steps (tracing, allocation)
are marked ``warmup``.

*Phase breakdown* (:class:`~gpuscale.events.schema.PhaseEvent`, only when the
model is trained under a ``tf.distribute`` strategy): the built-in trainer's
probe (:mod:`gpuscale.trainer.probe`) on its schedule
(:mod:`gpuscale.trainer.schedule`: within ``budget`` of the wall clock, 2 % by
default, or every ``every`` steps), on a batch the callback synthesises
(a callback cannot reach the real batch): random inputs of the shape and dtype
of the model's real per-replica input (captured when Keras traces the train
step, else taken from ``model.inputs``), with the per-replica batch of the last
step (samples / replicas), fed through ``model.stateless_call`` so the probe
changes no weight, no BatchNorm statistic and no optimizer state. An input with
another dimension of unknown size (variable-length sequences) has no honest
stand-in: the probe then says it cannot run, once, and step times go on.

* ``compute_s``: forward + backward on every replica, no gradient exchange.
* ``allreduce_s`` = T(compute + all-reduce) - T(compute), floored at 0: the
  exposed gradient exchange, through the strategy's own cross-device ops; with
  one replica nothing is exchanged and it is 0 (only compute is probed).
* ``step_time_s``: the usual training step: the median of the last 10 counted
  steps that followed no probe (``ProbeScheduler.reference_step_s``, the
  built-in trainer's rule too), not the one step before the probe (which in
  ``fit`` may hold a retrace or the callbacks' own work).
* ``apply_s`` = step - T(compute + all-reduce), floored at 0: the optimizer
  update plus Keras's own per-step work (metrics), not separable from outside.
* ``allreduce_total_s``: a gradient-sized all-reduce timed alone.

The probe's loss is the mean square of the model's outputs, not your loss:
forward and backward cost the same to within the loss itself, and the gradients
(hence the all-reduce payload) have the same shapes. Each probe costs about two
extra forward+backward passes between steps: step times do not include it, the
run's wall clock does, and the schedule keeps that within ``budget``
(``phases=False`` to skip). Before the first probe its passes compile once
(about a second on small models): in the wall clock too, not the budget's, and
said apart (``PhaseEvent.setup_s``, "plus 709.4 ms compiling them once"). Under MultiWorkerMirroredStrategy every worker must
probe after the same steps (the probe's all-reduce is a collective that all
workers join): worker 0's schedule decides for all, by a vote between steps
(a scalar all-reduce, :class:`gpuscale.trainer.vote.GapVote`), the first when the
first probe is due, then as often as keeps the votes within a tenth of the
probes' budget (2.3-3.6 ms a vote between two CPU workers on one machine:
one every 89-100 steps of 26 ms at the default budget; 100 at most); their
cost is counted as the probes'. An explicit ``every`` must be the same on every worker.

Modules: :mod:`~gpuscale.keras.callback` (the Keras hooks),
:mod:`~gpuscale.keras.custom_loop` (the loop helper),
:mod:`~gpuscale.keras.monitor` (the run: events, probe, recording),
:mod:`~gpuscale.keras.channel` (the connection to the gpuscale parent),
:mod:`~gpuscale.keras.describe` (strategy and model as gpuscale names them).

Where the events go
-------------------
Under ``gpuscale run``/``watch`` (``GPUSCALE_EVENTS`` is set) to the gpuscale
process over TCP; otherwise into a recording in gpuscale's runs folder
(``gpuscale runs`` lists it), whose path is printed when training ends.
"""

from __future__ import annotations

from gpuscale.keras.callback import ScalingMonitor
from gpuscale.keras.channel import CALLBACK_SOURCE, announce
from gpuscale.keras.describe import describe_strategy
from gpuscale.keras.devices import apply_device_request, install_batch_split_hook

__all__ = ["CALLBACK_SOURCE", "ScalingMonitor", "describe_strategy"]

apply_device_request()  # GPUSCALE_DEVICES (gpuscale run --devices N): before TF sets up devices
install_batch_split_hook()  # a batch that does not split over the replicas: one line
announce()
