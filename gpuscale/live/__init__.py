"""A run that is happening, seen from gpuscale's own process: every live source of
the event stream. The commands and the dashboard depend on this one surface.

* :mod:`~gpuscale.live.base`: :class:`RunBase`, what every live run shares (the
  consumer's queue, start/stop, the recorder, the telemetry sampler).
* :mod:`~gpuscale.live.trainer_run`: :class:`LiveRun`, the built-in trainer in a
  child process (``python -m gpuscale.trainer``).
* :mod:`~gpuscale.live.script_run`: :class:`ScriptRun`, the user's own script
  (``gpuscale run|watch -- python train.py``), with or without the callback.
* :mod:`~gpuscale.live.cluster`: multi-worker runs (TF_CONFIG, Slurm, local workers).
* :mod:`~gpuscale.live.child`: starting a child process and reading its output.

A new kind of source (a PyTorch job, a remote worker) is a new module here that
builds on :class:`RunBase`. Nothing here imports TensorFlow or Textual.
"""
