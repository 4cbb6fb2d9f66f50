"""Drive ``gpuscale watch`` in a pseudo-terminal as a user would, on a real GPU.

Starts ``gpuscale watch ARGS`` in a pty of --cols x --rows, presses ``s`` (an SVG
screenshot into ``$GPUSCALE_DATA_DIR/screenshots``) at each --shot second, and
``q`` at --quit seconds; prints the exit status. For the device check, where no
tmux is at hand; the screenshots show what the dashboard drew from real NVML.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import select
import struct
import sys
import termios
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cols", type=int, default=120)
    parser.add_argument("--rows", type=int, default=36)
    parser.add_argument("--shot", type=float, action="append", default=[])
    parser.add_argument("--quit", type=float, default=30.0)
    parser.add_argument("--log", type=argparse.FileType("wb"), help="keep what was drawn")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if args.args[:1] == ["--"]:
        args.args = args.args[1:]
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["TERM"] = "xterm-256color"
        os.execvp(sys.executable, [sys.executable, "-m", "gpuscale", "watch", *args.args])
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", args.rows, args.cols, 0, 0))
    start = time.monotonic()
    keys = sorted((t, b"s") for t in args.shot) + [(args.quit, b"q")]
    received = 0
    while True:
        now = time.monotonic() - start
        while keys and keys[0][0] <= now:
            os.write(fd, keys.pop(0)[1])
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            received += len(data)
            if args.log:
                args.log.write(data)
        if now > args.quit + 30:
            os.kill(pid, 9)
            break
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    print(f"watch in a {args.cols}x{args.rows} pty: exit {code}, {received} bytes drawn")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
