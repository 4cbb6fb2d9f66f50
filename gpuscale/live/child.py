"""The parent's side of a child process: start it (in its own session, dying with
the parent), name how it ended, and turn its stdout/stderr lines into leveled log
messages. Shared by every live run (:mod:`gpuscale.live.trainer_run`,
:mod:`gpuscale.live.script_run`, :mod:`gpuscale.live.cluster`). No TensorFlow."""

from __future__ import annotations

import ctypes
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

STOP_DEADLINE_S = 5.0
"""The longest :meth:`LiveRun.stop` takes, SIGKILL and the final EndEvent included."""
STOP_GRACE_S = 3.0
"""How long :meth:`LiveRun.stop` waits after SIGTERM before SIGKILL."""
INTERRUPT_GRACE_S = 10.0
"""How long a user's script stopped by hand (Ctrl-C in ``gpuscale run``, the dashboard's
``q``) has after the Ctrl-C gpuscale passes on to it (SIGINT to its process group) to
run its own ``except KeyboardInterrupt`` (save a checkpoint) and exit, before it is
stopped as a signal to gpuscale stops it (SIGTERM, SIGKILL after :data:`STOP_GRACE_S`):
such a stop takes at most this plus :data:`STOP_DEADLINE_S`."""
AFTER_EXIT_S = 2.0
"""How long to wait, after the child exits, for its last events to arrive."""

# TensorFlow's C++ log lines: "I0000 00:00:1795289356.204669    7852 port.cc:153] ..."
_TF_LOG = re.compile(r"^([IWEF])\d{4} [\d:.]+\s+\d+ [^\]]+\] (.*)$")
_HARMLESS = (
    "failed call to cuInit",  # no GPU on this machine: expected, said by the CPU fallback note
    "Could not find cuda drivers",
    "All log messages before absl::InitializeLog",
    "oneDNN custom operations are on",
    "Unable to register cu",  # cuDNN/cuFFT/cuBLAS factory double registration
    "computation placer already registered",
    # the second line of cpu_feature_guard's notice (its first is an I-line): not an error,
    # and a script that exits without a word of its own must not be quoted saying it
    "To enable the following instructions:",
)


def classify_line(line: str, stream: str) -> tuple[str, str]:
    """``(level, message)`` for one line the trainer printed: TensorFlow's C++
    logs keep their level (known start-up noise becomes ``debug``), other stderr
    lines are warnings, stdout lines info."""
    text = line.rstrip("\r\n")
    if any(h in text for h in _HARMLESS):
        return "debug", text
    match = _TF_LOG.match(text)
    if match:
        letter, message = match.groups()
        return {"I": "debug", "W": "warning", "E": "error", "F": "error"}[letter], message
    if stream == "stderr":
        return ("warning" if text.strip() else "debug"), text
    return "info", text


# -- child processes that die with gpuscale --------------------------------------------

_PR_SET_PDEATHSIG = 1
_spawn_requests: queue.SimpleQueue = queue.SimpleQueue()
_spawn_thread: threading.Thread | None = None
_spawn_lock = threading.Lock()


def _parent_death_guard(reaper_fd: int | None = None) -> Callable[[], None] | None:
    """A ``preexec_fn`` that has Linux SIGKILL the child when gpuscale dies
    (``prctl(PR_SET_PDEATHSIG)``), even by SIGKILL; ``None`` elsewhere. With
    ``reaper_fd`` (the :class:`GroupReaper`'s pipe), the child, in a session of its
    own, also hands its process group to the reaper itself, before it runs anything:
    nothing it starts can outlive gpuscale, however soon gpuscale dies."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def guard() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if reaper_fd is not None:  # after setsid: the group is this pid
            # SIGPIPE is back to its default here: a gone reaper must not kill the child
            mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGPIPE})
            try:
                os.write(reaper_fd, b"+%d\n" % os.getpid())  # one short write: atomic
            except OSError:
                signal.sigtimedwait([signal.SIGPIPE], 0)  # the one the write raised
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        if os.getppid() != parent:  # gpuscale died before the guard was set
            os._exit(1)

    return guard


def _spawner() -> None:
    while True:
        args, kwargs, box, ready = _spawn_requests.get()
        try:
            box.append(subprocess.Popen(args, **kwargs))
        except BaseException as exc:  # handed back to the caller
            box.append(exc)
        ready.set()


def cannot_start(argv: list[str]) -> str | None:
    """Why ``argv`` cannot be started, as the OS would say it (``No such file or
    directory``, ``Permission denied``), where that is plain before trying: a
    program named with a path that does not exist or is not executable, or a bare
    name not on ``PATH``. ``None``: it may start (starting it tells the rest)."""
    program = argv[0] if argv else ""
    if not program:
        return "No such file or directory"
    if os.sep in program or (os.altsep and os.altsep in program):
        if not os.path.exists(program):
            return "No such file or directory"
        if os.path.isdir(program) or not os.access(program, os.X_OK):
            return "Permission denied"
        return None
    return None if shutil.which(program) else "No such file or directory"


def spawn(args: list[str], **kwargs: Any) -> subprocess.Popen:
    """``subprocess.Popen(args, **kwargs)`` for a child that must not outlive gpuscale.

    On Linux the child gets ``PR_SET_PDEATHSIG`` = SIGKILL. The kernel sends it when
    the *thread* that forked the child ends, so every child is forked by one
    long-lived thread here (not by whichever thread called :meth:`start`, e.g. the
    dashboard's worker thread, which may end before the run does).

    The signal reaches the child alone, not what the child started (a training
    script's data loaders, a shell's commands). A child started in a session of
    its own (``start_new_session=True``) is therefore also handed to the
    :class:`GroupReaper`, which kills its whole process group when gpuscale dies;
    call :func:`release` once the group is over."""
    global _spawn_thread
    new_session = bool(kwargs.get("start_new_session"))
    channel = _reaper.channel() if new_session else None
    guard = _parent_death_guard(channel[0] if channel else None)
    if guard is None:
        if channel:
            os.close(channel[0])
        proc = subprocess.Popen(args, **kwargs)
        if new_session:
            _reaper.add(proc.pid)  # its own session: its process group is its pid
        return proc
    try:
        kwargs["preexec_fn"] = guard
        with _spawn_lock:
            if _spawn_thread is None or not _spawn_thread.is_alive():
                _spawn_thread = threading.Thread(
                    target=_spawner, name="gpuscale-spawner", daemon=True
                )
                _spawn_thread.start()
        box: list[Any] = []
        ready = threading.Event()
        _spawn_requests.put((args, kwargs, box, ready))
        ready.wait()
    finally:
        if channel:
            os.close(channel[0])
    result = box[0]
    if isinstance(result, BaseException):
        raise result
    if channel:
        _reaper.told(result.pid, channel[1])  # the child told the reaper itself
    return result


def release(proc: subprocess.Popen) -> None:
    """``proc``'s process group is over (stopped, its processes killed or gone):
    gpuscale's death need not kill it any more. Idempotent."""
    _reaper.discard(proc.pid)


_REAPER_CODE = """
import os, signal, sys
groups = set()
for line in sys.stdin:
    sign, digits = line[:1], line[1:].strip()
    if digits.isdigit():
        (groups.add if sign == "+" else groups.discard)(int(digits))
for group in groups:
    try:
        os.killpg(group, signal.SIGKILL)
    except OSError:
        pass
"""
"""The reaper's program: it reads ``+PGID`` / ``-PGID`` lines from gpuscale; at the
end of its input (gpuscale is gone, however it ended) it SIGKILLs the groups left."""


class GroupReaper:
    """A small process that outlives gpuscale just long enough to kill the process
    groups of its children, with everything they started, when gpuscale dies (even
    by ``kill -9``, when no code of gpuscale's runs). It holds the read end of a
    pipe that only gpuscale writes to: the pipe's end is gpuscale's death.

    Started with the first group (one per gpuscale process), in a session of its
    own (a Ctrl-C in the terminal is gpuscale's to handle, not the reaper's), and
    started again, told every group, should it have died. POSIX only; elsewhere
    (and where it cannot start) it does nothing and the children have only the
    death signal (:func:`spawn`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._groups: set[int] = set()
        self._proc: subprocess.Popen | None = None

    @property
    def groups(self) -> set[int]:
        """The process groups killed should gpuscale die now."""
        with self._lock:
            return set(self._groups)

    def add(self, pgid: int) -> None:
        with self._lock:
            self._groups.add(pgid)
            self._tell(f"+{pgid}")

    def channel(self) -> tuple[int, Any] | None:
        """For a child to tell the reaper its group itself (see :func:`spawn`): a
        copy of the pipe's write end (the caller closes it) and which reaper it
        reaches; ``None`` where there is no reaper."""
        with self._lock:
            if os.name != "posix":
                return None
            if self._proc is None or self._proc.poll() is not None:
                self._tell("")  # starts one, told every group
            if self._proc is None or self._proc.stdin is None:
                return None
            try:
                return os.dup(self._proc.stdin.fileno()), self._proc
            except (OSError, ValueError):
                return None

    def told(self, pgid: int, reaper: Any) -> None:
        """A child told ``reaper`` its group ``pgid``: remember it, and tell it again
        should that reaper be gone (the next one must know it)."""
        with self._lock:
            self._groups.add(pgid)
            if reaper is not self._proc or reaper.poll() is not None:
                self._tell(f"+{pgid}")

    def discard(self, pgid: int) -> None:
        with self._lock:
            if pgid in self._groups:
                self._groups.discard(pgid)
                self._tell(f"-{pgid}")

    def _tell(self, line: str) -> None:
        if os.name != "posix":
            return
        if self._proc is None or self._proc.poll() is not None:
            self._proc = self._start()
            if self._proc is None:
                return
            line = "\n".join(f"+{group}" for group in self._groups)  # all it must know
        try:
            assert self._proc.stdin is not None
            self._proc.stdin.write(line + "\n")
            self._proc.stdin.flush()
        except (OSError, ValueError):
            self._proc = None  # gone: the next call starts another

    @staticmethod
    def _start() -> subprocess.Popen | None:
        try:
            return subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _REAPER_CODE],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                text=True,
            )
        except OSError:
            return None


_reaper = GroupReaper()


def describe_exit(code: int) -> str:
    """``"was killed by SIGKILL"`` / ``"exited with status 3"`` for a Popen returncode."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name}"
    return f"exited with status {code}"


MAX_OUTPUT_LINE = 64 * 1024
"""Longest line of a child's output kept (bytes, or characters on a text pipe);
the rest of a longer line is read and thrown away, and the kept part ends with
a marker saying how much was cut. So no line can make a recording unreadable or
hold gpuscale's memory."""


def cut_marker(cut: int, unit: str = "bytes") -> str:
    """What ends a line that was cut: ``" [... 123456 more bytes cut by gpuscale]"``."""
    return f" [... {cut} more {unit} cut by gpuscale]"


def read_capped_line(stream: Any, limit: int = MAX_OUTPUT_LINE) -> tuple[Any, int]:
    """``(line, cut)``: the next line of ``stream`` (empty at the end), at most
    ``limit`` long, and how much of it was read and dropped after that."""
    raw = stream.readline(limit)
    if len(raw) < limit or raw[-1:] in (b"\n", "\n"):
        return raw, 0
    cut = 0
    while True:  # skip the rest of the line, never holding more than ``limit``
        more = stream.readline(limit)
        if not more:
            break
        if more[-1:] in (b"\n", "\n"):
            cut += len(more) - 1
            break
        cut += len(more)
    return raw, cut


def read_lines(
    stream: Any, name: str, on_line: Callable[[str, str], None], *, skip_blank: bool = True
) -> None:
    """Call ``on_line(level, message)`` for each line of a child's ``stream``
    (``name`` is ``stdout`` or ``stderr``; bytes or text), classified by
    :func:`classify_line` (blank lines skipped unless ``skip_blank`` is False);
    lines longer than :data:`MAX_OUTPUT_LINE` are cut with :func:`cut_marker`;
    returns at the end of the stream."""
    try:
        while True:
            # End of stream is b"" on a binary pipe and "" on a text one: stop at
            # either (a text pipe has no .mode, so it cannot be told apart up front).
            raw, cut = read_capped_line(stream)
            if not raw:
                break
            binary = isinstance(raw, bytes)
            line = raw.decode("utf-8", "replace") if binary else raw
            if skip_blank and not line.strip():
                continue
            level, message = classify_line(line, name)
            if cut:
                message += cut_marker(cut, "bytes" if binary else "characters")
            on_line(level, message)
    except (OSError, ValueError):
        pass
    finally:
        try:
            stream.close()
        except (OSError, ValueError):
            pass
