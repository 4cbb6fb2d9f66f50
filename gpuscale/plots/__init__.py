"""Charts of a scaling sweep, built from a recommendation; no Textual here.

- :mod:`gpuscale.plots.scaling`: what the chart shows (points, ranges, ideal line,
  recommended count, phase bars), from a ``Recommendation``.
- :mod:`gpuscale.plots.terminal`: the chart as terminal text (plotext), for
  ``gpuscale recommend`` and the dashboard.
- :mod:`gpuscale.plots.figure`: the chart as an SVG or PNG file (matplotlib, the
  optional ``plot`` extra), for ``gpuscale recommend --plot FILE``.
"""
