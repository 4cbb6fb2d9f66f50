"""The trainer: a data-parallel TensorFlow run in a child process that reports
typed events. Only :mod:`gpuscale.trainer.options` and
:mod:`gpuscale.trainer.sizing` may be imported without TensorFlow."""
