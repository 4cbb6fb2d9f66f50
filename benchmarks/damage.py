"""Randomly damaged copies of real recordings, through the real command line.

For each recording in ``sample_runs/*.ndjson`` (or the files given), makes
``--copies`` damaged copies (truncation, bit flips, deleted and duplicated
lines, garbage inserted, deep nesting, hostile field values, gzip of the
damage) and runs ``gpuscale recommend --from COPY`` and ``gpuscale runs`` on
them in separate processes. Counts exit codes and tracebacks; a traceback, an
exit code other than 0 or 2, or a raw control character printed is a failure.
The last line is ``damage: N copies, T tracebacks, R raw control characters``
and the exit code is 1 if any failed.

Run: ``python benchmarks/damage.py [--copies 60] [--seed 0] [FILE...]``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RAW_CONTROL = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]")
HOSTILE = [
    "1e308",
    "-1",
    "0",
    "5e-324",
    "4611686018427387904",
    '"\\u001b]0;PWNED\\u0007\\u001b[2J[/bold]"',
    '"[link=https://example.com]x"',
    "[" * 5000 + "]" * 5000,
    "NaN",
]


def damage(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    kind = rng.choice(
        ["truncate", "bitflip", "delete", "duplicate", "garbage", "nest", "field", "gzip"]
    )
    if kind == "truncate":
        return data[: rng.randrange(len(data))]
    if kind == "bitflip":
        raw = bytearray(data)
        for _ in range(rng.randint(1, 20)):
            i = rng.randrange(len(raw))
            raw[i] ^= 1 << rng.randrange(8)
        return bytes(raw)
    if kind == "delete":
        del lines[rng.randrange(len(lines))]
    elif kind == "duplicate":
        i = rng.randrange(len(lines))
        lines.insert(i, lines[i])
    elif kind == "garbage":
        lines.insert(rng.randrange(len(lines)), bytes(rng.randrange(256) for _ in range(80)))
    elif kind == "nest":
        depth = rng.choice([100, 10_000, 100_000])
        lines.insert(rng.randrange(len(lines)), b"[" * depth + b"]" * depth)
    elif kind == "field":
        i = rng.randrange(len(lines) - 1)
        try:
            obj = json.loads(lines[i])
            key = rng.choice(sorted(obj))
            obj[key] = "__X__"
            lines[i] = json.dumps(obj).replace('"__X__"', rng.choice(HOSTILE)).encode()
        except (ValueError, IndexError):
            pass
    elif kind == "gzip":
        return gzip.compress(damage(data, rng))
    return b"\n".join(lines)


def run(argv: list[str]) -> tuple[int, bytes]:
    proc = subprocess.run(
        [sys.executable, "-m", "gpuscale", *argv],
        capture_output=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200", "PYTHONPATH": str(ROOT)},
    )
    return proc.returncode, proc.stdout + proc.stderr


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--copies", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    files = args.files or sorted((ROOT / "sample_runs").glob("*.ndjson"))
    rng = random.Random(args.seed)
    tracebacks = raw = bad_exit = 0
    codes: dict[int, int] = {}
    with tempfile.TemporaryDirectory(prefix="gpuscale-damage-") as tmp:
        folder = Path(tmp) / "runs"
        folder.mkdir()
        for n in range(args.copies):
            source = files[n % len(files)]
            data = damage(source.read_bytes(), rng)
            suffix = ".ndjson.gz" if data[:2] == b"\x1f\x8b" else ".ndjson"
            copy = folder / f"copy{n:03d}{suffix}"
            copy.write_bytes(data)
            code, output = run(["recommend", "--from", str(copy)])
            codes[code] = codes.get(code, 0) + 1
            if b"Traceback" in output:
                tracebacks += 1
                print(
                    f"{copy.name} (from {source.name}): traceback\n{output.decode(errors='replace')[-800:]}"
                )
            if RAW_CONTROL.search(output):
                raw += 1
                print(f"{copy.name}: raw control character in the output")
            if code not in (0, 2):
                bad_exit += 1
        code, output = run(["runs", "--dir", str(folder)])
        if b"Traceback" in output or code != 0:
            tracebacks += 1
            print(f"runs --dir: exit {code}\n{output.decode(errors='replace')[-800:]}")
        if RAW_CONTROL.search(output):
            raw += 1
            print("runs --dir: raw control character in the output")
    print(f"exit codes: {dict(sorted(codes.items()))}")
    print(
        f"damage: {args.copies} copies, {tracebacks} tracebacks, {raw} raw control characters, "
        f"{bad_exit} other exit codes"
    )
    return 1 if tracebacks or raw or bad_exit else 0


if __name__ == "__main__":
    raise SystemExit(main())
