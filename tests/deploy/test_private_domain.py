"""Private DDS domains: two rehearsals or twins on one machine never share one."""

import subprocess
import sys
import tempfile

import pytest

from simreal.deploy.private_domain import claim_domain
from simreal.errors import SimrealError


def test_claims_are_exclusive_until_released(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    with claim_domain(7, 8) as a, claim_domain(7, 8) as b:
        assert {a, b} == {7, 8}
        with pytest.raises(SimrealError, match=r"every DDS domain 7\.\.8 is held.*--domain-id"):
            with claim_domain(7, 8):
                pass
    with claim_domain(7, 7) as c:  # released at the block's end
        assert c == 7


def test_a_claim_in_another_process_is_respected_and_dies_with_it(tmp_path, monkeypatch):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, tempfile; tempfile.gettempdir = lambda: sys.argv[1]\n"
            "from simreal.deploy.private_domain import claim_domain\n"
            "with claim_domain(5, 5) as d:\n    print(d, flush=True); sys.stdin.read()",
            str(tmp_path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "5"
        monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
        with pytest.raises(SimrealError):
            with claim_domain(5, 5):
                pass
        holder.kill()  # killed, not released: the kernel drops the lock
        holder.wait(timeout=30)
        with claim_domain(5, 5) as d:
            assert d == 5
    finally:
        holder.kill()
