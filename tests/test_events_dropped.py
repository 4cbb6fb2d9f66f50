"""One notice for dropped output lines (gpuscale.events.dropped), used by the
event client and by a live script's output reader alike."""

from __future__ import annotations

import inspect

from gpuscale.events import transport
from gpuscale.events.dropped import DroppedLines
from gpuscale.live import script_run


def test_nothing_dropped_says_nothing():
    assert DroppedLines("lines of the script's stdout", "why").notice() is None


def test_the_notice_counts_the_lines_since_the_last_one():
    dropped = DroppedLines("lines of the script's stderr", "its backlog was full", worker=3)
    dropped.drop()
    one = dropped.notice(t=5.0)
    assert one is not None and one.t == 5.0 and one.worker == 3
    assert one.message == "dropped 1 line of the script's stderr: its backlog was full"
    assert one.level == "warning" and one.source == "gpuscale"
    for _ in range(4):
        dropped.drop()
    again = dropped.notice()
    assert again is not None and again.message.startswith("dropped 4 lines of")
    assert dropped.notice() is None  # counted from zero again


def test_the_client_and_the_script_reader_share_one_notice():
    for module in (transport, script_run):
        source = inspect.getsource(module)
        assert "DroppedLines(" in source
        assert "dropped {" not in source  # no notice of their own
