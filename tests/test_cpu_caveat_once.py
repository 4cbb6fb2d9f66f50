"""The caveat on CPU logical devices (they share the machine's cores, so more of
them add no compute; the answer is for them, not for GPUs) is said once in each
view: recommend's text, its --json, a live sweep's heading with its result, and
the scaling view's recommendation panel."""

from __future__ import annotations

import argparse
import json
import os

from fake_nvml import FakeNvml
from sweep_fixtures import CPU_RUNS, SAMPLES

from gpuscale.analysis.recommend import recommend
from gpuscale.analysis.sweep import load_inputs
from gpuscale.cli import main
from gpuscale.commands import recommend_live
from gpuscale.telemetry import nvml
from gpuscale.ui.widgets.scaling import recommendation_text

SHARED = ("share this machine's cores", "sharing the same cores", "they share")
"""How the views word the first half: the cores are shared."""


def _said(text: str) -> tuple[int, int]:
    """How often ``text`` says the cores are shared, and that it is not for GPUs."""
    cores = sum(text.count(words) for words in SHARED)
    scope = text.count("not for GPUs") + text.count("not what GPUs would do")
    return cores, scope


def test_recommend_text_says_it_once(capsys):
    assert main(["recommend", "--from", *map(str, CPU_RUNS), "--no-chart"]) == 0
    assert _said(capsys.readouterr().out) == (1, 1)


def test_recommend_json_says_it_once_in_what_it_lists(capsys):
    assert main(["recommend", "--from", *map(str, CPU_RUNS), "--json"]) == 0
    body = json.loads(capsys.readouterr().out)["recommendation"]
    listed = "\n".join([*body["reasons"], *body["confidence"], *body["warnings"]])
    assert _said(listed) == (1, 1)
    assert body["platform_note"]  # the whole caveat stays a field of its own


def test_the_scaling_views_panel_says_it_once():
    rec = recommend(load_inputs(CPU_RUNS).points)
    assert _said(recommendation_text(rec).plain) == (1, 1)


def test_one_measured_count_says_it_once_and_whole():
    rec = recommend(load_inputs([SAMPLES / "mnist-cnn_1xcpu.ndjson"]).points)
    text = recommendation_text(rec).plain
    assert _said(text) == (1, 1)
    assert "what is measured here is for these logical devices" in text


def test_a_live_sweeps_heading_names_the_devices_and_leaves_the_caveat_to_the_result(
    monkeypatch, capsys
):
    real_probe = nvml.probe
    monkeypatch.setattr(nvml, "probe", lambda: real_probe(FakeNvml.scenario("no-driver")))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    args = argparse.Namespace(sweep=[1, 2], devices=None, gpus=None)
    _counts, heading, _pool, _available = recommend_live.plan(args)
    from gpuscale.commands.recommend import report

    sweep = load_inputs(CPU_RUNS)
    assert report(sweep, floor=0.6, max_devices=None, as_json=False, heading=heading) == 0
    out = capsys.readouterr().out
    # what the caveat means for the answer is said once, under Confidence
    assert out.count("not for GPUs") == 1 and "not what GPUs would do" not in out
    # the heading still says what was swept
    assert out.startswith("Sweep on CPU logical devices sharing 2 CPU cores, NOT GPUs")
