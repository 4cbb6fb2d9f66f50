"""A run of a script without gpuscale's callback lasts from the launch: the start
gpuscale makes up for it is stamped when the script was launched, not when
gpuscale was done starting its own parts (NVML, threads), however long those took."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from fake_nvml import FakeNvml

from gpuscale.events.schema import StartEvent
from gpuscale.live.script_run import ScriptRun
from gpuscale.recording.reader import load_run

# Writes the time it began (its first act) to argv[1], then exits.
STAMPER = (
    "import sys, time\n"
    "t = time.time()\n"
    "with open(sys.argv[1] + '.tmp', 'w') as f: f.write(repr(t))\n"
    "import os; os.replace(sys.argv[1] + '.tmp', sys.argv[1])\n"
)


class SlowNvml(FakeNvml):
    """NVML whose start-up lasts until the script has begun (a slow driver, a busy
    machine): gpuscale's own start-up then ends after the script's."""

    def __init__(self, flag: Path, **kwargs):
        super().__init__(**kwargs)
        self.flag = flag
        self.waited = threading.Event()

    def nvmlInit(self) -> None:
        deadline = time.monotonic() + 60.0
        while not self.flag.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        self.waited.set()
        super().nvmlInit()


def test_a_made_up_start_is_stamped_at_the_launch_whatever_came_after_it(tmp_path):
    began = tmp_path / "began"
    path = tmp_path / "run.ndjson"
    nvml = SlowNvml(began)
    run = ScriptRun(
        [sys.executable, "-c", STAMPER, str(began)],
        record=path,
        start_timeout_s=3600.0,  # the script's exit makes the start
        nvml=nvml,
    ).start()
    events = list(run.events(timeout=120))
    assert run.done and run.status == "completed"
    assert nvml.waited.is_set() and began.exists()
    script_began = float(began.read_text())
    # every start the run gave (shown, recorded) and the run's duration count from
    # the launch, before the script's first act
    starts = [e for e in events if isinstance(e, StartEvent)]
    assert starts and all(s.t <= script_began for s in starts)
    loaded = load_run(path)
    recorded = [e for e in loaded.events if isinstance(e, StartEvent)]
    assert recorded and all(s.t <= script_began for s in recorded)
    assert run.end is not None and run.end.duration_s >= run.end.t - script_began


# Fails at once: writes when it began to argv[1], then a traceback on stderr.
FAILER = STAMPER + "print(1 / 0)\n"


def test_a_script_that_fails_at_once_lasts_from_its_launch(tmp_path):
    """`watch -- python -c "print(1/0)"`: its traceback's log lines were stamped before
    the run's start (gpuscale's start-up took longer than the script), and the run
    lasted 1.4 ms, from that start to the end, shorter than the script itself."""
    from gpuscale.events.schema import EndEvent, LogEvent

    began = tmp_path / "began"
    path = tmp_path / "run.ndjson"
    nvml = SlowNvml(began)  # gpuscale's start-up ends after the script began
    run = ScriptRun(
        [sys.executable, "-c", FAILER, str(began)],
        record=path,
        start_timeout_s=3600.0,
        nvml=nvml,
    ).start()
    events = list(run.events(timeout=120))
    assert run.done and run.status == "failed" and nvml.waited.is_set()
    script_began = float(began.read_text())
    for seen in (events, load_run(path).events):
        starts = [e for e in seen if isinstance(e, StartEvent)]
        said = [e for e in seen if isinstance(e, LogEvent) and e.source == "script"]
        (end,) = [e for e in seen if isinstance(e, EndEvent)]
        assert said and any("ZeroDivisionError" in e.message for e in said)
        # no event of the run before its start, which is the launch
        assert starts and all(s.t <= script_began for s in starts)
        assert all(e.t >= max(s.t for s in starts) for e in said)
        assert end.status == "failed"
        assert end.duration_s >= end.t - script_began
        assert end.duration_s >= max(e.t for e in said) - min(s.t for s in starts)
