"""The ``simreal`` command line.

    simreal list                                   # tasks and robots
    simreal train quadrotor-hover                  # train the default task on CPU
    simreal train quadrotor-hover train.num_envs=512 seed=3
    simreal train --resume runs/quadrotor-hover/20261121-120000
    simreal eval RUN_DIR --episodes 256 --backend mjx --json
    simreal export RUN_DIR
    simreal import policy.pt --spec spec.yaml --robot g1_12dof --out bundle
    simreal play RUN_DIR --out play.mp4
    simreal retarget clip.bvh --robot g1 --out clip.npz
    simreal deploy ros2 BUNDLE --out ws/src
    simreal label frames.npz --task "..." --endpoint http://127.0.0.1:8000/v1 --model M --pairs 500 --out labels.npz

Each verb lives in its own module of this package, named for it (``train-bc`` in
``train_bc.py``; ``list``, ``eval`` and ``import`` in ``list_.py``, ``eval_.py`` and ``import_.py``:
a submodule's name is bound in this package's namespace on import, so ``list.py`` would shadow
the builtin ``list`` here, and ``import`` is a keyword), exposing ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int``. Building the parser imports every verb
module, so they and the package ``__init__``s import nothing heavy at the top: JAX, Brax,
MuJoCo, torch and the rest load inside ``run``. That keeps ``simreal --help`` fast and lets
``simreal deploy run`` work on a robot computer that has only the lean runtime (README, "On
the robot computer"; ``tests/test_lean_runtime.py`` blocks the heavy packages and runs it).

Any ``SimrealError`` is printed as one line on stderr and the process exits with code 2; so
is a ``ModuleNotFoundError`` for a package some simreal install provides, as the pip command
that installs it (``simreal.dependencies``).

Output piped into a reader that stops early (``simreal list | head -1``) ends quietly, as a
Unix tool killed by SIGPIPE does: no traceback, exit code 141 (128 + SIGPIPE), so a pipeline
under ``set -o pipefail`` sees what it sees from ``yes | head -1``. Python ignores SIGPIPE and
raises BrokenPipeError instead; :func:`main` catches it when stdout's reader is gone and points
stdout at /dev/null, so the flush at interpreter exit does not raise again (the recipe in
Python's ``signal`` documentation, "Note on SIGPIPE").
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import re
import select
import sys
from collections.abc import Sequence

from simreal import compile_cache
from simreal.dependencies import install_hint
from simreal.errors import SimrealError
from simreal.stop_signal import interrupt_exit_code, interrupt_signal, signals_as_interrupt

VERBS: dict[str, str] = {
    "list": "simreal.cli.list_",
    "train": "simreal.cli.train",
    "eval": "simreal.cli.eval_",
    "export": "simreal.cli.export",
    "import": "simreal.cli.import_",
    "play": "simreal.cli.play",
    "retarget": "simreal.cli.retarget",
    "deploy": "simreal.cli.deploy",
    "frames": "simreal.cli.frames",
    "label": "simreal.cli.label",
    "fit-reward": "simreal.cli.fit_reward",
    "demos": "simreal.cli.demos",
    "train-bc": "simreal.cli.train_bc",
    "finetune-vla": "simreal.cli.finetune_vla",
    "record": "simreal.cli.record",
    "drive": "simreal.cli.drive",
    "benchmark": "simreal.cli.benchmark",
}


def plain(doc: str) -> str:
    """A docstring as terminal text: reStructuredText roles and literals unwrapped
    (``:mod:`~a.b``` -> ``a.b``, double backquotes -> the text inside)."""
    doc = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", doc)
    return re.sub(r"``([^`]+)``", r"\1", doc)


def _parser() -> argparse.ArgumentParser:
    from simreal import __version__

    p = argparse.ArgumentParser(prog="simreal", description="Sim-to-real RL toolkit.")
    p.add_argument("--version", action="version", version=f"simreal {__version__}")
    sub = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    for verb, mod_name in VERBS.items():
        mod = importlib.import_module(mod_name)
        vp = sub.add_parser(
            verb,
            help=mod.HELP,
            description=plain(mod.__doc__ or ""),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        mod.add_arguments(vp)
        vp.set_defaults(_run=mod.run)
    return p


#: The exit code of a process that SIGPIPE ended: 128 + signal 13, what shells report.
EXIT_BROKEN_PIPE = 141


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code (141 when stdout's reader went away)."""
    try:
        try:
            code = _dispatch(argv)
        except SystemExit:  # argparse after --help, --version or a usage error
            sys.stdout.flush()
            raise
        sys.stdout.flush()  # here, not at exit: a closed pipe then raises where it is caught
        return code
    except BrokenPipeError:
        if not _stdout_gone():
            raise  # another pipe or socket broke: not the reader of our output, keep the traceback
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the unwritten rest goes nowhere, quietly
        os.close(devnull)
        return EXIT_BROKEN_PIPE


def _stdout_gone() -> bool:
    """Whether stdout is a pipe whose reader has closed it: Linux and the BSDs report POLLERR on
    the write end of such a pipe (``select.poll``; without it, assume so)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test's capture): no pipe to lose
        return False
    if not hasattr(select, "poll"):  # Windows: cannot tell; a closed reader is the usual cause
        return True
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))


def _dispatch(argv: Sequence[str] | None) -> int:
    """Parse ``argv`` and run its verb; a SimrealError is one line on stderr and exit code 2.

    ``key=value`` overrides may also follow the options (``simreal train TASK --json
    train.num_envs=4``): argparse gives a positional list only the arguments before the first
    option, so the rest come back unrecognised and join the verb's ``overrides`` here."""
    compile_cache.configure()  # before any verb imports JAX (simreal/compile_cache.py)
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    late = [a for a in extra if "=" in a and not a.startswith("-")]
    unknown = [a for a in extra if a not in late] + ([] if hasattr(args, "overrides") else late)
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if late:
        args.overrides = list(args.overrides) + late
    try:
        with signals_as_interrupt():  # SIGTERM and SIGHUP stop a verb as Ctrl-C does
            return int(args._run(args) or 0)
    except SimrealError as e:
        print(f"simreal {args.verb}: error: {e}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as e:
        missing = install_hint(e.name or "")
        if missing is None:
            raise  # not a package any simreal install provides: a bug, keep the traceback
        print(f"simreal {args.verb}: error: {missing}", file=sys.stderr)
        return 2
    except PATH_ERRORS as e:
        print(f"simreal {args.verb}: error: {path_problem(e)}", file=sys.stderr)
        return 2
    except OSError as e:
        if e.errno not in DISK_ERRNOS:
            raise  # not the user's disk: a bug, keep the traceback
        where = f"{e.filename}: " if e.filename else ""
        print(
            f"simreal {args.verb}: error: {where}{e.strerror} (free space or write elsewhere; what was written "
            "whole before is kept)",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt as e:
        print(f"simreal {args.verb}: interrupted ({interrupt_signal(e)})", file=sys.stderr)
        return interrupt_exit_code(e)


#: What the operating system says of a path a user gave (an output folder that is a file, a file
#: path that is a folder, a folder without write permission): the user's to fix, so one line.
PATH_ERRORS = (IsADirectoryError, NotADirectoryError, FileExistsError, PermissionError)
#: What the operating system says of a disk that cannot take more: full, past a size or quota
#: limit, or mounted read-only (every simreal output is written atomically, so nothing half-written).
DISK_ERRNOS = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EROFS)


def path_problem(e: OSError) -> str:
    """One line for a :data:`PATH_ERRORS` error: the path it is about (a rename's destination,
    not its temporary source), what the system said, and what a path there must be."""
    path = e.filename2 if e.filename2 is not None else e.filename
    if path is None:  # not about a path (a socket's port, a process): what the system said
        return f"{type(e).__name__}: {e}"
    why = next(
        text
        for kind, text in (
            (IsADirectoryError, "expected a file path there, not a folder"),
            (NotADirectoryError, "a part of the path is a file, not a folder"),
            (FileExistsError, "it exists already"),
            (PermissionError, "no permission for it"),
        )
        if isinstance(e, kind)
    )
    return f"{path}: {e.strerror or type(e).__name__} ({why})"
