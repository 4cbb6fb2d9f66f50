"""Analysis of runs: pure functions from events or sweep points to numbers and
recommendations. Imports neither TensorFlow nor Textual.

* :mod:`~gpuscale.analysis.metrics`: every metric's formula, once.
* :mod:`~gpuscale.analysis.interconnect`: a link's peak bandwidth.
* :mod:`~gpuscale.analysis.summary`: one run's events -> :class:`RunSummary`.
* :mod:`~gpuscale.analysis.sweep`: the sweep file format; recordings -> points.
* :mod:`~gpuscale.analysis.model`: the communication model and its fit.
* :mod:`~gpuscale.analysis.recommend`: single or multi, how many, why.
"""
