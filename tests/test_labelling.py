"""Preference labelling (``simreal.rewards.labelling`` and ``simreal label``) against a local
OpenAI-protocol server that answers from privileged state (``fixtures.oracle_server``): the
RL-VLM-F prompts and answer parsing, the cache (nothing asked twice), budget, retries on 429 and
5xx, the rate limit, and the API key never written anywhere."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from fixtures.oracle_server import OracleServer
from fixtures.preference_scene import TASK, progress_by_digest, scene, true_labels

from simreal.cli import main
from simreal.rewards.label_account import CostAccount
from simreal.rewards.label_cache import LabelCache
from simreal.rewards.label_file import load_labels
from simreal.rewards.label_run import label_pairs
from simreal.rewards.labellers import LabellerConfig, make_chat
from simreal.rewards.labelling import (
    ANALYSIS_PROMPT,
    analysis_parts,
    frame_digest,
    parse_label,
    query_key,
    stated_label,
)

N_FRAMES, N_PAIRS = 24, 12


@pytest.fixture(scope="module")
def world():
    frames, _, progress = scene(N_FRAMES, seed=3)
    return frames, progress


@pytest.fixture
def frames_npz(tmp_path, world):
    path = tmp_path / "frames.npz"
    np.savez(path, frames=world[0], task=np.str_(TASK))
    return path


def label(server, frames_npz, out, *extra, pairs=N_PAIRS, capsys=None):
    """Run ``simreal label`` in this process; (exit code, this run's cost report or None)."""
    rc = main(["label", str(frames_npz), "--endpoint", server.url, "--model", "oracle", "--out", str(out),
               "--cache", str(out.parent / "cache"), "--pairs", str(pairs), *extra])
    cost = out.with_name(out.name + ".cost.json")
    return rc, (json.loads(cost.read_text())["runs"][-1] if rc == 0 else None)


def ground_truth(world, labels):
    pairs = np.stack([labels.index_a, labels.index_b], 1)
    return true_labels(world[1], pairs)


# -- the protocol ------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, label", [
    ("1", 1), ("0", 0), ("-1", -1), ("  1.\n", 1), ("**0**", 0), ("Answer: 0", 0), ("answer: -1", -1),
    ("The goal is closer in Image 2.\nAnswer: 1", 1), ('{"answer": 1}', 1), ('```json\n{"label": "-1"}\n```', -1),
    ("Image 2 shows it best.\n0", 0), ("label=1", 1)])
def test_stated_labels_in_every_answer_format(text, label):
    assert stated_label(text) == label
    assert parse_label(text) == label


@pytest.mark.parametrize("text", ["Image 1 is better", "", "Answer: 10", "both look the same", '{"answer": 2}'])
def test_answers_without_a_label_are_unsure_not_guessed(text):
    assert stated_label(text) is None
    assert parse_label(text) == -1


def test_analysis_turn_puts_each_side_at_its_marker(world):
    frames = world[0]
    parts = analysis_parts(frames[:2], frames[2:3], "to put the cube on the target")
    kinds = ["text" if isinstance(p, str) else "frame" for p in parts]
    assert kinds == ["text", "frame", "frame", "text", "frame", "text"]
    assert np.array_equal(parts[1], frames[0]) and np.array_equal(parts[2], frames[1])
    assert np.array_equal(parts[4], frames[2])
    text = parts[0] + "{image_1}" + parts[3] + "{image_2}" + parts[5]
    assert text == ANALYSIS_PROMPT.replace("{task}", "to put the cube on the target")


def test_query_key_follows_model_task_pixels_and_order(world):
    a, b = world[0][0], world[0][1]
    key = query_key("m", "t", a, b)
    assert key == query_key("m", "t", a.copy(), b.copy())
    changed = a.copy()
    changed[0, 0, 0] ^= 1
    others = {query_key("m2", "t", a, b), query_key("m", "t2", a, b), query_key("m", "t", b, a),
              query_key("m", "t", changed, b), query_key("m", "t", np.stack([a, a]), b)}
    assert key not in others and len(others) == 5
    assert query_key("m", "t", a[None], b) == key  # a frame and its one-frame clip are the same query
    assert frame_digest(a) != frame_digest(a.astype(np.int16))


def test_config_refuses_a_key_in_place_of_a_variable_name():
    from simreal.config import build
    from simreal.errors import ConfigError

    with pytest.raises(ConfigError, match="labeller.api_key_env"):
        build(LabellerConfig, {"model": "m", "endpoint": "http://x/v1", "api_key_env": "sk-abc-123"}, "labeller")
    with pytest.raises(ConfigError, match="labeller.endpoint"):
        build(LabellerConfig, {"model": "m", "endpoint": "127.0.0.1:8000"}, "labeller")


# -- simreal label against the oracle ------------------------------------------------------------------

@pytest.mark.parametrize("style", ["plain", "answer", "json"])
def test_labels_match_the_oracle_and_the_key_is_never_written(tmp_path, world, frames_npz, monkeypatch, style):
    secret = "sk-test-0123456789-secret"
    monkeypatch.setenv("ORACLE_KEY", secret)
    out = tmp_path / "labels.npz"
    with OracleServer(progress_by_digest(*world), style=style, api_key=secret) as server:
        rc, cost = label(server, frames_npz, out, "--api-key-env", "ORACLE_KEY")
        assert rc == 0
        assert server.requests == server.analysis_requests + server.label_requests == 2 * N_PAIRS
        assert set(server.authorization) == {f"Bearer {secret}"}
    labels = load_labels(out)
    assert len(labels.label) == N_PAIRS and labels.model == "oracle" and labels.task == TASK
    np.testing.assert_array_equal(labels.label, ground_truth(world, labels))
    assert cost["requests"] == 2 * N_PAIRS and cost["pairs_asked"] == N_PAIRS and cost["unparsed"] == 0
    assert cost["prompt_tokens"] > 0 and cost["completion_tokens"] > 0 and cost["request_s"] > 0
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p != frames_npz]
    assert len(written) == N_PAIRS + 2  # one cache entry per pair, the labels, the cost report
    for path in written:
        assert secret.encode() not in path.read_bytes(), path


def test_rerun_and_resume_ask_nothing_twice(tmp_path, world, frames_npz):
    out = tmp_path / "labels.npz"
    with OracleServer(progress_by_digest(*world)) as server:
        assert label(server, frames_npz, out)[0] == 0
        first = load_labels(out)
        asked = server.requests
        assert asked == 2 * N_PAIRS
        rc, cost = label(server, frames_npz, out, "--resume")  # every pair already in the labels file
        assert rc == 0 and server.requests == asked and cost["requests"] == 0
        out.unlink()  # labels lost: every answer is still in the cache
        rc, cost = label(server, frames_npz, out)
        assert rc == 0 and server.requests == asked and cost["pairs_cached"] == N_PAIRS
        rc, cost = label(server, frames_npz, out, "--resume", pairs=N_PAIRS + 5)  # the same list, 5 more
        assert rc == 0 and server.requests == asked + 10 and cost["pairs_asked"] == 5
    labels = load_labels(out)
    np.testing.assert_array_equal(labels.label[:N_PAIRS], first.label)
    np.testing.assert_array_equal(labels.index_a[:N_PAIRS], first.index_a)
    assert len(labels.label) == N_PAIRS + 5
    np.testing.assert_array_equal(labels.label, ground_truth(world, labels))
    assert len(json.loads(out.with_name("labels.npz.cost.json").read_text())["runs"]) == 2  # since the unlink


@pytest.mark.parametrize("text", ['{"runs": [', "[]"])
def test_resume_with_a_damaged_cost_report_is_one_line(tmp_path, world, frames_npz, capsys, text):
    out = tmp_path / "labels.npz"
    with OracleServer(progress_by_digest(*world)) as server:
        assert label(server, frames_npz, out)[0] == 0
        out.with_name("labels.npz.cost.json").write_text(text)
        capsys.readouterr()
        assert label(server, frames_npz, out, "--resume")[0] == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "labels.npz.cost.json" in err[0] and "delete it" in err[0], err


def test_budget_stops_and_a_resumed_run_goes_on(tmp_path, world, frames_npz, capsys):
    out = tmp_path / "labels.npz"
    with OracleServer(progress_by_digest(*world)) as server:
        rc, cost = label(server, frames_npz, out, "--budget", "9")
        assert rc == 0 and server.requests == 8  # 4 whole pairs; the 9th request would start a pair it cannot finish
        assert cost["pairs_labelled"] == 4 and "budget of 9" in cost["stopped"]
        assert "--resume" in capsys.readouterr().err
        rc, cost = label(server, frames_npz, out, "--resume", "--budget", "100")
        assert rc == 0 and cost["stopped"] is None and server.requests == 2 * N_PAIRS
    labels = load_labels(out)
    assert len(labels.label) == N_PAIRS
    np.testing.assert_array_equal(labels.label, ground_truth(world, labels))


def test_429_and_5xx_are_retried_and_counted(tmp_path, world, frames_npz):
    out = tmp_path / "labels.npz"
    with OracleServer(progress_by_digest(*world)) as server:
        server.fail_next(2, 429)
        server.fail_next(1, 503)
        rc, cost = label(server, frames_npz, out, "--max-retries", "3")
        assert rc == 0 and server.failed == 3
        assert server.requests == 2 * N_PAIRS + 3 == cost["requests"] and cost["retries"] == 3
    labels = load_labels(out)
    np.testing.assert_array_equal(labels.label, ground_truth(world, labels))


def test_a_server_that_keeps_failing_is_one_error_line(tmp_path, world, frames_npz, capsys):
    with OracleServer(progress_by_digest(*world)) as server:
        server.fail_next(100, 500)
        rc, _ = label(server, frames_npz, tmp_path / "labels.npz", "--max-retries", "2")
        assert rc == 2 and server.requests == 3
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "gave up after 3 attempts" in err and "HTTP 500" in err


def test_nothing_listening_at_the_endpoint_is_one_line_at_once(tmp_path, frames_npz, capsys):
    """A wrong port took six attempts and 31 s of backoff to say 'connection refused'."""
    import socket
    import time

    with socket.socket() as s:  # a free port: bound, then closed, so nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    rc = main(["label", str(frames_npz), "--endpoint", f"http://127.0.0.1:{port}/v1", "--model", "m", "--pairs", "2",
               "--out", str(tmp_path / "labels.npz"), "--cache", str(tmp_path / "cache")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and time.monotonic() - t0 < 5.0
    assert len(err.splitlines()) == 1 and "connection refused; is the server running" in err, err


def test_a_wrong_or_missing_key_names_the_variable_not_the_key(tmp_path, world, frames_npz, monkeypatch, capsys):
    monkeypatch.setenv("ORACLE_KEY", "sk-wrong-secret")
    monkeypatch.delenv("ORACLE_UNSET_KEY", raising=False)
    with OracleServer(progress_by_digest(*world), api_key="sk-right") as server:
        rc, _ = label(server, frames_npz, tmp_path / "a.npz", "--api-key-env", "ORACLE_KEY")
        assert rc == 2
        err = capsys.readouterr().err
        assert "HTTP 401" in err and "$ORACLE_KEY" in err and "sk-wrong-secret" not in err
        rc, _ = label(server, frames_npz, tmp_path / "b.npz", "--api-key-env", "ORACLE_UNSET_KEY")
        assert rc == 2 and "ORACLE_UNSET_KEY is not set" in capsys.readouterr().err


@pytest.mark.parametrize("style, unparsed", [("unsure", 0), ("prose", N_PAIRS)])
def test_a_labeller_that_never_decides_gives_only_minus_one(tmp_path, world, frames_npz, style, unparsed):
    out = tmp_path / "labels.npz"
    with OracleServer(progress_by_digest(*world), style=style) as server:
        rc, cost = label(server, frames_npz, out)
        assert rc == 0 and cost["unparsed"] == unparsed and cost["label_counts"] == {"0": 0, "1": 0, "-1": N_PAIRS}
        assert (load_labels(out).label == -1).all()
        # a stated "cannot tell" is an answer, kept in the cache; no label stated (prose, an empty
        # reply) is not: a second run asks again instead of serving -1 for good
        rc, again = label(server, frames_npz, tmp_path / "again.npz")
    assert rc == 0 and again["pairs_cached"] == N_PAIRS - unparsed and again["pairs_asked"] == unparsed


def test_rate_limit_spaces_requests(tmp_path, world):
    frames, progress = world
    account = CostAccount()
    with OracleServer(progress_by_digest(frames, progress)) as server:
        chat = make_chat(LabellerConfig(model="oracle", endpoint=server.url, max_requests_per_s=40.0), account)
        start = time.monotonic()
        run = label_pairs(chat, LabelCache(tmp_path), account, frames, [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)], TASK)
        elapsed = time.monotonic() - start
    assert len(run.labels) == 5 and account.requests == 10
    assert elapsed >= 9 / 40.0  # 10 request starts at least 1/40 s apart


def test_bad_inputs_are_one_line_exit_2(tmp_path, world, frames_npz, capsys):
    with OracleServer(progress_by_digest(*world)) as server:
        bad = tmp_path / "bad.npz"
        np.savez(bad, images=world[0])
        assert label(server, bad, tmp_path / "x.npz")[0] == 2
        assert "missing field 'frames'" in capsys.readouterr().err
        np.savez(bad, frames=world[0].astype(np.float32), task=np.str_(TASK))
        assert label(server, bad, tmp_path / "x.npz")[0] == 2
        assert "field 'frames' has shape" in capsys.readouterr().err
        out = tmp_path / "labels.npz"
        assert label(server, frames_npz, out)[0] == 0
        assert label(server, frames_npz, out)[0] == 2
        assert "pass --resume" in capsys.readouterr().err
        assert label(server, frames_npz, out, "--resume", "--task", "something else")[0] == 2
        assert "field 'task'" in capsys.readouterr().err
        assert label(server, frames_npz, tmp_path / "y.npz", pairs=N_FRAMES * N_FRAMES)[0] == 2
        assert "ordered pairs" in capsys.readouterr().err


def test_frames_rendered_with_mujoco_are_labelled_from_the_arm_state(tmp_path):
    """Real frames: the Franka of arm-reach rendered offscreen at random poses; the oracle knows each
    frame's end-effector distance to a goal, and the labels follow it."""
    import mujoco

    from simreal.robot_spec import load_robot_spec
    from simreal.sim.robots import build_model

    m = build_model(load_robot_spec("franka"))
    m.vis.global_.offwidth, m.vis.global_.offheight = 48, 48  # the framebuffer sized to the camera
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, m.key("home").id)
    mujoco.mj_forward(m, d)
    goal = d.site("end_effector").xpos + np.array([0.15, -0.1, -0.1])
    rng = np.random.default_rng(0)
    frames, progress = [], []
    with mujoco.Renderer(m, 48, 48) as renderer:
        renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = False
        for _ in range(16):
            mujoco.mj_resetDataKeyframe(m, d, m.key("home").id)
            d.qpos[:7] += rng.normal(0.0, 0.4, 7)
            mujoco.mj_forward(m, d)
            renderer.update_scene(d)
            frames.append(renderer.render().copy())
            progress.append(-np.linalg.norm(d.site("end_effector").xpos - goal))
    frames, progress = np.stack(frames), np.asarray(progress)
    pairs = [(i, (i + 5) % 16) for i in range(16)]
    account = CostAccount()
    with OracleServer(progress_by_digest(frames, progress)) as server:
        chat = make_chat(LabellerConfig(model="oracle", endpoint=server.url), account)
        run = label_pairs(chat, LabelCache(tmp_path), account, frames, pairs, "to bring the hand to the goal")
    np.testing.assert_array_equal(run.labels, true_labels(progress, np.asarray(pairs)))
    assert set(run.labels.tolist()) == {0, 1}


@pytest.mark.slow
def test_a_local_hugging_face_vlm_labels_through_the_same_cli(tmp_path, world, frames_npz, capsys):
    """The hf backend on a tiny random LLaVA: two requests a pair, tokens counted, cached answers reused.
    (slow: importing transformers and building the model take 10-20 s here.)"""
    from fixtures.tiny_vlm import make_tiny_llava

    model_dir = make_tiny_llava(tmp_path / "tiny-llava")
    out = tmp_path / "labels.npz"
    args = ["label", str(frames_npz), "--backend", "hf", "--model", str(model_dir), "--pairs", "2",
            "--out", str(out), "--cache", str(tmp_path / "cache")]
    assert main(args) == 0
    cost = json.loads(out.with_name("labels.npz.cost.json").read_text())["runs"][-1]
    assert cost["requests"] == 4 and cost["prompt_tokens"] > 0 and cost["completion_tokens"] > 0
    assert len(load_labels(out).label) == 2
    out.unlink()
    assert main(args) == 0  # stated labels come from the cache; the random model's gibberish is asked again
    assert json.loads(out.with_name("labels.npz.cost.json").read_text())["runs"][-1]["requests"] == 2 * cost["unparsed"]
    capsys.readouterr()
    assert main(["label", str(frames_npz), "--backend", "hf", "--model", str(tmp_path / "no-such-model"),
                 "--pairs", "2", "--out", str(tmp_path / "other.npz")]) == 2
    err = capsys.readouterr().err
    assert "no-such-model" in err and "hf download" in err
