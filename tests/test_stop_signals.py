"""Stop signals after the first (Ctrl-C pressed again and again, `kill` repeated, a
`timeout` that insists): gpuscale finishes its stop, its report and its recording
whatever comes; no later signal cuts them or ends gpuscale with another status."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from gpuscale.recording.reader import load_run

PRINTER = "import time\nfor i in range(100000):\n    print(i, flush=True)\n    time.sleep(0.05)\n"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_signals_after_the_first_cut_neither_the_report_nor_the_recording(tmp_path, signum):
    path = tmp_path / "run.ndjson"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuscale", "run", "--record", str(path), "--"]
        + [sys.executable, "-c", PRINTER],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "GPUSCALE_DATA_DIR": str(tmp_path), "COLUMNS": "100"},
        # a pytest started with SIGINT ignored (``(pytest &)`` from a script) would pass
        # that on, and gpuscale would never see the signal this test sends
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        # the run is under way once the script's first line is on disk (an event)
        deadline = time.monotonic() + 120  # a hang guard only
        while not (path.exists() and '"message":"0"' in path.read_text()):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        sent = 0
        deadline = time.monotonic() + 60  # a hang guard only
        while proc.poll() is None and time.monotonic() < deadline:
            # the first signal, then more until gpuscale has exited
            try:
                proc.send_signal(signum)
            except ProcessLookupError:
                break
            sent += 1
            time.sleep(0.002)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert sent >= 2
    assert proc.returncode == 130, (proc.returncode, err[-2000:])  # not killed by a later one
    assert "gpuscale: stopping" in err and "interrupted" not in err.splitlines()[-1]
    assert f"recorded to {path}" in out  # the report, whole
    run = load_run(path)
    assert run.end is not None and run.end.status == "stopped"


def test_a_stop_keeps_the_stop_signals_ignored_until_gpuscale_exits(monkeypatch):
    """In gpuscale.cli: the first stop signal ignores the others before it raises
    KeyboardInterrupt (none can land in the stop's own handling), and they stay
    ignored after the command returned (its report is flushed, the interpreter
    still has to end); signals that never came are handed back as they were."""
    from gpuscale import cli

    seen: dict[str, object] = {}

    def command(args) -> int:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the signal is handled before this ends
        except KeyboardInterrupt as exc:
            seen["raised"] = exc.args
            seen["during"] = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGHUP)}
        return 130

    stops = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    before = {s: signal.getsignal(s) for s in stops}
    try:
        with cli.stop_signals_interrupt():  # no signal came: the handlers come back
            pass
        assert {s: signal.getsignal(s) for s in stops} == before
        with cli.stop_signals_interrupt():
            assert command(None) == 130
        assert seen["raised"] == ("SIGTERM",)
        assert set(seen["during"].values()) == {signal.SIG_IGN}
        assert {signal.getsignal(s) for s in stops} == {signal.SIG_IGN}
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


DASHBOARD = """
import asyncio, os, signal, sys, threading, time
import gpuscale.ui.app as ui_app

ui_app.STOP_SIGNAL_EXIT_S = 1.0
source_stopped = threading.Event()


class Source:
    def stop(self):
        source_stopped.set()


class StandInApp:
    source = Source()

    def action_quit_run(self):
        pass

    def run(self):
        asyncio.run(self.main())

    async def main(self):  # the first signal, then more while the app shuts down
        os.kill(os.getpid(), signal.SIGTERM)
        while not source_stopped.is_set():
            await asyncio.sleep(0.01)
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGINT):
            os.kill(os.getpid(), signum)
            await asyncio.sleep(0.01)


print("stopped by", ui_app.run_until_stop_signal(StandInApp()), flush=True)
os.kill(os.getpid(), signal.SIGINT)  # while the report is printed
time.sleep(1.5)  # a report that takes longer than the watchdog's deadline
print("the whole report", flush=True)
"""


def test_signals_while_a_dashboard_quits_cut_no_report_printed_after_it():
    """`watch` and `recommend --watch` print their report after the dashboard quit:
    neither later signals (once: the process ended at once, 130) nor the watchdog
    that ends a dashboard whose lost terminal blocks its shutdown (once: 5 s after
    the first signal, whatever was printing) may cut it."""
    done = subprocess.run(
        [sys.executable, "-c", DASHBOARD], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr[-2000:])
    assert done.stdout.splitlines() == ["stopped by SIGTERM", "the whole report"]
