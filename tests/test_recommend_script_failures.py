"""`gpuscale recommend -- python train.py` where the script fails at one device
count: the sweep stops there, the counts measured before it are printed as the
report, then one line names the count and the script's status, and gpuscale exits
with the script's own status, as `run` and `watch` pass it through (`sys.exit(3)`:
3; killed by a signal: 128 + its number). It exited 1 when the first count failed,
and 0 (a yellow "recommending from the 1 run(s) that worked") when a later one did.
No TensorFlow: the script is a stand-in (tests/fake_script.py) run as a real one."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from gpuscale.cli import main
from gpuscale.commands import recommend_live

SCRIPT = Path(__file__).with_name("fake_script.py")
ARGV = ["recommend", "--sweep", "1,2", "--no-record", "--no-chart", "--", sys.executable]
ARGV += [str(SCRIPT)]


@pytest.fixture(autouse=True)
def _two_counts(monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.setattr(recommend_live, "plan", lambda args: ([1, 2], "Sweep on CPU", None, 2))


def _errors(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("gpuscale: error:")]


@pytest.mark.parametrize(("status", "code"), [("3", 3), ("2", 2), ("-9", 128 + 9)])
def test_a_later_count_failing_prints_the_counts_measured_then_its_status(
    monkeypatch, capsys, status, code
):
    monkeypatch.setenv("FAKE_FAIL_AT", "2")
    monkeypatch.setenv("FAKE_FAIL_STATUS", status)
    assert main(ARGV) == code
    out, err = capsys.readouterr()
    # the report from the count measured, saying the sweep stopped at the failure
    assert "Recommendation: NONE yet: measured at 1 device only" in out
    assert "the 2-device run failed: recommending from 1 device" in out
    # after the report, one line: the count, the script, its status, its last words
    (error,) = _errors(err)
    assert error.startswith("gpuscale: error: the 2-device run failed: the script (")
    if code == 137:
        assert "was killed by SIGKILL" in error
    else:
        assert f"exited with status {status} " in error
        assert error.endswith(": RuntimeError: out of memory")
    assert err.rstrip().endswith(error)
    assert "run(s) that worked" not in err


def test_the_first_count_failing_is_its_line_and_its_status(monkeypatch, capsys):
    monkeypatch.setenv("FAKE_FAIL_AT", "1")
    assert main(ARGV) == 3
    out, err = capsys.readouterr()
    assert out == ""
    (error,) = _errors(err)
    assert error.startswith("gpuscale: error: the 1-device run failed: the script (")
    assert "exited with status 3 " in error and error.endswith(": RuntimeError: out of memory")


def test_the_first_count_failing_names_its_recording(monkeypatch, capsys):
    """Recorded, a first count that failed said only its error: no report names the
    sweep, so nothing said where its run was written."""
    monkeypatch.setenv("FAKE_FAIL_AT", "1")
    argv = [a for a in ARGV if a != "--no-record"]
    assert main(argv) == 3
    (error,) = _errors(capsys.readouterr().err)
    assert error.startswith("gpuscale: error: the 1-device run failed: the script (")
    recorded = re.search(r" \(recorded in (.+\.ndjson)\)$", error)
    assert recorded, error
    assert Path(recorded[1]).is_file()


def test_json_keeps_the_counts_measured_and_the_status(monkeypatch, capsys):
    monkeypatch.setenv("FAKE_FAIL_AT", "2")
    assert main(["recommend", "--json", *ARGV[1:]]) == 3
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert [p["devices"] for p in doc["points"] if not p.get("predicted")] == [1]
    (error,) = _errors(err)
    assert error.startswith("gpuscale: error: the 2-device run failed: the script (")


def test_a_sweep_that_works_still_exits_0(monkeypatch, capsys):
    assert main(ARGV) == 0
    out, err = capsys.readouterr()
    assert "measured" in out and not _errors(err)


@pytest.mark.parametrize(
    ("program", "why"),
    [("/nonexistent/train.sh", "No such file or directory"), ("no-such-program-x", "No such")],
)
def test_a_script_that_cannot_start_is_one_line_before_any_banner(capsys, program, why):
    """A trial: ``recommend --sweep 1,2 -- /nonexistent`` printed its 'Running ... on 1,
    2 devices' banner, then the error: gpuscale's own exit 2 is one line."""
    assert main([*ARGV[:-2], program]) == 2
    out, err = capsys.readouterr()
    lines = [line for line in (out + err).splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("gpuscale: error: cannot start "), lines
    assert why in lines[0]


def test_a_script_that_is_not_executable_says_so(tmp_path, capsys):
    script = tmp_path / "train.sh"
    script.write_text("echo hi\n")  # no execute bit
    assert main([*ARGV[:-2], str(script)]) == 2
    err = capsys.readouterr().err
    assert f"cannot start {script}: Permission denied" in err
