"""The command line turns JAX's persistent compilation cache on (simreal/compile_cache.py)."""

from simreal import compile_cache


def test_the_cache_goes_under_xdg_cache_home_unless_the_user_named_one(monkeypatch, tmp_path):
    monkeypatch.delenv(compile_cache.ENV, raising=False)
    monkeypatch.delenv(compile_cache.SWITCH, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert compile_cache.configure() == tmp_path / "simreal" / "jax"
    monkeypatch.setenv(compile_cache.ENV, str(tmp_path / "mine"))
    assert compile_cache.configure() == tmp_path / "mine"


def test_simreal_compile_cache_0_leaves_jax_alone(monkeypatch):
    monkeypatch.delenv(compile_cache.ENV, raising=False)
    monkeypatch.setenv(compile_cache.SWITCH, "0")
    assert compile_cache.configure() is None
    import os

    assert compile_cache.ENV not in os.environ
