"""Fuzz every reader of outside input: sweep files, recordings through the CLI,
the runs listing and the transport's frame parser.

Property: the command exits 0 or 2 with no traceback, prints no raw control
character (nothing from the data reaches the terminal unescaped), and a valid
recording with damage appended still yields all its valid events.

Deterministic (hypothesis derandomized, no example database). The normal run
takes well under a minute; ``GPUSCALE_FUZZ_EXAMPLES=2000`` is the longer
profile for one's own checks.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuscale import cli
from gpuscale.events.bounded import JsonInputError
from gpuscale.events.transport import parse_frame
from gpuscale.recording.reader import RecordingError, iter_events

SAMPLES = Path(__file__).resolve().parent.parent / "sample_runs"
RECORDING = SAMPLES / "mnist-cnn_2xcpu.ndjson"
KILLED = SAMPLES / "mnist-cnn_2xcpu_killed.ndjson"
SWEEP = SAMPLES / "seed000_v100.json"

EXAMPLES = int(os.environ.get("GPUSCALE_FUZZ_EXAMPLES", "25"))
FUZZ = settings(
    derandomize=True,
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f\u202a-\u202e\u2066-\u2069]")
"""What must never reach the terminal from data (newline and tab are layout)."""

HOSTILE_STRINGS = [
    "\x1b]0;PWNED\x07\x1b[2J\x1b[31m",
    "[/bold]",
    "[link=https://example.com]click[/link]",
    "\u202eevil",
    "x" * 5000 + "\x1b[2J",
    "\\[bold]\\",
]
HOSTILE_NUMBERS = [
    0,
    -1,
    -1e-300,
    5e-324,
    1e-308,
    1e308,
    -1e308,
    2**62,
    10**9,
    10**30,
    -(2**63),
    0.5,
]
HOSTILE_RAW = ["NaN", "Infinity", "-Infinity", "1e999", "[" * 100_000 + "]" * 100_000]


def _json_values():
    scalars = (
        st.none()
        | st.booleans()
        | st.integers(min_value=-(2**70), max_value=2**70)
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=30)
        | st.sampled_from(HOSTILE_STRINGS)
    )
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
        ),
        max_leaves=12,
    )


def _mutation():
    """A replacement value as JSON text: hostile numbers, strings, raw literals, nesting."""
    return (
        st.sampled_from(HOSTILE_NUMBERS).map(json.dumps)
        | st.sampled_from(HOSTILE_STRINGS).map(json.dumps)
        | st.sampled_from(HOSTILE_RAW)
        | _json_values().map(json.dumps)
    )


def _run_cli(argv: list[str], capsys) -> tuple[int, str]:
    """``gpuscale ARGV`` in this process: the exit code and everything printed.
    Any exception but SystemExit is a traceback the user would see: the test fails."""
    try:
        code = cli.main(argv)
    except SystemExit as exc:  # argparse
        code = exc.code if isinstance(exc.code, int) else 2
    out = capsys.readouterr()
    return code, out.out + out.err


def _assert_clean(code: int, output: str) -> None:
    assert code in (0, 2), output[-2000:]
    assert "Traceback" not in output
    raw = RAW_CONTROL.search(output)
    assert raw is None, (
        f"raw {raw.group()!r} reached the terminal: {output[max(raw.start() - 80, 0) : raw.end() + 80]!r}"
    )


def _mutate_line(line: str, key_index: int, value_json: str) -> str:
    obj = json.loads(line)
    keys = sorted(obj)
    key = keys[key_index % len(keys)]
    obj[key] = "__MUTATED__"
    return json.dumps(obj).replace('"__MUTATED__"', value_json)


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")


# -- sweep files ---------------------------------------------------------------------


@FUZZ
@given(data=st.binary(max_size=2000))
def test_sweep_arbitrary_bytes(tmp_path, capsys, data):
    path = tmp_path / "sweep.json"
    path.write_bytes(data)
    _assert_clean(*_run_cli(["recommend", "--from", str(path)], capsys))


@FUZZ
@given(doc=_json_values())
def test_sweep_arbitrary_json(tmp_path, capsys, doc):
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(doc))
    _assert_clean(*_run_cli(["recommend", "--from", str(path)], capsys))


@FUZZ
@given(point=st.integers(0, 50), key=st.integers(0, 50), value=_mutation(), as_json=st.booleans())
def test_sweep_one_field_mutated(tmp_path, capsys, point, key, value, as_json):
    doc = json.loads(SWEEP.read_text())
    points = doc["points"]
    target = points[point % len(points)]
    keys = sorted(target)
    target[keys[key % len(keys)]] = "__MUTATED__"
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(doc).replace('"__MUTATED__"', value))
    argv = ["recommend", "--from", str(path)] + (["--json"] if as_json else [])
    code, output = _run_cli(argv, capsys)
    _assert_clean(code, output)
    if as_json and code == 0:  # --json output reads back
        assert "NaN" not in output and "Infinity" not in output
        again = tmp_path / "again.json"
        again.write_text(output)
        _assert_clean(*_run_cli(["recommend", "--from", str(again)], capsys))


# -- recordings ----------------------------------------------------------------------


@FUZZ
@given(line=st.integers(0, 200), key=st.integers(0, 50), value=_mutation())
def test_recording_one_field_mutated(tmp_path, capsys, line, key, value):
    lines = RECORDING.read_text().splitlines()
    index = line % len(lines)
    lines[index] = _mutate_line(lines[index], key, value)
    path = tmp_path / "run.ndjson"
    path.write_text("\n".join(lines) + "\n")
    _assert_clean(*_run_cli(["recommend", "--from", str(path), str(KILLED)], capsys))
    runs = tmp_path / "runs"
    runs.mkdir(exist_ok=True)
    (runs / "run.ndjson").write_text("\n".join(lines) + "\n")
    _assert_clean(*_run_cli(["runs", "--dir", str(runs)], capsys))


@FUZZ
@given(damage=st.binary(max_size=300) | _json_values().map(lambda v: json.dumps(v).encode()))
def test_recording_with_damage_appended_keeps_every_valid_event(tmp_path, damage):
    valid = list(iter_events(KILLED))
    path = tmp_path / "run.ndjson"
    path.write_bytes(KILLED.read_bytes() + damage + b"\n" + damage)
    got = []
    try:
        for event in iter_events(path):
            got.append(event)
    except RecordingError:
        pass
    assert got[: len(valid)] == valid


@FUZZ
@given(data=st.binary(max_size=2000))
def test_recording_arbitrary_bytes(tmp_path, capsys, data):
    path = tmp_path / "run.ndjson"
    path.write_bytes(data)
    _assert_clean(*_run_cli(["recommend", "--from", str(path)], capsys))


def test_deep_nesting_everywhere(tmp_path, capsys):
    deep = "[" * 100_000 + "]" * 100_000
    start = json.loads(RECORDING.read_text().splitlines()[0])
    start["config"] = {"x": "__DEEP__"}
    cases = {
        "d.json": deep,
        "d.ndjson": deep,
        "start.ndjson": json.dumps(start).replace('"__DEEP__"', deep) + "\n",
    }
    for name, text in cases.items():
        path = tmp_path / name
        path.write_text(text)
        code, output = _run_cli(["recommend", "--from", str(path)], capsys)
        _assert_clean(code, output)
        assert code == 2 and "nested more than" in output


# -- transport frames ----------------------------------------------------------------


@FUZZ
@given(data=st.binary(max_size=500) | st.sampled_from([h.encode() for h in HOSTILE_RAW]))
def test_frame_arbitrary_bytes(data):
    try:
        parse_frame(data)
    except JsonInputError as exc:
        assert RAW_CONTROL.search(str(exc)) is None


@FUZZ
@given(line=st.integers(0, 200), key=st.integers(0, 50), value=_mutation())
def test_frame_one_field_mutated(line, key, value):
    lines = RECORDING.read_text().splitlines()
    frame = _mutate_line(lines[line % len(lines)], key, value).encode()
    try:
        parse_frame(frame)
    except JsonInputError as exc:
        assert "\n" not in str(exc) and RAW_CONTROL.search(str(exc)) is None
