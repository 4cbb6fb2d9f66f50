"""``gpuscale runs``: list the recorded runs (when, which sweep, model, devices,
steps, duration, size) and the sweeps they make (:mod:`gpuscale.recording.sweeps`),
as tables or as JSON."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from gpuscale.commands.paths import folder_arg
from gpuscale.formatting import format_bytes, format_duration_s, markup_literal, visible

_TIME_PREFIX = re.compile(r"^\d{8}-\d{6}_")
"""How gpuscale's own recording names begin: the time the run started."""


def register(sub) -> None:
    parser = sub.add_parser(
        "runs",
        help="list recorded runs and the sweeps they make",
        description=(
            "List the recorded runs: when each started, which model, how many devices "
            "(and the strategy and workers, where the runs differ in them), steps, duration "
            "and file size. Every 'gpuscale run' is recorded here unless "
            "given --no-record. The runs of one 'gpuscale recommend' sweep are listed as one "
            "sweep, by the sweep id they carry (older recordings: by a guess, marked '?'); "
            "'gpuscale replay NAME' and 'gpuscale recommend --from NAME' take a sweep's name, "
            "or a run's file name (or its beginning) as listed here."
        ),
    )
    parser.add_argument(
        "--dir",
        type=folder_arg,
        default=None,
        metavar="DIR",
        help="folder to list (default: gpuscale's runs folder; $GPUSCALE_DATA_DIR/runs if set)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print JSON instead of tables: {folder, runs: [...], sweeps: [...]}",
    )
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    import msgspec

    from gpuscale.errors import GpuscaleError
    from gpuscale.recording.store import list_runs, runs_dir
    from gpuscale.recording.sweeps import sweep_groups

    folder: Path = args.dir if args.dir is not None else runs_dir()
    if args.dir is not None and not folder.is_dir():
        what = "does not exist" if not folder.exists() else "is not a folder"
        raise GpuscaleError(f"--dir {folder} {what}")
    runs = list_runs(folder)
    groups = sweep_groups(runs)
    if args.json:
        rows = []
        for run in runs:
            row = msgspec.to_builtins(run)
            when = run.when
            row["when"] = when.isoformat(timespec="seconds") if when else None
            if run.sweep is not None:  # every field, defaults included
                ref = run.sweep
                row["sweep"] = {"id": ref.id, "index": ref.index, "planned": list(ref.planned)}
            rows.append(row)
        doc = {"folder": str(folder), "runs": rows, "sweeps": [g.to_json() for g in groups]}
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(doc), indent=2).decode() + "\n")
        return 0
    if not runs:
        print(empty_folder_line(folder))
        return 0

    from rich.text import Text

    from gpuscale.commands.console import text_console
    from gpuscale.recording.store import device_text

    console = text_console()
    if not console.is_terminal:  # a pipe or a file: whole lines, file names included
        console = text_console(width=1000)
    # Strategy (and workers) only where the runs listed differ in them: a multi-worker
    # run and a mirrored one of one model are otherwise the same "mlp 2xcpu".
    show_strategy = len({strategy_label(run) for run in runs if run.strategy}) > 1
    labels = group_labels(groups)
    label_of = {run.path: labels[group.name] for group in groups for run in group.runs}
    rows = []
    problems = []
    for run in runs:
        when = run.when
        name = Path(run.path).name
        if run.problem is not None:
            problems.append(("unreadable", visible(f"{name}: {run.problem}")))
        elif run.damage is not None:  # listed (and read) as far as it is whole
            problems.append(("damaged", visible(f"{name}: {run.damage}")))
        rows.append(
            (
                when.strftime("%Y-%m-%d %H:%M") if when else "?",
                label_of.get(run.path, ""),
                markup_literal(run.model, limit=60),
                markup_literal(device_text(run)) if run.devices else "?",
                markup_literal(strategy_label(run), limit=40),
                markup_literal(strategy_label(run, short=True), limit=12),
                str(run.steps) if run.steps is not None else "n/a",
                format_duration_s(run.duration_s),
                format_bytes(run.size_bytes),
                markup_literal(run.status),
                markup_literal(name),
            )
        )
    # File names are never broken nor hidden. When the table is too wide, what the
    # file names already say goes first: gpuscale's own names start with the time
    # (When) and carry the model and the devices (Model, Devices); then Size.
    # Narrower still, each run's file name gets a line of its own under the run, and
    # again only what the names say goes: a name without its time keeps When.
    names = [Path(run.path).name for run in runs]
    said = _said_by_names(runs)
    # Before any of that, the strategy is shortened ("mw×2" for "multi-worker, 2
    # workers"), so that time, size and status stay whole at 80 columns.
    layouts = [
        (set(), False),
        (set(), True),
        ({"When"} & said, True),
        (said, True),
        (said | {"Size"}, True),
        (({"When"} & said) | {"File"}, True),
        (said | {"File"}, True),
        (said | {"Size", "File"}, True),
    ]
    for hidden, short in layouts:
        table = _table(
            folder,
            rows,
            hidden=hidden,
            show_sweeps=bool(groups),
            show_strategy=show_strategy,
            short_strategy=short,
        )
        if (
            console.measure(table, options=console.options.update_width(10_000)).maximum
            <= console.width
        ):
            break
    if "File" not in hidden:
        _print(console, table)
    else:
        _print_with_file_lines(console, table, names)
    if show_strategy and short and any(run.workers > 1 for run in runs):
        console.print("Strategy: mw×N = multi-worker, N workers", highlight=False, markup=False)
    for word, line in problems:
        console.print(f"{word}: {line}", highlight=False, markup=False)
    if groups:
        console.print()
        prefix = f"{folder}/" if args.dir is not None else ""
        sweeps_line = Text(
            f"Sweeps: 'gpuscale replay {prefix}NAME' shows one, "
            f"'gpuscale recommend --from {prefix}NAME' re-judges it"
        )
        for renderable in (sweeps_line, _sweeps_table(groups, labels)):
            _print_stripped(console, renderable)
    return 0


def _said_by_names(runs) -> set[str]:
    """The columns every run's file name already says: gpuscale's own names
    (``20261121-193000_mnist-cnn_2xcpu.ndjson``) say When, Model and Devices."""
    from gpuscale.recording.store import device_text, name_says

    said = {"When", "Model", "Devices"}
    for run in runs:
        name = Path(run.path).name
        if not _TIME_PREFIX.match(name):
            said.discard("When")
        if not run.devices or not name_says(name, run.model, device_text(run)):
            said -= {"Model", "Devices"}
    return said if "When" in said else set()


def _print(console, table) -> None:
    """``table``; off a terminal without the spaces that pad its lines to its width."""
    if console.is_terminal:
        console.print(table)
        return
    with console.capture() as captured:
        console.print(table)
    for line in captured.get().splitlines():
        console.file.write(line.rstrip() + "\n")


def _print_stripped(console, renderable) -> None:
    """``renderable`` wrapped to the console's width, without trailing spaces."""
    for line in console.render_lines(renderable, console.options, pad=False, new_lines=False):
        console.print(_assembled(line))


def _print_with_file_lines(console, table, names: list[str]) -> None:
    """``table`` (one line per run, no File column) with each run's file name on a
    line of its own under it, indented, whole (folded only if wider than the screen)."""
    from rich.text import Text

    lines = console.render_lines(table, console.options, pad=False, new_lines=False)
    head = len(lines) - len(names)
    for line in lines[:head]:
        console.print(_assembled(line), overflow="fold")
    for line, name in zip(lines[head:], names, strict=True):
        console.print(_assembled(line), overflow="fold")
        console.print(Text("  " + name, style="dim"), overflow="fold")


def _assembled(line):
    from rich.text import Text

    text = Text.assemble(*((seg.text, seg.style) for seg in line))
    text.rstrip()
    return text


def strategy_label(run, *, short: bool = False) -> str:
    """The run's strategy as the Strategy column shows it: ``mirrored``,
    ``multi-worker, 2 workers`` (``short``: ``mw×2``); ``?`` when the recording
    does not say."""
    label = run.strategy or "?"
    if short and label == "multi-worker":
        return f"mw×{run.workers}"
    if run.workers > 1:
        label += f", {run.workers} workers"
    return label


def group_labels(groups: list) -> dict[str, str]:
    """A short label per sweep for the table's Sweep column: ``A``, ``B``, ...,
    with ``?`` after a guessed group's."""
    labels = {}
    for number, group in enumerate(groups, start=1):
        letters = ""
        while number:
            number, rest = divmod(number - 1, 26)
            letters = chr(ord("A") + rest) + letters
        labels[group.name] = letters + ("" if group.exact else "?")
    return labels


def _sweeps_table(groups: list, labels: dict[str, str]):
    """The sweeps under the runs: label, name (never broken), what each measured."""
    from rich.table import Table
    from rich.text import Text

    table = Table.grid(padding=(0, 1))
    table.add_column(no_wrap=True)
    table.add_column(no_wrap=True)
    table.add_column(overflow="fold")
    for group in groups:
        what = f"{group.model}, measured on {group.measured_text()}"
        if group.missing:
            what += "; not measured: " + ", ".join(group.why_missing())
        if not group.exact:
            what += (
                " (a guess from times and models: runs recorded alone, not by a sweep, "
                "or before sweep ids)"
            )
        table.add_row(labels[group.name], Text(visible(group.name)), Text(visible(what)))
    return table


def _table(
    folder: Path,
    rows: list[tuple[str, ...]],
    *,
    hidden: set[str],
    show_sweeps: bool,
    show_strategy: bool = False,
    short_strategy: bool = False,
):
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
    columns = [  # (name, header, justify): short headers, so that 80 columns hold a row
        ("When", "When", "left"),
        ("Sweep", "Sw", "left"),
        ("Model", "Model", "left"),
        ("Devices", "Dev", "right"),
        ("Strategy", "Strategy", "left"),
        ("Short", "Strategy", "left"),
        ("Steps", "Steps", "right"),
        ("Duration", "Time", "right"),
        ("Size", "Size", "right"),
        ("Status", "Status", "left"),
        ("File", "File", "left"),
    ]
    keep = [
        i
        for i, (name, _, _) in enumerate(columns)
        if name not in hidden
        and (name != "Sweep" or show_sweeps)
        and (name != "Strategy" or (show_strategy and not short_strategy))
        and (name != "Short" or (show_strategy and short_strategy))
    ]
    for i in keep:
        _, header, justify = columns[i]
        table.add_column(header, justify=justify, no_wrap=True)
    for row in rows:
        table.add_row(*(row[i] for i in keep))
    return table


def empty_folder_line(folder: Path) -> str:
    """What ``runs`` says of a folder with no recording: the runs folder is where every
    ``gpuscale run`` saves one; another (``--dir``) holds only what was put there."""
    from gpuscale.recording.store import runs_dir

    default = runs_dir()
    if _same_folder(folder, default):
        return f"No recordings in {visible(str(folder))} (every 'gpuscale run' saves one there)."
    return (
        f"No recordings in {visible(str(folder))} (gpuscale saves its runs in "
        f"{visible(str(default))}, which 'gpuscale runs' lists without --dir)."
    )


def _same_folder(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return a == b
