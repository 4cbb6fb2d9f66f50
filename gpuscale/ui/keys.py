"""Every key of the dashboard, in one table: the app's bindings, the footer and the
help screen (``?``) are all made from :data:`KEYS` (the scaling view's from
:data:`SWEEP_KEYS`), and a test holds the README to them.

The footer holds what fits 80 columns in every mode (a replay of a failed run is the
longest: :data:`FOOTER_WIDTH`); the rest is in ``?`` only.

A :class:`Key` is one line of help: how it is written for people (``display``),
what it does (``help``), the footer's short label (``label``, ``""``: not in the
footer), when it applies (``mode``: ``live``, ``replay`` or ``both``), and the
Textual bindings behind it (``bindings``: key names and action; none for keys
Textual itself handles, like ``tab`` or the scroll keys).
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding

FOOTER_WIDTH = 80
"""The footer's labelled keys fit this many columns (a test holds them to it)."""


@dataclass(frozen=True)
class Key:
    display: str
    help: str
    label: str = ""
    mode: str = "both"
    bindings: tuple[tuple[str, str], ...] = ()
    priority: bool = False
    replay_help: str = ""
    """What the key does in a replay, where that differs from ``help`` (which then
    speaks of a live run)."""


CTRL_Q = Key(
    "ctrl+q",
    "as q",
    bindings=(("ctrl+q", "quit"),),  # Textual binds it too; both apps make quit act as q
    priority=True,
)
"""In both tables: Textual binds ctrl+q to quit in every app, so ``?`` lists it."""

KEYS: tuple[Key, ...] = (
    Key(
        "q",
        "quit; a live run is stopped cleanly first",
        "Quit",
        bindings=(("q", "quit_run"),),
        replay_help="quit",
    ),
    Key(
        "ctrl+c",
        "as q; a live run then exits 130 (interrupted)",
        bindings=(("ctrl+c", "interrupt"),),
        priority=True,
        replay_help="as q",
    ),
    CTRL_Q,
    Key("?", "this help", "Help", bindings=(("question_mark", "help"),)),
    Key(
        "space",
        "pause / resume the replay",
        "Pause",
        "replay",
        (("space", "toggle_replay"),),
        priority=True,
    ),
    Key(
        "←/→",
        "seek 10 s back / forward",
        "Seek",
        "replay",
        (("left", "seek(-1)"), ("right", "seek(1)")),
        priority=True,
    ),
    Key(
        "+/-",
        "faster / slower (0.25x to 100x)",
        "Speed",
        "replay",
        (("plus,equals_sign", "speed(1)"), ("minus,underscore", "speed(-1)")),
        priority=True,
    ),
    Key(
        "home/end",
        "back to the start / the final state",
        "",
        "replay",
        (("home", "restart"), ("end", "jump_end")),
    ),
    Key(
        "←/→",
        "previous / next panel",
        "Panel",
        "live",
        (("left", "panel(-1)"), ("right", "panel(1)")),
        # before a focused panel's own arrows (a scrolling one binds them to scroll
        # sideways): the keys keep their meaning, and the footer its label, after Tab
        priority=True,
    ),
    Key("tab/shift+tab", "next / previous panel"),
    Key("↑/↓ pgup/pgdn", "scroll the focused panel"),
    Key(
        "c",
        "next chart (alone when narrow, focused when wide)",
        "Chart",
        bindings=(("c", "next_chart"),),
    ),
    Key("p", "freeze the display (the run goes on)", "Freeze", bindings=(("p", "toggle_display"),)),
    Key(
        "s",
        "save an SVG screenshot in gpuscale's data folder",
        "SVG",
        bindings=(("s", "screenshot"),),
    ),
    Key("d", "show / hide debug lines in the log", bindings=(("d", "toggle_debug"),)),
    Key("t", "light / dark theme", bindings=(("t", "toggle_theme"),)),
    Key("e", "show the error again (failed runs)", "Error", bindings=(("e", "show_error"),)),
    Key("ctrl+p", "command palette"),
)


SWEEP_KEYS: tuple[Key, ...] = (
    Key(
        "q",
        "quit (a live sweep's run stops cleanly first)",
        "Quit",
        bindings=(("q", "quit_run"),),
    ),
    Key(
        "ctrl+c",
        "as q; a live sweep then exits 130 (interrupted)",
        bindings=(("ctrl+c", "interrupt"),),
        priority=True,
    ),
    CTRL_Q,
    Key("?", "this help", "Help", bindings=(("question_mark", "help"),)),
    Key(
        "r",
        "the recommendation full screen (again: back)",
        "Advice",
        bindings=(("r", "toggle_advice"), ("escape", "restore_advice")),
    ),
    Key("tab/shift+tab", "next / previous panel"),
    Key("↑/↓ pgup/pgdn", "scroll the focused panel (the recommendation)"),
    Key(
        "c",
        "next chart (alone when short, focused when tall)",
        "Chart",
        bindings=(("c", "next_chart"),),
    ),
    Key(
        "s",
        "save an SVG screenshot in gpuscale's data folder",
        "SVG",
        bindings=(("s", "screenshot"),),
    ),
    Key("t", "light / dark theme", bindings=(("t", "toggle_theme"),)),
    Key("ctrl+p", "command palette"),
)
"""The scaling view's keys (``replay`` of a sweep, ``recommend --watch``)."""


def bindings(table: tuple[Key, ...] = KEYS) -> list[Binding]:
    """The app's bindings: the first of each key's bindings shows in the footer."""
    out = []
    for key in table:
        for n, (names, action) in enumerate(key.bindings):
            out.append(
                Binding(
                    names,
                    action,
                    key.label or key.help,
                    show=bool(key.label) and n == 0,
                    key_display=key.display,
                    priority=key.priority,
                )
            )
    return out


def actions(mode: str) -> set[str]:
    """Action names (without arguments) that belong to ``mode`` only."""
    return {
        action.split("(")[0] for key in KEYS if key.mode == mode for _names, action in key.bindings
    }


def sweep_help_rows() -> list[tuple[str, str]]:
    """``(display, help)`` for the scaling view's help screen."""
    return [(k.display, k.help) for k in SWEEP_KEYS]


def help_rows(replay: bool) -> list[tuple[str, str]]:
    """``(display, help)`` for the help screen: the mode's own keys first; a
    replay's in its own words (no live run to stop)."""
    mode = "replay" if replay else "live"
    own = [(k.display, k.help) for k in KEYS if k.mode == mode]
    return own + [
        (k.display, (k.replay_help if replay else "") or k.help) for k in KEYS if k.mode == "both"
    ]
