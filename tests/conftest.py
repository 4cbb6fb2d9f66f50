"""Shared test set-up: recordings made by tests go to a temporary directory, never
the user's data directory; TensorFlow stays quiet."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


@pytest.fixture(autouse=True)
def _isolated_data_dir(tmp_path_factory, monkeypatch):
    data_dir = tmp_path_factory.mktemp("gpuscale-data")
    monkeypatch.setenv("GPUSCALE_DATA_DIR", str(data_dir))
    yield data_dir
