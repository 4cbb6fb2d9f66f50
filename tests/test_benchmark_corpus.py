"""Where the benchmarks find the published corpus (benchmarks/corpus.py): an
explicit GPUSCALE_CORPUS is used or fails in one line, never replaced by another
file; else shared/corpus/ beside the checkout or a folder above it. No TensorFlow."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

corpus = pytest.importorskip("benchmarks.corpus")
ROOT = Path(__file__).resolve().parent.parent


def _shared_corpus(folder: Path) -> Path:
    path = folder / "shared" / "corpus" / "published-scaling.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"format": "published-scaling-tables", "tables": []}')
    return path


def test_an_explicit_corpus_is_used_even_when_another_is_beside_the_checkout(tmp_path, monkeypatch):
    beside = _shared_corpus(tmp_path)
    monkeypatch.setattr(corpus, "ROOT", tmp_path / "checkout")
    monkeypatch.delenv("GPUSCALE_CORPUS", raising=False)
    assert corpus.find_corpus() == beside
    missing = tmp_path / "nonexistent.json"
    monkeypatch.setenv("GPUSCALE_CORPUS", str(missing))
    assert corpus.find_corpus() == missing  # never the one beside the checkout
    with pytest.raises(SystemExit) as info:
        corpus.load_tables(corpus.find_corpus())
    message = str(info.value.code)
    assert message.startswith(f"{missing}: no published corpus there")
    assert "GPUSCALE_CORPUS" in message and "\n" not in message


def test_the_corpus_beside_a_folder_above_the_checkout_is_found(tmp_path, monkeypatch):
    monkeypatch.delenv("GPUSCALE_CORPUS", raising=False)
    monkeypatch.setattr(corpus, "ROOT", tmp_path / "wt" / "branch")  # a worktree, one deeper
    before = corpus.find_corpus()
    assert before is None or tmp_path not in before.parents
    found = _shared_corpus(tmp_path)
    assert corpus.find_corpus() == found
    assert corpus.load_tables(found) == []


def test_not_a_corpus_file_is_one_line(tmp_path):
    bad = tmp_path / "corpus.json"
    bad.write_text("{not json")
    with pytest.raises(SystemExit) as info:
        corpus.load_tables(bad)
    assert "cannot read the published corpus" in str(info.value.code)
    bad.write_text("[]")
    with pytest.raises(SystemExit, match="not a published-scaling-tables file"):
        corpus.load_tables(bad)


def test_the_prediction_benchmark_with_a_missing_explicit_corpus_is_one_line(tmp_path):
    missing = tmp_path / "nonexistent.json"
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "prediction.py")],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "GPUSCALE_CORPUS": str(missing), "HOME": str(tmp_path)},
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 1
    assert out.stderr.strip() == (
        f"{missing}: no published corpus there (GPUSCALE_CORPUS names it; set it to the "
        "corpus file or unset it)"
    )
