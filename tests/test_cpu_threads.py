"""Torch's CPU threads: the cores other processes leave free, unless OMP_NUM_THREADS says."""

from __future__ import annotations

import pytest

from simreal.cpu_threads import free_cores, limit_torch_threads


@pytest.mark.parametrize(
    "cpus, load, host, expected",
    [
        (2, 0.2, 2, 2),
        (2, 0.6, 2, 1),
        (2, 1.4, 2, 1),
        (2, 5.0, 2, 1),
        (16, 3.4, 16, 13),
        (16, 0.0, 16, 16),
        (1, 0.0, 1, 1),
        (4, 32.0, 64, 2),
    ],
)  # the last: 4 cores pinned on a 64-core host half busy
def test_free_cores_are_the_cores_the_load_leaves(cpus, load, host, expected):
    assert free_cores(cpus, load, host) == expected


def test_the_busy_cores_are_counted_now_not_a_minute_ago(tmp_path):
    """Linux's runnable count, less the reader itself: a job that just ended no longer counts (the
    one-minute average still read 1.7 of 2 cores, and the next training took one thread)."""
    from simreal.cpu_threads import busy_now

    f = tmp_path / "loadavg"
    f.write_text("1.70 1.46 1.99 1/345 22991\n")  # the average still high, only the reader running
    assert busy_now(samples=2, interval_s=0.0, path=str(f)) == 0.0
    assert free_cores(2, busy_now(samples=1, path=str(f)), 2) == 2
    f.write_text("0.10 0.40 0.50 3/345 22991\n")  # two others running now
    assert busy_now(samples=1, path=str(f)) == 2.0 and free_cores(2, 2.0, 2) == 1
    assert busy_now(path=str(tmp_path / "none")) is None


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
