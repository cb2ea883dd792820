"""A benchmark's long child process (a training run) whose progress stays visible.

``subprocess.run(..., capture_output=True)`` hides the child's progress lines (rate, ETA) for
the whole run, minutes to an hour. :func:`run` passes the child's stderr through line by line as
it comes and still captures stdout (where ``--json`` puts its result) and the stderr's tail (for
the error message).
"""

from __future__ import annotations

import collections
import subprocess
import sys
import threading


def run(cmd: list[str], tail_lines: int = 40) -> subprocess.CompletedProcess:
    """Run ``cmd`` to its end: stdout captured whole, stderr echoed to ours as it comes, its
    last ``tail_lines`` lines kept as ``.stderr``."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
    tail: collections.deque[str] = collections.deque(maxlen=tail_lines)

    def echo() -> None:
        for line in proc.stderr:  # type: ignore[union-attr]
            sys.stderr.write(line)
            sys.stderr.flush()
            tail.append(line)

    reader = threading.Thread(target=echo, daemon=True)
    reader.start()
    try:
        out = proc.stdout.read()  # type: ignore[union-attr]
        proc.wait()
    except KeyboardInterrupt:  # Ctrl-C reached the child too: let it save what it finished
        proc.wait()
        reader.join()
        raise SystemExit(f"interrupted: {' '.join(cmd[:4])} ... exited {proc.returncode}") from None
    reader.join()
    return subprocess.CompletedProcess(cmd, proc.returncode, out, "".join(tail))
