"""A script's run (``gpuscale.keras.ScalingMonitor``) has none of the built-in trainer's
options (``--steps``, ``--precision``, ``--probe-budget``, ``--phase-every``): the
advice on its probes names its own (``ScalingMonitor(budget=..., every=...)``, a run
stopped by hand or a short fit); the trainer's keeps its words."""

from __future__ import annotations

from recording_samples import sample_events, script_start

from gpuscale.analysis.phase_report import probes_text, share_known_text
from gpuscale.analysis.summary import RunSummary, summarize


def _over_budget(source: str) -> RunSummary:
    return RunSummary(
        source=source,
        devices=2,
        status="completed",
        steps_total=120,
        steps_counted=118,
        step_time_s=0.006,
        phase_steps=4,
        probes=4,
        probe_budget=0.02,
        probe_cost_s=0.05,
        probe_wall_share=0.05,
        share_target=0.02,
        comm_share_err=0.05,
        share_more_steps=900,
    )


def test_a_scripts_probes_over_budget_name_its_own_options():
    said = probes_text(_over_budget("script"))
    assert "over the budget" in said
    assert "--steps" not in said and "--precision" not in said and "--" not in said, said
    assert "ScalingMonitor(budget=...)" in said
    assert "stopped by hand, or a short fit" in said
    assert "a larger ScalingMonitor(budget=...)" in (share_known_text(_over_budget("script")))


def test_the_trainers_probes_over_budget_keep_its_words():
    said = probes_text(_over_budget("trainer"))
    assert "the run was stopped before --steps after probing early" in said
    assert "a --precision run waits until its steps pay for its probes" in said
    assert "a larger probe budget" in said and "ScalingMonitor" not in said


def test_a_script_from_its_events_is_a_script():
    assert summarize([script_start()]).source == "script"
    assert summarize(sample_events()).source == "trainer"


def test_a_script_without_probes_is_told_its_own_options():
    from gpuscale.commands.run import no_probe_why

    assert no_probe_why({"every": None, "probe_budget": 0}, script=True) == (
        "probes turned off: ScalingMonitor(budget=0)"
    )
    assert "ScalingMonitor(phases=False)" in no_probe_why({"phases": False}, script=True)
    assert "--" not in no_probe_why({"every": None, "probe_budget": 0.02}, script=True)
    assert no_probe_why({"probe_budget": 0}) == "probes turned off: --probe-budget 0"
