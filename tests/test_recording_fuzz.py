"""Fuzz: whatever is done to a recording, the reader returns a run or raises
RecordingError, never anything else (deterministic: hypothesis derandomized)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from recording_samples import sample_events, write_run

from gpuscale.events.schema import StartEvent
from gpuscale.recording.reader import CHUNK_BYTES, LoadedRun, RecordingError, iter_events, load_run
from gpuscale.recording.store import list_runs

FUZZ = settings(
    derandomize=True,
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)

NASTY_VALUES = [
    "1e999",
    "-1e999",
    "1e-999",
    "NaN",
    "Infinity",
    "-0",
    "123456789012345678901234567890",
    "-9223372036854775809",
    "18446744073709551616",
    "null",
    "true",
    '""',
    '"\\ud800"',
    '"\\u0000"',
    "[]",
    "{}",
    "[" * 5000 + "]" * 5000,
    '{"a":' * 3000 + "1" + "}" * 3000,
    '"' + "x" * 100_000 + '"',
]

_ORIGINAL: dict[str, bytes] = {}


def _original() -> bytes:
    if "plain" not in _ORIGINAL:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            _ORIGINAL["plain"] = write_run(
                Path(tmp) / "r.ndjson", sample_events(steps=12)
            ).read_bytes()
    return _ORIGINAL["plain"]


@st.composite
def _mutation(draw, data: bytes) -> bytes:
    kind = draw(
        st.sampled_from(
            [
                "flip",
                "cut",
                "delete",
                "insert",
                "swap_lines",
                "dup_line",
                "field",
                "swap_fields",
                "kind",
            ]
        )
    )
    size = len(data)
    if kind == "flip":
        out = bytearray(data)
        for _ in range(draw(st.integers(1, 8))):
            out[draw(st.integers(0, size - 1))] ^= draw(st.integers(1, 255))
        return bytes(out)
    if kind == "cut":
        return data[: draw(st.integers(0, size))]
    if kind == "delete":
        a = draw(st.integers(0, size))
        return data[:a] + data[a + draw(st.integers(1, 200)) :]
    if kind == "insert":
        a = draw(st.integers(0, size))
        return data[:a] + draw(st.binary(min_size=1, max_size=64)) + data[a:]
    lines = data.split(b"\n")
    i = draw(st.integers(0, len(lines) - 2))
    j = draw(st.integers(0, len(lines) - 2))
    if kind == "swap_lines":
        lines[i], lines[j] = lines[j], lines[i]
    elif kind == "dup_line":
        lines.insert(j, lines[i])
    else:
        try:
            obj = json.loads(lines[i])
        except ValueError:  # an earlier mutation broke this line already
            obj = None
        if not isinstance(obj, dict) or not obj:
            return data[: draw(st.integers(0, size))]
        keys = sorted(obj)
        if kind == "field":
            key = draw(st.sampled_from(keys + ["extra"]))
            value = draw(st.sampled_from(NASTY_VALUES))
            body = ",".join(
                f"{json.dumps(k)}:{value if k == key else json.dumps(v)}" for k, v in obj.items()
            )
            if key not in obj:
                body += f',"extra":{value}'
            lines[i] = ("{" + body + "}").encode()
        elif kind == "swap_fields":
            a, b = draw(st.sampled_from(keys)), draw(st.sampled_from(keys))
            obj[a], obj[b] = obj[b], obj[a]
            lines[i] = json.dumps(obj).encode()
        else:
            obj["kind"] = draw(st.sampled_from(["start", "end", "gpu", "step", "bogus", 7, None]))
            lines[i] = json.dumps(obj).encode()
    return b"\n".join(lines)


def _read_every_way(path: Path) -> None:
    """load_run, iter_events and list_runs: a run, or a RecordingError; nothing else."""
    try:
        run = load_run(path)
    except RecordingError as exc:
        assert str(exc).startswith(f"{path}: ")
        assert exc.exit_code == 2
    else:
        assert isinstance(run, LoadedRun)
        assert isinstance(run.events[0], StartEvent) and run.events[0] is run.start
        assert all(not isinstance(e, StartEvent) for e in run.events[1:])
    try:
        for _ in iter_events(path):
            pass
    except RecordingError:
        pass
    for info in list_runs(path.parent):
        assert info.status in {
            "completed",
            "stopped",
            "failed",
            "lost",
            "interrupted",
            "unreadable",
        }


@FUZZ
@given(data=st.data())
def test_fuzzed_plain_recordings(tmp_path, data):
    original = _original()
    mutated = original
    for _ in range(data.draw(st.integers(1, 3))):
        mutated = data.draw(_mutation(mutated)) if mutated.count(b"\n") > 1 else mutated
    path = tmp_path / "fuzz.ndjson"
    path.write_bytes(mutated)
    _read_every_way(path)


@FUZZ
@given(data=st.data())
def test_fuzzed_gzip_recordings(tmp_path, data):
    original = _original()
    mutated = data.draw(_mutation(original))
    packed = gzip.compress(mutated, mtime=0)
    if data.draw(st.booleans()):  # damage the compressed bytes themselves
        out = bytearray(packed)
        how = data.draw(st.sampled_from(["flip", "cut"]))
        if how == "flip":
            out[data.draw(st.integers(0, len(out) - 1))] ^= data.draw(st.integers(1, 255))
        else:
            del out[data.draw(st.integers(0, len(out) - 1)) :]
        packed = bytes(out)
    path = tmp_path / "fuzz.ndjson.gz"
    path.write_bytes(packed)
    _read_every_way(path)


@FUZZ
@given(blob=st.binary(max_size=2000))
def test_arbitrary_bytes(tmp_path, blob):
    path = tmp_path / "blob.ndjson"
    path.write_bytes(blob)
    _read_every_way(path)


@FUZZ
@given(
    lines=st.lists(
        st.recursive(
            st.none()
            | st.booleans()
            | st.floats(allow_nan=False)
            | st.integers()
            | st.text(max_size=20),
            lambda inner: (
                st.lists(inner, max_size=4)
                | st.dictionaries(st.text(max_size=8), inner, max_size=4)
            ),
            max_leaves=12,
        ),
        max_size=6,
    )
)
def test_arbitrary_json_after_a_valid_start(tmp_path, lines):
    start = _original().split(b"\n")[0]
    path = tmp_path / "json.ndjson"
    path.write_bytes(start + b"\n" + b"".join(json.dumps(v).encode() + b"\n" for v in lines))
    _read_every_way(path)


@pytest.mark.parametrize("seed", range(3))
def test_seeded_random_corruption_of_a_long_run(tmp_path, seed):
    """Plain seeded corruption of a bigger file (several read chunks): many flips."""
    import random

    rng = random.Random(seed)
    data = bytearray(write_run(tmp_path / "long.ndjson", sample_events(steps=4000)).read_bytes())
    assert len(data) > CHUNK_BYTES  # spans read chunks
    for _ in range(20):
        data[rng.randrange(len(data))] = rng.randrange(256)
    path = tmp_path / "corrupt.ndjson"
    path.write_bytes(bytes(data))
    _read_every_way(path)
