"""Recordings: every run saved as one file of newline-delimited JSON events.

``writer`` appends events as they happen (one line, flushed, per event),
``reader`` reads any file back safely and fast, ``store`` knows where runs live
and lists them. The format is described in ``docs/recording-format.md``.
"""
