"""A script's output waiting to be recorded: stdout flooding the backlog leaves
stderr room (the trial's "stderr lines can be dropped when stdout floods")."""

from __future__ import annotations

from gpuscale.live.script_run import (
    MAX_QUEUED_BYTES,
    MAX_QUEUED_LINES,
    STDOUT_SHARE,
    backlog_admits,
)


def test_stdout_stops_at_its_share_and_stderr_still_gets_in():
    full_for_stdout = int(MAX_QUEUED_LINES * STDOUT_SHARE)
    assert backlog_admits("stdout", full_for_stdout - 1, 0, 80)
    assert not backlog_admits("stdout", full_for_stdout, 0, 80)
    assert backlog_admits("stderr", full_for_stdout, 0, 80)
    assert not backlog_admits("stderr", MAX_QUEUED_LINES, 0, 80)


def test_bytes_are_shared_the_same_way():
    stdout_bytes = int(MAX_QUEUED_BYTES * STDOUT_SHARE)
    assert not backlog_admits("stdout", 1, stdout_bytes, 80)
    assert backlog_admits("stderr", 1, stdout_bytes, 80)
    assert not backlog_admits("stderr", 1, MAX_QUEUED_BYTES, 80)
