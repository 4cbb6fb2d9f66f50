"""The safe read path and the output escape, case by case (the fuzz suite covers
the space in between): each hostile input from issue 14 gets one line and exit 2,
or is shown escaped."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from gpuscale import cli
from gpuscale.events.bounded import (
    MAX_DEPTH,
    JsonInputError,
    data_too_deep,
    decode_json,
    read_bounded,
    too_deep,
)
from gpuscale.formatting import (
    format_bytes,
    format_duration_s,
    format_fraction_pct,
    format_ms,
    markup_literal,
    visible,
)
from gpuscale.recording import store
from gpuscale.recording.reader import RecordingError, load_run

SAMPLES = Path(__file__).resolve().parent.parent / "sample_runs"
RECORDING = SAMPLES / "mnist-cnn_2xcpu.ndjson"
SWEEP = SAMPLES / "seed000_v100.json"
TITLE = "\x1b]0;PWNED\x07\x1b[2J\x1b[31m"


def _cli(argv, capsys) -> tuple[int, str]:
    code = cli.main(argv)
    out = capsys.readouterr()
    return code, out.out + out.err


def _with_start(tmp_path: Path, name: str = "run.ndjson", **fields) -> Path:
    lines = RECORDING.read_text().splitlines()
    start = json.loads(lines[0])
    start.update(fields)
    path = tmp_path / name
    path.write_text("\n".join([json.dumps(start), *lines[1:]]) + "\n")
    return path


# -- bounded reading -----------------------------------------------------------------


def test_depth_check_counts_brackets_outside_strings_only():
    assert not too_deep(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH)
    assert too_deep(b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1))
    assert too_deep(b"[" * 100_000 + b"]" * 100_000)
    assert too_deep(b"{" * 100_000)  # cut off, unbalanced
    assert not too_deep(b'["' + b"[" * 1000 + b'"]')  # inside a string
    assert not too_deep(b'["\\"' + b"[" * 1000 + b'"]')  # escaped quote inside a string
    assert not too_deep(b"[}" * 10_000)  # not JSON, but not deep: the decoder says why
    assert data_too_deep(json.loads("[" * 70 + "]" * 70))
    assert not data_too_deep({"a": [[1]]})


def test_decode_json_takes_a_bom_and_refuses_depth():
    assert decode_json(b'\xef\xbb\xbf{"a": 1}') == {"a": 1}
    with pytest.raises(JsonInputError, match="nested more than 64 levels"):
        decode_json(b"[" * 100_000 + b"]" * 100_000)


def test_read_bounded_refuses_large_files_devices_and_caps_pipes(tmp_path):
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 2000)
    with pytest.raises(JsonInputError, match="more than gpuscale reads"):
        read_bounded(big, 1000)
    assert read_bounded(big, 2000) == b" " * 2000
    with pytest.raises(JsonInputError, match="is a device"):
        read_bounded("/dev/zero", 1000)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert read_bounded(fifo, 1000) == b""  # no writer: empty, not a hang


def test_devices_and_fifos_through_the_cli(tmp_path, capsys):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for argv, expected in (
        (["recommend", "--from", "/dev/urandom"], "is a device"),
        (["recommend", "--from", str(fifo)], "is a pipe, not a file"),
    ):
        code, output = _cli(argv, capsys)
        assert code == 2 and expected in output


def test_bom_recording_and_sweep_are_read(tmp_path, capsys):
    recording = tmp_path / "bom.ndjson"
    recording.write_bytes(b"\xef\xbb\xbf" + RECORDING.read_bytes())
    assert len(load_run(recording).events) == len(load_run(RECORDING).events)
    sweep = tmp_path / "bom.json"
    sweep.write_bytes(b"\xef\xbb\xbf" + SWEEP.read_bytes())
    code, output = _cli(["recommend", "--from", str(sweep)], capsys)
    assert code == 0, output


# -- validation at the edge ----------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("devices", 2**62, "points[0].devices must be at most 65,536 (got 4611686018427387904)"),
        ("step_time_s", 1e-308, "points[0].step_time_s must be at least 1e-09 (got 1e-308)"),
        ("step_time_s", -0.1, "points[0].step_time_s must be a positive number (got -0.1)"),
        ("throughput", 1e308, "points[0].throughput must be at most 1e+12 (got 1e308)"),
        ("throughput", 0, "points[0].throughput must be a positive number (got 0)"),
        ("throughput", "360", 'points[0].throughput must be a number (got "360")'),
        ("devices", 1.5, "points[0].devices must be a whole number (got 1.5)"),
        ("devices", 0, "points[0].devices must be at least 1 (got 0)"),
        ("price_per_device_hour", -2, "points[0].price_per_device_hour must be a positive number"),
        ("interconnect_bytes_s", 5e-324, "interconnect_bytes_s must be at least 1 (got 5e-324)"),
        ("scaling", "wek", 'points[0].scaling must be "strong" or "weak" (got "wek")'),
        ("exchange", "tree", 'points[0].exchange must be "gather", "host" or "ring" (got "tree")'),
        ("step_tme_s", 1, 'points[0] has an unknown key "step_tme_s" (did you mean step_time_s?)'),
    ],
)
def test_implausible_sweep_values_are_one_line(tmp_path, capsys, field, value, expected):
    """msgspec's "Expected `float` >= 1e-06 - at `throughput`" in a user's words:
    the point, the field, what it must be and what the file gave."""
    doc = json.loads(SWEEP.read_text())
    doc["points"][0][field] = value
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(doc))
    code, output = _cli(["recommend", "--from", str(path)], capsys)
    assert code == 2 and expected in output and output.count("\n") == 1, output


def test_a_missing_field_and_a_misspelt_top_level_key_are_said_plainly(tmp_path, capsys):
    doc = json.loads(SWEEP.read_text())
    doc["defaults"].pop("scaling", None)
    for point in doc["points"]:
        point.pop("scaling", None)
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(doc))
    code, output = _cli(["recommend", "--from", str(path)], capsys)
    assert code == 2 and output.count("\n") == 1, output
    assert f'{path}: points[0] needs scaling ("strong" or "weak")' in output
    path.write_text(json.dumps({"pts": []}))
    code, output = _cli(["recommend", "--from", str(path)], capsys)
    assert code == 2 and 'the file has an unknown key "pts" (did you mean points?)' in output


def test_another_tools_json_is_not_called_a_sweep_file_with_a_typo(tmp_path, capsys):
    """A Chrome trace (``{"traceEvents": [...]}``) was refused with 'the file has an
    unknown key "traceEvents"', as if a sweep file had a typo."""
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": [], "displayTimeUnit": "ms"}))
    code, output = _cli(["recommend", "--from", str(path)], capsys)
    assert code == 2 and output.count("\n") == 1, output
    assert f"{path}: neither a recording nor a sweep file" in output
    assert '("traceEvents", "displayTimeUnit")' in output and "unknown key" not in output


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("scalling", "weak", 'defaults has an unknown key "scalling" (did you mean scaling?)'),
        ("scaling", "wek", 'defaults.scaling must be "strong" or "weak" (got "wek")'),
    ],
)
def test_a_fault_in_the_defaults_names_the_defaults(tmp_path, capsys, key, value, expected):
    """Trial 10: a typo in the file's defaults (merged into each point
    before it is checked) was reported as "points[0] has an unknown key"."""
    doc = {
        "defaults": {"model": "m", "scaling": "weak", "per_replica_batch": 32, key: value},
        "points": [{"devices": 1, "throughput": 360}, {"devices": 2, "throughput": 700}],
    }
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(doc))
    code, output = _cli(["recommend", "--from", str(path)], capsys)
    assert code == 2 and f"{path}: {expected}" in output and output.count("\n") == 1, output
    doc["points"][0][key] = value  # the point's own key: the point is named
    path.write_text(json.dumps(doc))
    code, output = _cli(["recommend", "--from", str(path)], capsys)
    assert code == 2 and f"{path}: points[0]" in output, output


@pytest.mark.parametrize("version", [0, -1])
def test_sweep_versions_below_one_are_refused(tmp_path, capsys, version):
    doc = json.loads(SWEEP.read_text())
    doc["version"] = version
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(doc))
    code, output = _cli(["recommend", "--from", str(path)], capsys)
    assert code == 2 and f"version must be at least 1 (got {version})" in output


def test_implausible_recording_values_name_the_line(tmp_path):
    lines = RECORDING.read_text().splitlines()
    index = next(i for i, line in enumerate(lines) if '"kind":"step"' in line)
    step = json.loads(lines[index])
    step["step_time_s"] = 0
    lines[index] = json.dumps(step)
    path = tmp_path / "zero.ndjson"
    path.write_text("\n".join(lines) + "\n")
    warnings: list[str] = []  # a damaged line after the start: skipped, named
    assert len(load_run(path, warnings.append).events) == len(lines) - 1
    assert len(warnings) == 1 and f"line {index + 1}: " in warnings[0]
    assert "step_time_s" in warnings[0] and warnings[0].endswith(", skipped")
    with pytest.raises(RecordingError, match="num_replicas"):
        load_run(_with_start(tmp_path, num_replicas=2**62))


# -- output escaping -----------------------------------------------------------------


def test_visible_and_markup_literal():
    assert visible(TITLE) == "\\x1b]0;PWNED\\x07\\x1b[2J\\x1b[31m"
    assert visible("a\nb", keep_newlines=True) == "a\nb"
    assert visible("a\nb") == "a\\x0ab"
    assert visible("\u202eevil") == "\\u202eevil"
    assert visible("x" * 10, limit=5) == "xxxx…"
    from rich.text import Text

    for text in ("[/bold]", "[link=https://x]y[/link]", "\\[b]\\"):
        # Inside markup, as it is used: the tag after it still applies, the data stays text.
        shown = Text.from_markup(f"[bold]{markup_literal(text)}[/bold]x")
        assert shown.plain == text + "x"


def test_non_finite_numbers_print_na():
    for value in (float("inf"), float("nan"), 1e308):
        assert format_ms(value) == "n/a"
    assert format_duration_s(float("inf")) == "n/a"
    assert format_bytes(float("nan")) == "n/a"
    assert format_fraction_pct(1e308) == "n/a"


def test_runs_listing_escapes_and_survives_bad_files(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    folder = tmp_path / "runs"
    folder.mkdir()
    _with_start(folder, "a_title.ndjson", model=TITLE + "[/bold][link=https://x]hi")
    _with_start(folder, "b_future.ndjson", t=1e12)
    _with_start(folder, "c_far.ndjson", t=1e308)
    (folder / "d_deep.ndjson").write_text("[" * 100_000 + "]" * 100_000 + "\n")
    code, output = _cli(["runs", "--dir", str(folder)], capsys)
    assert code == 0, output
    assert "\x1b" not in output and "\x07" not in output
    assert "\\x1b]0;PWNED" in output and "[/bold]" in output
    assert output.count("unreadable") >= 3


def test_runs_listing_reads_only_the_head_of_a_large_gzip(tmp_path, monkeypatch):
    path = tmp_path / "big.ndjson.gz"
    path.write_bytes(gzip.compress(RECORDING.read_bytes()))
    monkeypatch.setattr(store, "LIST_GZIP_BYTES", 10)
    (info,) = store.list_runs(tmp_path)
    assert info.status == "unscanned" and info.model and info.steps is None
    monkeypatch.setattr(store, "LIST_GZIP_BYTES", 1 << 30)
    (info,) = store.list_runs(tmp_path)
    assert info.status == "completed"


def test_run_info_date_out_of_range_is_none():
    info = store.RunInfo(
        path="x", start_t=1e308, model="m", devices=1, platform="gpu", steps=None,
        duration_s=None, size_bytes=0, status="completed",
    )  # fmt: skip
    assert info.when is None


def test_a_start_line_over_64_kib_is_a_recording(tmp_path, capsys):
    path = _with_start(tmp_path, config={"model": "mnist-cnn", "blob": "x" * 100_000})
    code, output = _cli(["recommend", "--from", str(path)], capsys)
    assert code == 0, output
    assert "trailing characters" not in output


def test_telemetry_seconds_must_be_finite_and_bounded(capsys):
    from gpuscale.telemetry.__main__ import main as telemetry_main

    for value in ("1e308", "nan", "inf", "0", "-1"):
        with pytest.raises(SystemExit) as exc:
            telemetry_main(["--seconds", value])
        assert exc.value.code == 2
        assert "expected seconds above 0" in capsys.readouterr().err
