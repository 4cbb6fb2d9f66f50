"""``gpuscale runs``: list the recorded runs (when, model, devices, steps,
duration, size), as a table or as JSON."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpuscale.formatting import format_bytes, format_duration_s, markup_literal, visible


def register(sub) -> None:
    parser = sub.add_parser(
        "runs",
        help="list recorded runs",
        description=(
            "List the recorded runs: when each started, which model, how many devices, "
            "steps, duration and file size. Every 'gpuscale run' is recorded here unless "
            "given --no-record."
        ),
    )
    parser.add_argument(
        "--dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="folder to list (default: gpuscale's runs folder; $GPUSCALE_DATA_DIR/runs if set)",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    import msgspec

    from gpuscale.errors import GpuscaleError
    from gpuscale.recording.store import list_runs, runs_dir

    folder: Path = args.dir if args.dir is not None else runs_dir()
    if args.dir is not None and not folder.is_dir():
        what = "does not exist" if not folder.exists() else "is not a folder"
        raise GpuscaleError(f"--dir {folder} {what}")
    runs = list_runs(folder)
    if args.json:
        rows = []
        for run in runs:
            row = msgspec.to_builtins(run)
            when = run.when
            row["when"] = when.isoformat(timespec="seconds") if when else None
            rows.append(row)
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(rows), indent=2).decode() + "\n")
        return 0
    if not runs:
        print(f"No recordings in {folder} (every 'gpuscale run' saves one there).")
        return 0

    from rich.console import Console

    console = Console()
    if not console.is_terminal:  # a pipe or a file: whole lines, file names included
        console = Console(width=1000)
    rows = []
    problems = []
    for run in runs:
        when = run.when
        name = Path(run.path).name
        if run.problem is not None:
            problems.append(visible(f"{name}: {run.problem}"))
        rows.append(
            (
                when.strftime("%Y-%m-%d %H:%M") if when else "?",
                markup_literal(run.model, limit=60),
                markup_literal(
                    f"{run.devices}x{'cpu' if run.platform.startswith('cpu') else run.platform}"
                )
                if run.devices
                else "?",
                str(run.steps) if run.steps is not None else "n/a",
                format_duration_s(run.duration_s),
                format_bytes(run.size_bytes),
                markup_literal(run.status),
                markup_literal(name),
            )
        )
    # File names are never broken: the When column goes first when they do not fit
    # (gpuscale's own names start with the time), then the file names (with a hint).
    for show_when, show_files in ((True, True), (False, True), (True, False)):
        table = _table(folder, rows, show_when=show_when, show_files=show_files)
        if (
            console.measure(table, options=console.options.update_width(10_000)).maximum
            <= console.width
        ):
            break
    console.print(table)
    for line in problems:
        console.print(f"unreadable: {line}", highlight=False, markup=False)
    for group in sweep_groups(runs):
        counts = ", ".join(str(r.devices) for r in group)
        console.print(
            visible(
                f"sweep of {group[0].model} on {counts} devices; its scaling view: "
                f"gpuscale replay {' '.join(r.path for r in group)}"
            ),
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
    return 0


SWEEP_GAP_S = 600.0
"""Runs of one sweep start within this many seconds of the previous one ending."""


def sweep_groups(runs: list) -> list[list]:
    """Runs that look like one sweep (what ``gpuscale recommend`` records): the same
    model, completed, each starting within :data:`SWEEP_GAP_S` of the previous one's
    end, with a growing device count; groups of two runs or more."""
    done = sorted(
        (r for r in runs if r.status == "completed" and r.start_t is not None and r.devices),
        key=lambda r: r.start_t,
    )
    groups: list[list] = []
    current: list = []
    for run in done:
        if current:
            last = current[-1]
            end = last.start_t + (last.duration_s or 0.0)
            if (
                run.model == last.model
                and run.platform == last.platform
                and run.devices > last.devices
                and run.start_t - end <= SWEEP_GAP_S
            ):
                current.append(run)
                continue
            if len(current) > 1:
                groups.append(current)
        current = [run]
    if len(current) > 1:
        groups.append(current)
    return groups


def _table(folder: Path, rows: list[tuple[str, ...]], *, show_when: bool, show_files: bool):
    from rich import box
    from rich.table import Table

    table = Table(
        title=f"Recorded runs in {markup_literal(str(folder))}",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        collapse_padding=True,
        show_edge=False,
        pad_edge=False,
    )
    columns = [
        ("When", "left"),
        ("Model", "left"),
        ("Devices", "right"),
        ("Steps", "right"),
        ("Duration", "right"),
        ("Size", "right"),
        ("Status", "left"),
        ("File", "left"),
    ]
    keep = [
        i
        for i, (name, _) in enumerate(columns)
        if (name != "When" or show_when) and (name != "File" or show_files)
    ]
    for i in keep:
        name, justify = columns[i]
        table.add_column(name, justify=justify, no_wrap=True)
    if not show_files:
        table.caption = "(file names: a wider terminal, or gpuscale runs --json)"
        table.caption_justify = "left"
    for row in rows:
        table.add_row(*(row[i] for i in keep))
    return table
