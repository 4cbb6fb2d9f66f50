"""Recordings read back exactly what was written; versions are honoured."""

from __future__ import annotations

import gzip
import json

import msgspec
import pytest
from recording_samples import T0, sample_events, write_run

from gpuscale.events.schema import SCHEMA_VERSION, EndEvent, HostSample, StartEvent, StepEvent
from gpuscale.recording.reader import RecordingError, iter_events, load_run


@pytest.mark.parametrize("name", ["run.ndjson", "run.ndjson.gz"])
def test_round_trip(tmp_path, name):
    events = sample_events()
    path = write_run(tmp_path / name, events)
    run = load_run(path)
    assert run.events == events
    assert run.start == events[0]
    assert run.end == events[-1]
    assert run.warnings == []
    assert run.truncated is False
    assert run.schema == SCHEMA_VERSION
    assert list(iter_events(path)) == events


def test_gzip_file_is_standard_gzip(tmp_path):
    path = write_run(tmp_path / "run.ndjson.gz")
    lines = gzip.decompress(path.read_bytes()).decode().splitlines()
    assert json.loads(lines[0])["kind"] == "start"
    assert json.loads(lines[-1])["kind"] == "end"


def test_every_line_is_one_json_object_with_kind_and_start_names_its_schema(tmp_path):
    path = write_run(tmp_path / "run.ndjson")
    text = path.read_text()
    assert text.endswith("\n")
    lines = text.splitlines()
    objects = [json.loads(line) for line in lines]
    assert all("kind" in obj and "t" in obj for obj in objects)
    # The schema version is written even though it equals the struct default.
    assert lines[0].startswith('{"kind":"start","schema":"' + SCHEMA_VERSION + '"')


def test_gzip_concatenated_members_are_read(tmp_path):
    events = sample_events()
    plain = write_run(tmp_path / "run.ndjson", events).read_bytes()
    half = plain.index(b"\n", len(plain) // 2) + 1
    path = tmp_path / "joined.ndjson.gz"
    path.write_bytes(gzip.compress(plain[:half]) + gzip.compress(plain[half:]))
    assert load_run(path).events == events


def test_blank_lines_and_crlf_are_tolerated(tmp_path):
    events = sample_events(steps=3)
    lines = write_run(tmp_path / "a.ndjson", events).read_bytes().split(b"\n")
    path = tmp_path / "b.ndjson"
    path.write_bytes(b"\n" + b"\r\n\n".join(lines))
    assert load_run(path).events == events


def test_streaming_is_lazy(tmp_path):
    path = write_run(tmp_path / "run.ndjson")
    iterator = iter_events(path)
    assert isinstance(next(iterator), StartEvent)
    iterator.close()  # closes the file without reading the rest


def _with_start_fields(path, **changes):
    lines = path.read_bytes().split(b"\n")
    start = json.loads(lines[0])
    start.update(changes)
    for key, value in list(changes.items()):
        if value is None:
            del start[key]
    lines[0] = json.dumps(start).encode()
    path.write_bytes(b"\n".join(lines))
    return path


def test_newer_minor_version_is_read_ignoring_unknown_fields_and_kinds(tmp_path):
    path = write_run(tmp_path / "run.ndjson")
    _with_start_fields(path, schema="1.99", future_field={"x": 1})
    lines = path.read_bytes().split(b"\n")
    lines.insert(3, b'{"kind":"hologram","t":%r,"beam_pct":12}' % (T0 + 1.0))
    lines.insert(4, b'{"kind":"hologram","t":%r,"beam_pct":13}' % (T0 + 1.0))
    path.write_bytes(b"\n".join(lines))
    warnings = []
    run = load_run(path, on_warning=warnings.append)
    assert run.schema == "1.99"
    assert run.start.schema == "1.99"
    assert len(run.events) == len(sample_events())
    assert len(warnings) == 1 and "'hologram'" in warnings[0] and "line 4" in warnings[0]


def test_unknown_kind_in_same_minor_version_is_a_damaged_line(tmp_path):
    path = write_run(tmp_path / "run.ndjson")
    lines = path.read_bytes().split(b"\n")
    lines.insert(3, b'{"kind":"hologram","t":%r}' % (T0 + 1.0))
    path.write_bytes(b"\n".join(lines))
    warnings: list[str] = []
    assert len(load_run(path, warnings.append).events) == len(sample_events())
    assert warnings == [f"{path}: line 4: unknown event kind 'hologram', skipped"]


def test_unknown_major_version_is_refused_naming_both_versions(tmp_path):
    path = _with_start_fields(write_run(tmp_path / "run.ndjson"), schema="2.3")
    with pytest.raises(RecordingError) as info:
        load_run(path)
    message = str(info.value)
    assert str(path) in message and "line 1" in message
    assert "2.3" in message and SCHEMA_VERSION in message and "upgrade gpuscale" in message
    assert info.value.exit_code == 2


def test_start_without_schema_is_read_as_version_1_0(tmp_path):
    path = _with_start_fields(write_run(tmp_path / "run.ndjson"), schema=None)
    assert load_run(path).schema == "1.0"


def test_missing_end_event_loads_with_a_warning(tmp_path):
    events = sample_events(end=False)
    path = write_run(tmp_path / "run.ndjson", events)
    warnings = []
    run = load_run(path, on_warning=warnings.append)
    assert run.end is None and run.events == events and not run.truncated
    assert len(warnings) == 1 and "no end event" in warnings[0] and str(path) in warnings[0]
    assert run.warnings == warnings


@pytest.mark.parametrize("name", ["run.ndjson", "run.ndjson.gz"])
def test_cut_last_line_is_dropped_with_one_warning(tmp_path, name):
    events = sample_events()
    full = write_run(tmp_path / "full.ndjson", events).read_bytes()
    cut = full[: full.rindex(b"\n", 0, len(full) - 1) + 1 + 25]  # 25 bytes of the end event
    path = tmp_path / name
    path.write_bytes(gzip.compress(cut) if name.endswith(".gz") else cut)
    run = load_run(path)
    assert run.events == events[:-1]
    assert run.truncated and run.end is None
    assert any(f"line {len(events)} is cut off" in w for w in run.warnings)


def test_complete_last_line_without_newline_is_kept(tmp_path):
    events = sample_events()
    path = write_run(tmp_path / "run.ndjson", events)
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    run = load_run(path)
    assert run.events == events and not run.truncated and run.warnings == []


def test_gzip_stream_cut_short_keeps_what_decompresses(tmp_path):
    events = sample_events(steps=200)
    path = write_run(tmp_path / "run.ndjson.gz", events)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3])
    warnings = []
    run = load_run(path, on_warning=warnings.append)
    assert run.truncated and run.end is None
    assert 0 < len(run.events) < len(events)
    assert run.events == events[: len(run.events)]
    assert any("gzip stream ends early" in w for w in warnings)


def test_power_cut_zero_filled_tail_is_dropped(tmp_path):
    events = sample_events()
    path = write_run(tmp_path / "run.ndjson", events)
    path.write_bytes(path.read_bytes() + b"\x00" * 4096)
    run = load_run(path)
    assert run.events == events and run.truncated


def test_loaded_structs_are_typed(tmp_path):
    run = load_run(write_run(tmp_path / "run.ndjson"))
    steps = [e for e in run.events if isinstance(e, StepEvent)]
    assert steps and all(isinstance(e.step_time_s, float) for e in steps)
    assert isinstance(run.end, EndEvent)
    assert msgspec.to_builtins(run.start)["config"]["nested"] == {"a": [1, 2.5, None, "x"]}


def test_end_event_is_placed_by_position_not_time(tmp_path):
    """A real run: the trainer's end event is composed a few seconds before the
    sampler's last host samples are written (seen in a 2-device CPU run)."""
    events = sample_events(steps=3, end=False)
    last_t = events[-1].t
    events.append(HostSample(t=last_t + 8, cpu_pct=1.0, mem_used_bytes=1, mem_total_bytes=2))
    events.append(EndEvent(t=last_t, status="completed", steps=3, duration_s=3.0))
    path = write_run(tmp_path / "run.ndjson", events)
    run = load_run(path)
    assert run.events == events and run.end == events[-1]


def test_a_start_event_alone_without_newline(tmp_path):
    start = sample_events()[0]
    path = write_run(tmp_path / "run.ndjson", [start])
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    warnings = []
    run = load_run(path, on_warning=warnings.append)
    assert run.events == [start] and run.end is None
    assert warnings == [
        f"{path}: no end event after line 1: the run was killed or is still running; read what was recorded"
    ]
