"""Every kind of damage is one RecordingError naming the file and the line."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import zlib

import msgspec
import pytest
from recording_samples import T0, sample_events, write_run

from gpuscale.errors import GpuscaleError
from gpuscale.formatting import format_duration_s
from gpuscale.recording.format import MAX_LINE_BYTES
from gpuscale.recording.reader import RecordingError, iter_events, load_run


@pytest.fixture
def good(tmp_path) -> bytes:
    return write_run(tmp_path / "good.ndjson").read_bytes()


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def _replace_line(data: bytes, index: int, line: bytes) -> bytes:
    lines = _lines(data)
    lines[index] = line
    return b"\n".join(lines)


def _insert_line(data: bytes, index: int, line: bytes) -> bytes:
    lines = _lines(data)
    lines.insert(index, line)
    return b"\n".join(lines)


def _set_field(data: bytes, index: int, **fields) -> bytes:
    obj = json.loads(_lines(data)[index])
    obj.update(fields)
    return _replace_line(data, index, json.dumps(obj).encode())


# A damaged line after the start: skipped with a warning naming it, the rest read.
# name -> (damage(good bytes) -> bytes, the damaged line, fragment of the warning)
FORGIVEN = {
    "not json": (lambda d: _replace_line(d, 5, b"this is not json"), 6, "not JSON"),
    "wrong type": (lambda d: _set_field(d, 5, t="yesterday"), 6, "t must be a number (got text)"),
    "missing field": (
        lambda d: _replace_line(d, 5, b'{"kind":"step","t":%r}' % (T0 + 2)),
        6,
        "not a valid 'step' event: it needs step",
    ),
    "not an object": (
        lambda d: _replace_line(d, 5, b"[1, 2, 3]"),
        6,
        "a list where an event (a JSON object) was expected",
    ),
    # Trial 8: the tail of a line split in two by garbage: msgspec's "Expected
    # `object`, got `int`" in words
    "a number, not an event": (
        lambda d: _replace_line(d, 5, b'76502016,"proc_cpu_pct":102.0}'),
        6,
        "a whole number where an event (a JSON object) was expected",
    ),
    "garbled bytes": (
        lambda d: _replace_line(d, 5, _lines(d)[5][:20] + b"\x00\x9f#" + _lines(d)[5][25:]),
        6,
        "",
    ),
    "unknown kind": (
        lambda d: _replace_line(d, 5, b'{"kind":"hologram","t":%r}' % (T0 + 2)),
        6,
        "unknown event kind 'hologram'",
    ),
    "invalid utf-8": (
        lambda d: _replace_line(d, 3, b'{"kind":"log","t":1e9,"message":"\xff\xfe"}'),
        4,
        "not valid UTF-8",
    ),
    "number out of range": (
        lambda d: _replace_line(d, 4, _lines(d)[4].replace(b'"t":', b'"t":1e999,"x":')),
        5,
        "t must be a finite number",
    ),
    "bad enum value": (
        lambda d: _set_field(d, len(sample_events()) - 1, status="exploded"),
        len(sample_events()),
        'status must be "completed", "failed", "lost" or "stopped"',
    ),
}

# name -> (damage(good bytes) -> bytes, expected line, fragment of the message)
DAMAGE = {
    "time going backwards": (lambda d: _set_field(d, 30, t=T0 - 3600), 31, "time goes backwards"),
    "second start event": (lambda d: _insert_line(d, 10, _lines(d)[0]), 11, "second start event"),
    "event after the end": (
        lambda d: d + _lines(d)[5] + b"\n",
        len(sample_events()) + 1,
        "after the end event",
    ),
    "start not first": (lambda d: b"\n".join(_lines(d)[1:]), 1, "starts with a start event"),
    "no kind": (lambda d: _replace_line(d, 0, b'{"t": 1.0}'), 1, "no 'kind' field"),
    "binary file": (lambda d: bytes(range(256)) * 64, 1, "not a gpuscale recording: not JSON"),
    "bad start": (lambda d: _set_field(d, 0, host=None), 1, "start event is not valid"),
    "bad schema version": (
        lambda d: _set_field(d, 0, schema="one"),
        1,
        "unknown recording format version",
    ),
    "schema not a string": (lambda d: _set_field(d, 0, schema=1.0), 1, "'schema' is not a string"),
    "gzip damaged in its first line": (
        lambda d: _gzip_damaged_after(b"", b'{"kind":"start"'),
        None,
        "its gzip data is damaged",
    ),
    "gzip header damaged": (
        lambda d: b"\x1f\x8b\x08garbage",
        None,
        "not a gzip file (it starts like one, but its gzip header is damaged)",
    ),
    "gzip cut in its header": (lambda d: gzip.compress(d)[:6], None, "cut off: its gzip data"),
    "only a cut start line": (lambda d: _lines(d)[0][:40], 1, "start event is cut off"),
    "text, not a recording": (
        lambda d: b"hello world\n" + b"\n".join(_lines(d)[1:]),
        1,
        "not a gpuscale recording",
    ),
    "a damaged first line, no start after it": (
        lambda d: _lines(d)[0][:40] + b"\n" + b"\n".join(_lines(d)[1:]),
        1,
        "start event is cut off",
    ),
    "a later start of another major version": (
        lambda d: b"{oops\n" + _lines(_set_field(d, 0, schema="2.0"))[0] + b"\n",
        2,
        "recording format 2.0",
    ),
    "only blank lines": (lambda d: b"\n\n  \n", 1, "no start event"),
    "empty file": (lambda d: b"", None, "empty file"),
    "line too long": (lambda d: b"{" + b" " * (MAX_LINE_BYTES + 10), 1, "a line longer than"),
}


LOST = r" is lost \(damage noticed at byte [\d,]+ of [\d,]+; no later gzip member to read on from\)"
"""How the warning of gzip data damaged mid-way, with no later gzip member, ends."""


def _corrupt_gzip(data: bytes) -> bytes:
    packed = bytearray(gzip.compress(data))
    for i in range(len(packed) // 2, len(packed) // 2 + 40):
        packed[i] ^= 0x5A
    return bytes(packed)


def _gzip_damaged_after(whole: bytes, more: bytes = b"") -> bytes:
    """``whole`` gzip-compressed and flushed, ``more`` compressed after it (zlib's
    output of the refused data: what the reader must judge itself), then a deflate
    block of the reserved type (0xff: zlib refuses it at once)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = packer.compress(whole) + packer.flush(zlib.Z_FULL_FLUSH)
    if more:
        out += packer.compress(more) + packer.flush(zlib.Z_SYNC_FLUSH)
    return out + b"\xff" * 64


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_damage_is_a_recording_error_naming_file_and_line(tmp_path, good, case):
    damage, line, fragment = DAMAGE[case]
    path = tmp_path / "damaged.ndjson"
    path.write_bytes(damage(good))
    with pytest.raises(RecordingError) as info:
        load_run(path)
    message = str(info.value)
    assert message.startswith(f"{path}: "), message
    if line is not None:
        assert info.value.line == line, message
        assert f": line {line}: " in message
    assert fragment in message
    assert "\n" not in message and len(message) < 400 + len(str(path))
    assert isinstance(info.value, GpuscaleError) and info.value.exit_code == 2
    # Streaming reports the same problem (after yielding the good events before it).
    with pytest.raises(RecordingError) as streamed:
        for _ in iter_events(path):
            pass
    assert str(streamed.value) == message


@pytest.mark.parametrize("case", sorted(FORGIVEN))
def test_a_damaged_line_after_the_start_is_skipped_with_a_warning(tmp_path, good, case):
    damage, line, fragment = FORGIVEN[case]
    path = tmp_path / "damaged.ndjson"
    path.write_bytes(damage(good))
    warnings: list[str] = []
    run = load_run(path, warnings.append)
    assert len(run.events) == len(sample_events()) - 1  # all but the damaged line
    named = [w for w in warnings if f"{path}: line {line}: " in w]
    assert len(named) == 1 and named[0].endswith(", skipped") and fragment in named[0], warnings
    assert "\n" not in named[0] and named[0].count("(") <= 1, named[0]  # one plain sentence
    assert len(list(iter_events(path))) == len(run.events)  # streaming skips it too


def test_many_damaged_lines_are_named_up_to_a_count(tmp_path, good):
    from gpuscale.recording.reader import MAX_SKIP_WARNINGS

    data = good
    for index in range(3, 3 + MAX_SKIP_WARNINGS + 4):
        data = _replace_line(data, index, b"\x00garbled\x00")
    path = tmp_path / "damaged.ndjson"
    path.write_bytes(data)
    warnings: list[str] = []
    run = load_run(path, warnings.append)
    assert len(run.events) == len(sample_events()) - MAX_SKIP_WARNINGS - 4
    assert len(warnings) == MAX_SKIP_WARNINGS + 1, warnings
    assert f"{MAX_SKIP_WARNINGS + 4} damaged lines skipped in all" in warnings[-1]


def test_the_binary_file_error_is_one_plain_sentence(tmp_path):
    path = tmp_path / "ls.ndjson"
    path.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)))
    with pytest.raises(RecordingError) as info:
        load_run(path)
    assert info.value.reason == "not a gpuscale recording: not JSON (invalid character at byte 0)"


def test_time_jitter_within_tolerance_is_accepted(tmp_path, good):
    path = tmp_path / "jitter.ndjson"
    path.write_bytes(_set_field(good, 30, t=json.loads(_lines(good)[29])["t"] - 2.0))
    assert len(load_run(path).events) == len(sample_events())


def test_workers_have_their_own_clocks(tmp_path):
    events = sample_events()
    # Worker 1's clock is an hour behind worker 0's: not damage.
    events.insert(10, type(events[5])(**{**_fields(events[5]), "worker": 1, "t": T0 - 3600}))
    events.insert(11, type(events[5])(**{**_fields(events[5]), "worker": 1, "t": T0 - 3599}))
    path = write_run(tmp_path / "workers.ndjson", events)
    assert load_run(path).events == events


def _fields(event) -> dict:
    return {name: getattr(event, name) for name in event.__struct_fields__}


def test_missing_file(tmp_path):
    with pytest.raises(RecordingError, match=r"missing.ndjson: no such file"):
        load_run(tmp_path / "missing.ndjson")


def test_directory(tmp_path):
    with pytest.raises(RecordingError, match="is a folder, not a recording or a sweep file"):
        load_run(tmp_path)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads anything")
def test_permission_denied(tmp_path, good):
    path = tmp_path / "secret.ndjson"
    path.write_bytes(good)
    path.chmod(0)
    with pytest.raises(RecordingError, match="permission denied"):
        load_run(path)


def test_huge_sparse_file_fails_fast_without_reading_it_all(tmp_path):
    path = tmp_path / "huge.ndjson"
    with open(path, "wb") as f:
        f.truncate(10 * 1000**3)  # 10 GB of zeros, sparse: nothing on disk
    with pytest.raises(RecordingError, match=r"more than gpuscale loads into memory"):
        load_run(path)
    with pytest.raises(RecordingError, match=r"line 1: a line longer than "):
        next(iter_events(path))


def test_load_limit_applies_to_gzip_output(tmp_path):
    events = sample_events(steps=400)
    path = write_run(tmp_path / "run.ndjson.gz", events)
    with pytest.raises(RecordingError, match="more than gpuscale loads into memory"):
        load_run(path, max_bytes=20_000)
    assert len(load_run(path).events) == len(events)


def test_gzip_bomb_is_streamed_in_bounded_chunks(tmp_path):
    path = tmp_path / "bomb.ndjson.gz"
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b"\n" * (1024 * 1024)
    path.write_bytes(b"".join(packer.compress(block) for _ in range(64)) + packer.flush())
    assert path.stat().st_size < 1024 * 1024  # 64 MiB once uncompressed
    with pytest.raises(RecordingError, match="line 1: no start event"):
        load_run(path)
    with pytest.raises(RecordingError, match="uncompress to more than"):
        load_run(path, max_bytes=10 * 1024 * 1024)


def test_permission_denied_simulated(tmp_path, good, monkeypatch):
    """The same as above for root, who can read anything: the error open() raises."""
    path = tmp_path / "secret.ndjson"
    path.write_bytes(good)

    import gpuscale.events.bounded as bounded_module

    real_open = bounded_module.os.open

    def refuse(file, *args, **kwargs):
        if str(file) == str(path):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(bounded_module.os, "open", refuse)
    with pytest.raises(RecordingError, match=r"secret.ndjson: permission denied"):
        load_run(path)


def test_command_line_prints_one_line_and_exits_2(tmp_path, good):
    """What a user sees through the CLI: exercised via a tiny script, no traceback."""
    path = tmp_path / "damaged.ndjson"
    path.write_bytes(b"{oops\n" + b"\n".join(_lines(good)[1:]))  # no start event
    code = (
        "import sys\n"
        "from gpuscale.errors import GpuscaleError\n"
        "from gpuscale.recording.reader import load_run\n"
        "try:\n"
        "    load_run(sys.argv[1])\n"
        "except GpuscaleError as e:\n"
        "    print(f'gpuscale: error: {e}', file=sys.stderr); sys.exit(e.exit_code)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert f"{path}: line 1: not a gpuscale recording: not JSON" in result.stderr


# -- events run together on one line (a lost newline) ------------------------------


def _join(data: bytes, index: int, count: int = 2) -> bytes:
    """``data`` with lines ``index`` .. ``index + count - 1`` run together on one."""
    lines = _lines(data)
    lines[index : index + count] = [b"".join(lines[index : index + count])]
    return b"\n".join(lines)


@pytest.mark.parametrize(("count", "said"), [(2, "read both"), (3, "read all 3")])
def test_events_run_together_on_one_line_are_all_read(tmp_path, good, count, said):
    """Trial 2 (10e): a lost newline dropped both events ("line 130: not JSON
    (trailing characters at byte 98), skipped"). Split where msgspec says the
    first ends, both are read, and the warning says so."""
    path = tmp_path / "joined.ndjson"
    path.write_bytes(_join(good, 5, count))
    warnings: list[str] = []
    run = load_run(path, warnings.append)
    assert [_fields(e) for e in run.events] == [_fields(e) for e in sample_events()]
    assert warnings == [f"{path}: line 6: {count} events run together (a newline lost): {said}"]
    assert [_fields(e) for e in iter_events(path)] == [_fields(e) for e in run.events]


def test_the_end_event_run_together_with_the_last_line_is_read(tmp_path, good):
    """The last line (no newline after it) and the one before run together: the end
    event is read, by the reader and the listing alike."""
    from gpuscale.recording.store import list_runs

    (tmp_path / "runs").mkdir()
    path = tmp_path / "runs" / "joined.ndjson"
    path.write_bytes(_join(good.rstrip(b"\n"), len(sample_events()) - 2))
    run = load_run(path)
    assert run.end is not None and len(run.events) == len(sample_events())
    (listed,) = list_runs(path.parent)
    assert listed.status == "completed" and listed.steps == 20


def test_an_event_run_together_with_garbage_is_kept_and_the_garbage_named(tmp_path, good):
    path = tmp_path / "joined.ndjson"
    path.write_bytes(_replace_line(good, 5, _lines(good)[5] + b"  garbage"))
    warnings: list[str] = []
    run = load_run(path, warnings.append)
    assert len(run.events) == len(sample_events())
    # not a lost newline: said once, as what it is (not "2 events run together")
    assert warnings == [f"{path}: line 6: an event followed by damaged bytes (skipped)"]


def test_the_start_run_together_with_the_next_event_is_read(tmp_path, good):
    """Review: the start and the next event joined on line 1 made the whole file
    unreadable ("line 1: ... not JSON (trailing characters ...)")."""
    warnings: list[str] = []
    one_line = b"".join(_lines(good)[:2])  # the whole file one line, no newline after it
    for name, data in [("first.ndjson", _join(good, 0)), ("one.ndjson", one_line)]:
        path = tmp_path / name
        path.write_bytes(data)
        warnings.clear()
        run = load_run(path, warnings.append)
        want = sample_events() if name == "first.ndjson" else sample_events()[:2]
        assert [_fields(e) for e in run.events] == [_fields(e) for e in want]
        assert warnings[0] == f"{path}: line 1: 2 events run together (a newline lost): read both"
        assert [_fields(e) for e in iter_events(path)] == [_fields(e) for e in run.events]


def test_a_long_line_of_values_that_are_no_events_is_given_up_early():
    """Review: splitting copied the rest of the line at each part (quadratic on a
    line of up to 32 MiB). The line is walked by offset, and parts that are no
    events stop it early."""
    from gpuscale.recording.reader import MAX_BAD_PARTS, joined_parts

    checked: list[bytes] = []

    def is_event(part: bytes) -> bool:
        checked.append(part)
        return part != b"{}"

    assert joined_parts(b"{}" * 200_000, is_event) is None and len(checked) == 1
    checked.clear()
    parts = joined_parts(b'{"a":1}' + b"{}" * 200_000, is_event)
    assert parts is not None and len(parts) == MAX_BAD_PARTS + 2
    assert parts[-1] == b"{}" * (200_000 - MAX_BAD_PARTS) and len(checked) == MAX_BAD_PARTS + 1
    assert joined_parts(b"{}{} [1] ") == [b"{}", b"{} ", b"[1]"]


def test_the_listing_splits_a_line_as_the_reader_does(tmp_path, good, monkeypatch):
    """``gpuscale runs`` split a line of values run together without the reader's
    early give-up (every ``{}`` of a 60 KB line of them decoded), and read an end
    event the reader does not (after a first part that is no event). One
    implementation now: the same events, the same bounded work."""
    from gpuscale.recording import reader
    from gpuscale.recording.store import list_runs

    n = len(sample_events())
    lines = _lines(good)
    garbled = lines.copy()
    garbled[n - 3] += b"{}" * 30_000  # a step, then values that are no events
    joined = lines.copy()
    joined[n - 2 : n] = [b'{"x":1}' + lines[n - 1]]  # a damaged object, then the end
    (tmp_path / "runs").mkdir()
    for name, data in [("garbled.ndjson", garbled), ("joined.ndjson", joined)]:
        (tmp_path / "runs" / name).write_bytes(b"\n".join(data))
    decoded = []
    raw = reader._raw_decoder

    class Counting:
        def decode(self, data):
            decoded.append(len(data))
            return raw.decode(data)

    monkeypatch.setattr(reader, "_raw_decoder", Counting())
    listed = {r.path.rpartition("/")[2]: r for r in list_runs(tmp_path / "runs")}
    assert len(decoded) <= 2 * (reader.MAX_BAD_PARTS + 2), len(decoded)
    for name, run in listed.items():
        read = load_run(run.path)
        assert run.status == ("completed" if read.end is not None else "interrupted"), name
    assert listed["garbled.ndjson"].status == "completed"
    assert listed["joined.ndjson"].status == "interrupted"


def test_a_byte_order_mark_before_gzip_damage_in_the_first_chunk(tmp_path, good):
    """Review: with a BOM and gzip damage in the first chunk, line 1 failed the
    event decode and nothing was read."""
    from gpuscale.recording.store import list_runs

    whole = b"\n".join(_lines(good)[:10]) + b"\n"
    (tmp_path / "runs").mkdir()
    path = tmp_path / "runs" / "bom.ndjson.gz"
    path.write_bytes(_gzip_damaged_after(b"\xef\xbb\xbf" + whole))
    warnings: list[str] = []
    run = load_run(path, warnings.append)
    assert [_fields(e) for e in run.events] == [_fields(e) for e in sample_events()[:10]]
    (warning,) = warnings
    said = "its gzip data is damaged after line 10: the 10 lines before it are read"
    assert re.fullmatch(re.escape(f"{path}: {said}; the run after 1.50 s") + LOST, warning)
    (listed,) = list_runs(path.parent)
    assert listed.model == "mnist-cnn"


# -- a damaged first line, the run's start further in ------------------------------


def test_a_cut_provisional_start_is_read_from_the_runs_own_start(tmp_path, good):
    """Trial 2 (dd2): line 1, gpuscale's provisional start, cut; the trainer's full
    start on line 4 and its steps after it were refused ("line 1: the start event is
    cut off ... nothing to read"). Read from that start, saying which lines were
    skipped."""
    from gpuscale.recording.store import list_runs

    lines = _lines(good)
    provisional = _lines(_set_field(good, 0, provisional=True))[0]
    data = b"\n".join([provisional[:60], lines[1], lines[2], *lines[0:1], *lines[3:]])
    (tmp_path / "runs").mkdir()
    path = tmp_path / "runs" / "dd2.ndjson"
    path.write_bytes(data)
    warnings: list[str] = []
    run = load_run(path, warnings.append)
    assert warnings == [
        f"{path}: line 1: the start event is cut off (the run was killed while writing it); "
        "read from the start event on line 4 (lines 1-3 skipped)"
    ]
    assert run.start.model == "mnist-cnn" and run.end is not None
    assert [_fields(e) for e in run.events] == [_fields(e) for e in sample_events()[:1]] + [
        _fields(e) for e in sample_events()[3:]
    ]
    (listed,) = list_runs(path.parent)  # listed as it reads, with what was skipped
    assert listed.status == "completed" and listed.model == "mnist-cnn"
    assert listed.damage == warnings[0].removeprefix(f"{path}: ")


def test_a_garbled_first_line_before_the_start_is_skipped(tmp_path, good):
    path = tmp_path / "garbled.ndjson"
    path.write_bytes(b"\x00\x00garbage\n" + good)
    warnings: list[str] = []
    run = load_run(path, warnings.append)
    assert len(run.events) == len(sample_events())
    assert warnings == [
        f"{path}: line 1: not JSON (invalid character at byte 0); read from the start event "
        "on line 2 (line 1 skipped)"
    ]


# -- gzip data damaged mid-way --------------------------------------------------------


def test_gzip_data_damaged_mid_way_keeps_the_lines_before_it(tmp_path, good):
    """Trial 2: a .gz corrupted mid-stream was refused whole ("its gzip data is
    damaged", rc 2) though a .gz merely cut short read its lines. The whole lines
    before the damage are read, with one warning saying how many; what zlib
    decoded after them (a line cut by the damage) is not."""
    lines = _lines(good)
    whole = b"\n".join(lines[:30]) + b"\n"
    path = tmp_path / "damaged.ndjson.gz"
    path.write_bytes(_gzip_damaged_after(whole, lines[30][:25]))
    warnings: list[str] = []
    run = load_run(path, warnings.append)
    assert [_fields(e) for e in run.events] == [_fields(e) for e in sample_events()[:30]]
    (warning,) = warnings
    said = "its gzip data is damaged after line 30: the 30 lines before it are read"
    assert re.fullmatch(re.escape(f"{path}: {said}; the run after 2.51 s") + LOST, warning)
    assert run.truncated and run.end is None
    assert len(list(iter_events(path))) == 30


def test_garbage_zlib_decodes_before_it_notices_the_damage_is_not_read(tmp_path):
    """Damaged deflate data decodes to garbage for a while before zlib refuses it:
    no line of it is read (nor named as a damaged line), only events of the run."""
    data = write_run(tmp_path / "long.ndjson", sample_events(steps=400)).read_bytes()
    path = tmp_path / "corrupt.ndjson.gz"
    path.write_bytes(_corrupt_gzip(data))
    warnings: list[str] = []
    run = load_run(path, warnings.append)
    originals = [_fields(e) for e in sample_events(steps=400)]
    assert 0 < len(run.events) < len(originals)
    assert [_fields(e) for e in run.events] == originals[: len(run.events)]
    (warning,) = warnings  # zlib may notice only at the checksum: it says so
    n = len(run.events)
    assert warning.startswith(f"{path}: its gzip data is damaged after line {n}"), warning
    assert re.search(f": the {n} lines before it are read; the run after .+" + LOST, warning)


def test_text_after_a_whole_gzip_stream_keeps_its_lines(tmp_path, good):
    path = tmp_path / "appended.ndjson.gz"
    path.write_bytes(gzip.compress(good) + b"garbage!")
    warnings: list[str] = []
    run = load_run(path, warnings.append)
    assert len(run.events) == len(sample_events()) and run.end is not None
    n = len(sample_events())
    assert warnings == [
        f"{path}: something that is not gzip follows its gzip data after line {n} "
        f"(damaged, or appended): the {n} lines before it are read"
    ]


# -- gzip members: damage loses one member, not the rest of the run -----------------


def _recorded_gzip(tmp_path, monkeypatch, steps: int = 400) -> tuple[bytes, list]:
    """A .gz recorded by the recorder, a new gzip member every 16 KiB of text (its
    default is 256 KiB: the same, larger), a batch every 20 events."""
    from gpuscale.recording import writer

    monkeypatch.setattr(writer, "GZIP_MEMBER_BYTES", 16 * 1024)
    events = sample_events(steps=steps)
    path = tmp_path / "recorded.ndjson.gz"
    with writer.Recorder(path) as recorder:
        for number, event in enumerate(events):
            recorder.write(event)
            if number % 20 == 0:
                recorder.flush()
    return path.read_bytes(), events


def _members(data: bytes) -> list[int]:
    """The offsets at which the gzip members of ``data`` begin."""
    starts, at = [], 0
    while at < len(data):
        starts.append(at)
        member = zlib.decompressobj(31)
        member.decompress(data[at:])
        at = len(data) - len(member.unused_data)
    return starts


def _garbled(data: bytes, at: int, count: int = 8) -> bytes:
    damaged = bytearray(data)
    for i in range(at, min(at + count, len(damaged))):
        damaged[i] ^= 0x5A
    return bytes(damaged)


def _key(event) -> dict:
    fields = _fields(event)
    fields.pop("schema", None)  # the recorder writes the start's version out
    return fields


def test_gzip_data_damaged_mid_way_is_read_on_from_the_next_member(tmp_path, monkeypatch):
    """A .gz damaged mid-way lost everything after the damage, its end event too:
    one gzip stream cannot be read on past damage. The recorder starts a new gzip
    member every GZIP_MEMBER_BYTES of text, and the reader reads on from the next
    member after damage: one member's lines are lost, and the warning says which
    part of the run; the listing says the same and finds the end event."""
    from gpuscale.recording.store import list_runs

    data, events = _recorded_gzip(tmp_path, monkeypatch)
    members = _members(data)
    assert len(members) > 4
    middle = len(members) // 2
    path = tmp_path / "runs" / "damaged.ndjson.gz"
    path.parent.mkdir()
    path.write_bytes(_garbled(data, (members[middle] + members[middle + 1]) // 2))
    warnings: list[str] = []
    run = load_run(path, warnings.append)
    assert run.end is not None and run.end.status == "completed"
    read = [_key(e) for e in run.events]
    originals = [_key(e) for e in events]
    # a prefix and a suffix of the run: one stretch lost, nothing made up
    before = next(i for i, (a, b) in enumerate(zip(read, originals, strict=False)) if a != b)
    after = len(read) - before
    assert read == originals[:before] + originals[len(originals) - after :]
    assert 0 < len(originals) - len(read) < len(originals) // 4
    (warning,) = warnings
    lost_from = format_duration_s(events[before - 1].t - events[0].t)
    lost_to = format_duration_s(events[len(originals) - after].t - events[0].t)
    assert re.fullmatch(
        re.escape(f"{path}: its gzip data is damaged after line {before:,}")
        + r"( \(its checksum does not match\))?"
        + re.escape(
            f": the {before:,} lines before it are read; read on from the next gzip member "
            f"(byte {members[middle + 1]:,}): the run from {lost_from} to {lost_to} is lost"
        ),
        warning,
    ), warning
    (listed,) = list_runs(path.parent)
    assert listed.status == "completed" and listed.steps == 400
    assert listed.damage == warning.removeprefix(f"{path}: ")


def test_damage_anywhere_in_a_recorded_gzip_loses_at_most_its_member(tmp_path, monkeypatch):
    """Wherever a .gz recorded by the recorder is garbled (after its start line),
    or garbled and cut short, it reads: only events of the run, in order, the end
    event wherever the last member is whole."""
    data, events = _recorded_gzip(tmp_path, monkeypatch)
    members = _members(data)
    originals = [_key(e) for e in events]
    path = tmp_path / "damaged.ndjson.gz"
    per_member = len(originals) // len(members)
    for at in range(400, len(data), len(data) // 37):
        for cut in (len(data), (at + len(data)) // 2):
            path.write_bytes(data[:cut])
            whole = len(load_run(path).events)  # cut short, not garbled
            path.write_bytes(_garbled(data, at)[:cut])
            run = load_run(path)
            read = [_key(e) for e in run.events]
            positions = [originals.index(e) for e in read]  # each an event of the run
            assert positions == sorted(positions) and positions[0] == 0, (at, cut)
            if cut == len(data) and at < members[-1] - 8:
                assert run.end is not None, (at, cut)
            assert len(read) >= whole - 2 * per_member, (at, cut)


def test_one_flipped_bit_in_a_later_member_makes_nothing_up(tmp_path, monkeypatch):
    """A bit flipped inside a later member's deflate data: zlib may decode a line that
    is still a valid, in-order event (a digit of its time changed) before the checksum
    fails, and keeping the member's lines before the failure kept such an event (a
    review: a 2m 32s run read as 3m 10s). A damaged member's text is not kept where a
    later member is read on from: every event read is one of the run's, unchanged."""
    data, events = _recorded_gzip(tmp_path, monkeypatch)
    members = _members(data)
    middle = len(members) // 2
    originals = {msgspec.json.encode(_key(e)) for e in events}
    path = tmp_path / "flipped.ndjson.gz"
    span = range(members[middle] + 20, members[middle + 1] - 20, 7)
    for at in span:
        for bit in (0, 3, 6):
            damaged = bytearray(data)
            damaged[at] ^= 1 << bit
            path.write_bytes(bytes(damaged))
            try:
                run = load_run(path)
            except RecordingError:
                continue
            made_up = [e for e in run.events if msgspec.json.encode(_key(e)) not in originals]
            assert not made_up, (at, bit, made_up[:1])


def test_a_single_gzip_member_damaged_mid_way_is_read_up_to_the_damage(tmp_path):
    """One gzip member (files of gpuscale before it started new ones, or gzip run
    by hand) damaged mid-way: zlib decodes garbage before it notices, often copies
    of earlier lines, which made the whole file unreadable ("time goes backwards")
    when it came in an earlier call than the damage. Text is held back until its
    member's checksum matches; the lines before the damage are read, and the
    warning says what is lost."""
    events = sample_events(steps=3000)  # over 1 MiB of text: zlib's output in calls
    packer = zlib.compressobj(6, zlib.DEFLATED, 31)
    data = b""
    for number, event in enumerate(events):
        data += packer.compress(msgspec.json.encode(event) + b"\n")
        if number % 50 == 0:
            data += packer.flush(zlib.Z_SYNC_FLUSH)
    data += packer.flush()
    path = tmp_path / "one-member.ndjson.gz"
    originals = [_key(e) for e in events]
    for fraction in (0.10, 0.25, 0.49):
        at = int(len(data) * fraction)
        path.write_bytes(_garbled(data, at))
        warnings: list[str] = []
        run = load_run(path, warnings.append)
        n = len(run.events)
        assert [_key(e) for e in run.events] == originals[:n] and n > len(events) * fraction / 2
        (warning,) = warnings
        said = re.escape(f"{path}: its gzip data is damaged after line {n:,}")
        said += r"( \(its checksum does not match\))?"
        said += re.escape(f": the {n:,} lines before it are read; the run after ")
        said += re.escape(format_duration_s(events[n - 1].t - events[0].t))
        assert re.fullmatch(said + LOST, warning), warning


def test_a_later_gzip_member_is_read_on_from_after_damage(tmp_path, good):
    """Gzip members made by any tool (``cat a.gz b.gz``): damage in one is read
    past to the next, whose lines (the end event among them) are read."""
    lines = _lines(good)
    parts = [lines[:30], lines[30:60], lines[60:-1]]
    members = [gzip.compress(b"\n".join(part) + b"\n", mtime=0) for part in parts]
    data = b"".join(members)
    path = tmp_path / "members.ndjson.gz"
    path.write_bytes(_garbled(data, len(members[0]) + len(members[1]) // 2, 4))
    warnings: list[str] = []
    run = load_run(path, warnings.append)
    originals = [_key(e) for e in sample_events()]
    read = [_key(e) for e in run.events]
    assert run.end is not None and read[-1] == originals[-1]
    assert read == originals[: len(read) - len(parts[2])] + originals[60:]
    (warning,) = warnings
    assert f"read on from the next gzip member (byte {len(members[0]) + len(members[1]):,})" in (
        warning
    )


def test_a_damaged_gz_too_large_to_scan_is_listed_from_its_first_line(tmp_path, monkeypatch):
    """``gpuscale runs`` reads a damaged .gz whole, as the reader does, but not one
    over LIST_GZIP_BYTES: that is listed from its first line, unscanned, as a whole
    one is (reading it all would make the listing as slow as a replay)."""
    from gpuscale.recording import store

    data, _ = _recorded_gzip(tmp_path, monkeypatch)
    members = _members(data)
    (tmp_path / "runs").mkdir()
    path = tmp_path / "runs" / "damaged.ndjson.gz"
    read: list[str] = []
    monkeypatch.setattr(store, "iter_events", lambda *a, **k: read.append("all") or iter(()))
    monkeypatch.setattr(store, "LIST_GZIP_BYTES", len(data) // 2)
    for member in (0, 1):  # its first line in the damaged member, or before it
        path.write_bytes(_garbled(data, (members[member] + members[member + 1]) // 2))
        (listed,) = store.list_runs(path.parent)
        assert listed.status == "unscanned" and listed.model == "mnist-cnn" and not read


def test_members_of_text_larger_than_a_read_are_read_whole(tmp_path):
    """Members whose text is over the reader's output limit per call (1 MiB), each
    compressed small: at a member's end zlib keeps that call's unconsumed input as
    both unconsumed_tail and unused_data, and adding the two up read the next member
    from the wrong byte: 'incorrect header check', then the file's first member
    again ('a second start event'). A real 8-GPU hour at 10 Hz is 20 MB of text."""
    from gpuscale.recording.reader import gunzip_chunks

    text = b"".join(
        b'{"kind":"gpu","t":%d.0,"index":7,"util_gpu_pct":90.0}\n' % i for i in range(90_000)
    )
    thirds = [text[: len(text) // 3], text[len(text) // 3 : 2 * len(text) // 3]]
    thirds.append(text[2 * len(text) // 3 :])
    path = tmp_path / "big.gz"
    path.write_bytes(b"".join(gzip.compress(part) for part in thirds))
    with open(path, "rb") as f:
        chunks = list(gunzip_chunks(f))
    assert all(isinstance(c, bytes) for c in chunks)  # no damage where there is none
    assert b"".join(chunks) == text
