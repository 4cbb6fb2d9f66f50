"""Old names for :mod:`gpuscale.formatting`, kept only while
``gpuscale/ui/widgets/advice.py`` still imports them. New code imports
:mod:`gpuscale.formatting`; delete this module once nothing imports it."""

from __future__ import annotations

from gpuscale import formatting as _formatting

NA = _formatting.NA
size = _formatting.format_bytes
rate = _formatting.format_rate_bytes_s
seconds = _formatting.format_duration_s
clock = _formatting.format_clock_s
gib = _formatting.format_gb
number = _formatting.format_number
bar = _formatting.text_gauge
