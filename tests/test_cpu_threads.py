"""Torch's CPU threads: the cores other processes leave free, unless OMP_NUM_THREADS says."""

from __future__ import annotations

import pytest

from simreal.cpu_threads import free_cores, limit_torch_threads


@pytest.mark.parametrize("cpus, load, host, expected", [
    (2, 0.2, 2, 2), (2, 0.6, 2, 1), (2, 1.4, 2, 1), (2, 5.0, 2, 1), (16, 3.4, 16, 13), (16, 0.0, 16, 16),
    (1, 0.0, 1, 1), (4, 32.0, 64, 2)])  # the last: 4 cores pinned on a 64-core host half busy
def test_free_cores_are_the_cores_the_load_leaves(cpus, load, host, expected):
    assert free_cores(cpus, load, host) == expected


def test_torch_threads_follow_the_load_unless_the_user_set_them(monkeypatch):
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    try:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        monkeypatch.setattr("simreal.cpu_threads.free_cores", lambda: 1)
        assert limit_torch_threads() == 1
        torch.set_num_threads(2)
        monkeypatch.setenv("OMP_NUM_THREADS", "2")
        assert limit_torch_threads() == 2  # the user's choice stands
    finally:
        torch.set_num_threads(before)
