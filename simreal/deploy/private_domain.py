"""A DDS domain that no other simreal process on this machine is using.

A rehearsal (`simreal deploy sim`) and a driver's twin talk over DDS on a domain of their own,
picked at random from a range. Two of them started side by side on one machine (ten rehearsal
seeds in parallel, or two test workers) picked the same domain about once in 80 pairs, and
then each one's runner read the other one's robot. A claim is an exclusive ``flock`` on a file
per domain in the temporary directory, held until the claim's block ends; the kernel drops it
when the process dies, so a killed rehearsal leaves nothing to clean up. Other machines on the
network are not seen: these domains stay on the loopback interface.

Written here because DDS itself has no notion of a domain being taken (a participant joins any
domain), and no library offers a claim on one.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import tempfile
from collections.abc import Iterator
from pathlib import Path

from simreal.errors import SimrealError


def _lock_path(domain_id: int) -> Path:
    return Path(tempfile.gettempdir()) / f"simreal-dds-domain-{domain_id}.lock"


@contextlib.contextmanager
def claim_domain(lo: int, hi: int) -> Iterator[int]:
    """Yield a domain id in [lo, hi] that no other claim on this machine holds, in random order,
    holding it until the block exits. Raises ``SimrealError`` when every one is held."""
    ids = list(range(lo, hi + 1))
    random.SystemRandom().shuffle(ids)
    for domain_id in ids:
        try:
            fd = os.open(_lock_path(domain_id), os.O_RDWR | os.O_CREAT, 0o666)
        except OSError:  # another user's lock file: theirs
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        try:
            yield domain_id
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        return
    raise SimrealError(
        f"every DDS domain {lo}..{hi} is held by another simreal process on this machine "
        f"(lock files {_lock_path(lo).parent}/simreal-dds-domain-*.lock); pass --domain-id"
    )
