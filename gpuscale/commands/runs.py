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

    from rich import box
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(
        title=f"Recorded runs in {markup_literal(str(folder))}",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        collapse_padding=True,
        show_edge=False,
        pad_edge=False,
    )
    for name, justify in (
        ("When", "left"),
        ("Model", "left"),
        ("Devices", "right"),
        ("Steps", "right"),
        ("Duration", "right"),
        ("Size", "right"),
        ("Status", "left"),
    ):
        table.add_column(name, justify=justify, no_wrap=True)
    show_files = console.width >= 120
    if show_files:
        table.add_column("File", overflow="fold")
    else:
        table.caption = "(file names: a wider terminal, or gpuscale runs --json)"
        table.caption_justify = "left"
    problems = []
    for run in runs:
        when = run.when
        name = Path(run.path).name
        if run.problem is not None:
            problems.append(visible(f"{name}: {run.problem}"))
        table.add_row(
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
            *([markup_literal(name)] if show_files else []),
        )
    console.print(table)
    for line in problems:
        console.print(f"unreadable: {line}", highlight=False, markup=False)
    return 0
