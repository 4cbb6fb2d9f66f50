"""`gpuscale recommend`: single or multi-GPU, how many, and why.

Offline (``--from FILE...``: recordings and/or sweep files) this imports no
TensorFlow. Live (no ``--from``) it runs a short sweep of the trainer over 1, 2,
4, ... devices, records each run and recommends from what it measured.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpuscale.commands.paths import name_arg
from gpuscale.errors import EXIT_INTERRUPTED, GpuscaleError
from gpuscale.events.limits import MAX_DEVICES
from gpuscale.formatting import join_clauses


def register(sub) -> None:
    parser = sub.add_parser(
        "recommend",
        help="single or multi-GPU, how many, and why (measured, predicted, explained)",
        description=(
            "Recommend a device count and configuration. With --from, from recordings "
            "and/or sweep files (no TensorFlow needed); without it, run a short sweep of the "
            "trainer over 1, 2, 4, ... devices first (same options as 'gpuscale run')."
        ),
    )
    parser.add_argument(
        "--from",
        dest="inputs",
        type=name_arg,
        nargs="+",
        metavar="FILE",
        help="recordings (.ndjson) and/or sweep files (.json, see docs/sweep-format.md), "
        "or a recorded sweep by the name 'gpuscale runs' shows (sweep-...: its measured runs)",
    )
    parser.add_argument(
        "--min-efficiency",
        type=_fraction,
        default=None,
        metavar="F",
        help="floor on the marginal efficiency of each doubling: a fraction in (0, 1] "
        "like 0.6, or a percentage written with %% like 60%% (default 0.6); below 0.52 it "
        "is raised to 0.52: each doubling must add at least 4%% samples/s",
    )
    parser.add_argument(
        "--max-devices",
        type=_positive_int,
        default=None,
        metavar="N",
        help="recommend at most N devices, measured counts included, and predict up to N "
        "(default: what the sweep file says the machine has; predictions up to 8)",
    )
    parser.add_argument(
        "--price-per-device-hour",
        type=_price,
        default=None,
        metavar="PRICE",
        help="price of one device for an hour (any currency): adds the cost per million "
        "samples of every count and a line such as '8 devices: 5.07x faster than 1, 1.58x "
        "the cost per million samples' (sample_runs/seed002_mnist.json)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the whole result as one JSON object (a sweep file --from reads back)",
    )
    parser.add_argument(
        "--no-chart",
        action="store_true",
        help="do not print the scaling chart under the tables",
    )
    parser.add_argument(
        "--plot",
        type=name_arg,
        metavar="FILE",
        help="also write the scaling chart to FILE, SVG or PNG by its extension "
        "(needs the 'plot' extra: pip install 'gpuscale[plot]')",
    )
    first_live = len(parser._actions)
    live = parser.add_argument_group("live sweep (without --from)")
    live.add_argument(
        "--sweep",
        type=_count_list,
        metavar="LIST",
        help="device counts to run, e.g. 1,2,4 (default: 1, 2, 4, ... up to what there is)",
    )
    live.add_argument(
        "--watch",
        action="store_true",
        help="run the sweep (the built-in trainer's, or your script's after '--') inside the "
        "scaling view: the run in progress as 'watch' shows it "
        "(devices, step time, phases) beside throughput vs devices filling in, the "
        "recommendation after each count; q stops and recommends from what was measured "
        "(off a terminal: the plain text result)",
    )
    live.add_argument(
        "--no-record",
        action="store_true",
        help="do not keep recordings of the sweep's runs",
    )
    live.add_argument(
        "--no-reuse",
        action="store_true",
        help="start a fresh trainer process (TensorFlow) for each device count; by default "
        "the counts run one after another in one process, each still its own run and recording",
    )
    from gpuscale.trainer.options import add_trainer_arguments  # no TensorFlow

    add_trainer_arguments(parser)
    for action in parser._actions:  # the sweep's own meaning of two trainer flags
        if action.dest == "steps":
            action.default = 40
            action.help = "steps per run of the sweep, warm-up included (default 40)"
        elif action.dest == "devices":
            action.help = "sweep up to N devices (default: all GPUs, or CPU logical devices)"
    # What only a live sweep reads: refused with --from rather than silently ignored.
    for action in parser._actions[first_live:]:
        if action.option_strings:
            action.__class__ = _noting_use(type(action))
    parser.add_argument(
        "command",
        nargs="...",
        metavar="-- COMMAND",
        help="sweep your own script instead of the trainer, e.g. '-- python train.py' (its "
        "model.fit needs gpuscale.keras.ScalingMonitor(); each run gets its devices from "
        "GPUSCALE_DEVICES)",
    )
    parser.set_defaults(func=main, live_flags_given=())


def _fraction(text: str) -> float:
    """A fraction in (0, 1] (``0.6``) or a percentage written with ``%`` (``60%``).
    A bare number above 1 is refused rather than guessed to be a percentage."""
    expected = f"expected a fraction in (0, 1] like 0.6, or a percentage like 60%, got {text!r}"
    body = text.strip()
    percent = body.endswith("%")
    try:
        value = float(body[:-1] if percent else body)
    except ValueError:
        raise argparse.ArgumentTypeError(expected) from None
    if percent:
        value /= 100
    if not 0 < value <= 1:  # also refuses nan
        raise argparse.ArgumentTypeError(expected)
    return value


def _price(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a price like 2.5, got {text!r}") from None
    if not (value > 0 and value != float("inf")):  # also refuses nan
        raise argparse.ArgumentTypeError(f"expected a positive price, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {text!r}")
    if value > MAX_DEVICES:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_DEVICES:,} devices, got {text!r}")
    return value


def _count_list(text: str) -> list[int]:
    try:
        given = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected device counts like 1,2,4, got {text!r}"
        ) from None
    counts = sorted(set(given))
    if len(counts) != len(given):
        twice = sorted({n for n in given if given.count(n) > 1})
        raise argparse.ArgumentTypeError(
            f"{text!r} gives {', '.join(map(str, twice))} more than once: "
            "each device count is one run; give each once"
        )
    if not counts or counts[0] < 1:
        raise argparse.ArgumentTypeError(f"expected device counts like 1,2,4, got {text!r}")
    if counts[-1] > MAX_DEVICES:
        raise argparse.ArgumentTypeError(
            f"expected device counts of at most {MAX_DEVICES:,}, got {text!r}"
        )
    return counts


def main(args) -> int:
    from gpuscale.analysis.recommend import DEFAULT_MIN_EFFICIENCY
    from gpuscale.live.script_run import split_command

    floor = args.min_efficiency if args.min_efficiency is not None else DEFAULT_MIN_EFFICIENCY
    if args.plot:  # a bad file name is refused before a live sweep spends minutes
        from gpuscale.plots.figure import plot_format

        plot_format(args.plot)
    if not args.inputs and args.strategy == "multi-worker":
        raise GpuscaleError(
            "recommend cannot sweep --strategy multi-worker itself: record each count with "
            "'gpuscale run --strategy multi-worker --local-workers N' and give the recordings "
            "with --from"
        )
    if args.watch and args.inputs:
        raise GpuscaleError(
            "--watch runs a live sweep; to see recordings in the scaling view: "
            "gpuscale replay FILE FILE... (or a sweep's name from 'gpuscale runs')"
        )
    if args.inputs:
        refuse_live_flags(args)
        if args.command:
            raise GpuscaleError(
                "--from reads recorded runs; a command ('-- ...') is for a live sweep of "
                "your script: give one or the other"
            )
    if args.watch and args.json:
        raise GpuscaleError("--watch shows the sweep on screen; leave it out for --json")
    signal_name = None
    failure = None  # a sweep's count that failed after others were measured
    if args.inputs:
        sweep, heading = load_from(args.inputs)
    elif args.watch and sys.stdout.isatty():
        from gpuscale.commands.recommend_live import SweepFailed
        from gpuscale.commands.recommend_watch import watch_sweep

        try:  # the built-in trainer's sweep, or the script's after '--'
            watched, heading, signal_name = watch_sweep(args, floor, split_command(args.command))
        except SweepFailed as failed:  # what ran is printed, then the failure and its status
            watched, heading, failure = failed.sweep, failed.heading, failed
        if watched is None:  # q before the first count: the user quit; a note, exit 0
            print(f"gpuscale: {heading}", file=sys.stderr)
            return 0
        sweep = watched
    elif command := split_command(args.command):
        from gpuscale.commands.recommend_live import SweepFailed, SweepInterrupted
        from gpuscale.commands.recommend_script import run_script_sweep

        try:
            sweep, heading = run_script_sweep(args, command, quiet=no_progress(args))
        except SweepInterrupted as stopped:  # what ran is printed, then exit 130
            sweep, heading, signal_name = stopped.sweep, stopped.heading, stopped.signal_name
        except SweepFailed as failed:  # what ran is printed, then the script's line and status
            sweep, heading, failure = failed.sweep, failed.heading, failed
        say_not_a_terminal(args)
    else:
        from gpuscale.commands.recommend_live import SweepFailed, SweepInterrupted, run_sweep

        try:
            sweep, heading = run_sweep(args, quiet=no_progress(args))
        except SweepInterrupted as stopped:  # what ran is printed, then exit 130
            sweep, heading, signal_name = stopped.sweep, stopped.heading, stopped.signal_name
        except SweepFailed as failed:  # what ran is printed, then the failure and exit 1
            sweep, heading, failure = failed.sweep, failed.heading, failed
        say_not_a_terminal(args)
    if args.max_devices is not None:  # asked for: predict that far, whatever the machine has
        sweep.available_devices = None
    code = report(
        sweep,
        floor=floor,
        max_devices=args.max_devices,
        as_json=args.json,
        heading=heading,
        chart=not args.no_chart,
        plot=args.plot,
        price=args.price_per_device_hour,
    )
    if failure is not None:  # after the report, as `run` says it after the summary
        from gpuscale.formatting import visible

        print(f"gpuscale: error: {visible(failure.message)}", file=sys.stderr)
        return failure.exit_code
    return EXIT_INTERRUPTED if signal_name else code


def say_not_a_terminal(args) -> None:
    """``--watch`` piped or redirected: a screen would write escape codes for ever, so
    the sweep ran as text; said after the sweep, so that a refused configuration
    stays one line."""
    if args.watch:
        print(
            "gpuscale: recommend --watch shows the sweep in a terminal; stdout is not one, "
            "so this is the sweep's text result",
            file=sys.stderr,
        )


def no_progress(args) -> bool:
    """Whether a live sweep keeps its progress off stderr: with ``--json`` where stderr
    is not a terminal (a log beside the document; on a terminal a person waits).
    Where the sweep is recorded is said on stderr either way."""
    if not args.json:
        return False
    from gpuscale.commands.console import text_console

    return not text_console(stderr=True).is_terminal


def load_from(inputs: list) -> tuple:
    """``--from``'s inputs (files, sweep names) -> the sweep and its heading; what
    the readers forgave is said on stderr. Shared with ``replay`` off a terminal."""
    from gpuscale.analysis.sweep import load_inputs
    from gpuscale.errors import GpuscaleError
    from gpuscale.recording.sweeps import resolve_inputs

    resolved = resolve_inputs(inputs)  # a sweep's name: its measured recordings
    try:
        sweep = load_inputs(
            as_given([str(name) for name in inputs], resolved.paths), cut_short=resolved.cut_short
        )
    except GpuscaleError as exc:
        exc.warnings = [*resolved.warnings, *exc.warnings]
        raise
    if len(inputs) == 1 and len(resolved.sweeps) == 1:  # one sweep, by its name
        sweep.name = resolved.sweeps[0].name
    sweep.notes = [*resolved.notes, *sweep.notes]
    sweep.warnings = [*resolved.warnings, *sweep.warnings]  # a count's file unreadable
    print_warnings(sweep.warnings)
    return sweep, join_clauses(resolved.notes) or None


def print_from(inputs: list, sweep=None) -> int:
    """What ``gpuscale recommend --from INPUTS`` prints, with its defaults.
    ``sweep``: the inputs already read (sweep files by path, no sweep's name: no
    heading), which are not read again; what their readers forgave is said here."""
    from gpuscale.analysis.recommend import DEFAULT_MIN_EFFICIENCY

    if sweep is None:
        sweep, heading = load_from(inputs)
    else:
        print_warnings(sweep.warnings)
        heading = None
    return report(
        sweep, floor=DEFAULT_MIN_EFFICIENCY, max_devices=None, as_json=False, heading=heading
    )


_NOTING: dict[type, type] = {}


def _noting_use(action_class: type[argparse.Action]) -> type[argparse.Action]:
    """``action_class`` that also notes its flag in ``live_flags_given`` when the
    command line gives it (whatever the value, the default included)."""
    if action_class not in _NOTING:

        class Noting(action_class):  # type: ignore[misc, valid-type]
            def __call__(self, parser, namespace, values, option_string=None):
                flag = option_string or self.option_strings[-1]
                namespace.live_flags_given = (*getattr(namespace, "live_flags_given", ()), flag)
                super().__call__(parser, namespace, values, option_string)

        Noting.__name__ = f"Noting{action_class.__name__}"
        _NOTING[action_class] = Noting
    return _NOTING[action_class]


def refuse_live_flags(args) -> None:
    """With ``--from`` nothing is run, so the live sweep's flags (the device counts,
    the trainer's options) would be ignored: refused, naming them, in one line."""
    given = list(dict.fromkeys(getattr(args, "live_flags_given", ())))
    if given:
        names = ", ".join(given)
        raise GpuscaleError(
            f"{names} {'applies' if len(given) == 1 else 'apply'} to a live sweep, not to "
            "--from (the recordings and sweep files say what was run); leave "
            f"{'it' if len(given) == 1 else 'them'} out, or drop --from to run a sweep"
        )


def print_warnings(warnings: list[str]) -> None:
    """What the inputs' readers forgave, one escaped line each on stderr (stdout
    stays the table or the JSON)."""
    from gpuscale.formatting import visible

    for warning in dict.fromkeys(warnings):
        print(f"gpuscale: warning: {visible(warning)}", file=sys.stderr)


def report(
    sweep,
    *,
    floor: float,
    max_devices: int | None,
    as_json: bool,
    heading: str | None,
    chart: bool = True,
    plot: str | None = None,
    price: float | None = None,
) -> int:
    """Recommend from a :class:`~gpuscale.analysis.sweep.Sweep` and print it."""
    import msgspec

    from gpuscale.analysis.recommend import recommend
    from gpuscale.analysis.sweep import sweep_document

    rec = recommend(
        sweep.points,
        min_efficiency=floor,
        max_devices=max_devices,
        available_devices=sweep.available_devices,
        price_per_device_hour=price,
        topology=sweep.topology,
    )
    print_warnings(rec.warnings)  # runs combined though they disagree: on stderr too
    if plot:
        from gpuscale.commands.recommend_chart import write_plot_file

        write_plot_file(rec, plot)
    if as_json:
        body = msgspec.to_builtins(rec)
        # every warning stderr said: the inputs' (what the readers forgave, copies
        # counted once; load_from printed them) before the recommendation's own
        body["warnings"] = list(dict.fromkeys([*sweep.warnings, *rec.warnings]))
        body.pop("table")
        body.pop("models")
        # Each row carries the price it was costed at (--price-per-device-hour's
        # included): read back, the file gives the same costs without the flag.
        prices = {c.config: c.price_per_device_hour for c in rec.costs}
        table = [
            msgspec.structs.replace(p, price_per_device_hour=prices[p.config])
            if prices.get(p.config) is not None
            else p
            for p in rec.table
        ]
        doc = sweep_document(
            table,
            title="; ".join(dict.fromkeys(sweep.titles)) or None,
            source="; ".join(dict.fromkeys(sweep.sources)) or None,
            note=" ".join(dict.fromkeys(sweep.notes)) or None,
            available_devices=sweep.available_devices,
            models=msgspec.to_builtins(rec.models),
            recommendation=body,
            sweep_wall_s=sweep.wall_s,
            sweep_name=sweep.name,
        )
        # msgspec encodes 100k points in well under a second (json.dump with an indent
        # writes piece by piece in pure Python: half a minute), and writes a non-finite
        # float as null, so the output always reads back (json.dump writes NaN/Infinity).
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(doc), indent=2).decode() + "\n")
        return 0
    from gpuscale.commands.recommend_render import render

    render(rec, sweep, heading=heading, chart=chart)
    return 0


__all__ = ["register", "main", "report", "GpuscaleError"]


def as_given(names: list[str], paths: list[Path]) -> list[str | Path]:
    """``paths`` (the inputs resolved, a sweep's name become its recordings) with
    each that the user typed as a file put back as typed, so messages name it so:
    ``./X`` given after ``X`` is "./X: given twice (the same file as X)"."""
    left = list(names)
    out: list[str | Path] = []
    for path in paths:
        typed = next((name for name in left if Path(name) == path), None)
        if typed is None:
            out.append(path)
        else:
            left.remove(typed)
            out.append(typed)
    return out
