"""Preference labelling (``simreal.rewards.labelling`` and ``simreal label``) against a local
OpenAI-protocol server that answers from privileged state (``fixtures.oracle_server``): the
RL-VLM-F prompts and answer parsing (a line, JSON or prose), the cache (nothing asked twice, not
even an answer without a label), budget, retries on 429 and 5xx, the rate limit, and the API key
never written anywhere."""

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
    Reply,
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
    rc = main(
        [
            "label",
            str(frames_npz),
            "--endpoint",
            server.url,
            "--model",
            "oracle",
            "--out",
            str(out),
            "--cache",
            str(out.parent / "cache"),
            "--pairs",
            str(pairs),
            *extra,
        ]
    )
    cost = out.with_name(out.name + ".cost.json")
    return rc, (json.loads(cost.read_text())["runs"][-1] if rc == 0 else None)


def ground_truth(world, labels):
    pairs = np.stack([labels.index_a, labels.index_b], 1)
    return true_labels(world[1], pairs)


# -- the protocol ------------------------------------------------------------------------------------

#: Answers as VLMs word them, and the label each states (Image N is label N - 1). Issue 54: the
#: parser before it read 22 of these 57 (none in prose).
STATED = [
    # a line, or a keyword and a label
    ("1", 1),
    ("0", 0),
    ("-1", -1),
    ("  1.\n", 1),
    ("**0**", 0),
    ("Answer: 0", 0),
    ("answer: -1", -1),
    ("label=1", 1),
    ("Label: 1", 1),
    ("**Answer: 0**", 0),
    ("**Answer:** 1", 1),
    ("Final answer: 1", 1),
    ("The answer is: **1**", 1),
    ("My final answer is 0.", 0),
    ("Answer: Image 2", 1),
    ("Image 2", 1),
    ("The answer is 1 (Image 2).", 1),
    ("The answer is -1 because there is no difference.", -1),
    ("Both images show the same state, so the answer is -1.", -1),
    ("There is no clear difference between the two images.\n-1", -1),
    ("0\n\nImage 1 shows the drawer further open.", 0),
    ("Image 2 shows it best.\n0", 0),
    ("The goal is closer in Image 2.\nAnswer: 1", 1),
    ("0 - Image 1 is closer to the goal.", 0),
    ("Is the goal better achieved in Image 1 or Image 2?\n1", 1),
    ("Answer: 1\n\nExplanation: Image 2 shows the cube on the target, while Image 1 does not.", 1),
    # JSON
    ('{"answer": 1}', 1),
    ('```json\n{"label": "-1"}\n```', -1),
    ('{"answer": "Image 2", "reason": "the cube is on the target"}', 1),
    # prose
    ("After comparing both images, my answer is 1", 1),
    ("Image 2 is better.", 1),
    ("Image 1 is better", 0),
    ("The goal is better achieved in Image 2.", 1),
    ("The goal is better achieved in Image 1 than in Image 2.", 0),
    ("Image 2 is clearly closer to the goal.", 1),
    ("The robot in Image 2 is closer to the goal.", 1),
    ("Image 1 is worse than Image 2.", 1),
    ("Image 1 is further from the goal than Image 2.", 1),
    ("The second image is better.", 1),
    ("I would choose Image 1.", 0),
    ("If we compare them, Image 2 is better.", 1),
    ("**Image 2** is **better**.", 1),
    ("I think Image 2 is better", 1),
    ("Image 2 is better, as Image 1 is further from the goal.", 1),
    ("Image 2 better achieves the goal of placing the cube on the target.", 1),
    ("Answer: The goal is better achieved in Image 2.", 1),
    ("Image 2 is better. Answer: 2", 1),
    ("Is the goal better achieved in Image 1 or Image 2? Image 2 is better.", 1),
    ("Based on the description, Image 1 is slightly better. Answer: 0", 0),
    # reasoning that names both images, then a final choice
    (
        "1. Image 1 shows the gripper above the table, far from the cube.\n2. Image 2 shows the cube resting on the "
        "green target.\n3. Yes: Image 2 is closer to the goal than Image 1.\nFinal answer: 1",
        1,
    ),
    (
        "- Image 1: the drawer is closed.\n- Image 2: the drawer is half open.\nThe goal is better achieved in "
        "Image 2, so my answer is 1.",
        1,
    ),
    ("Image 1 has the arm closer to the cube, but in Image 2 the cube is on the target.\nAnswer: 1", 1),
    (
        "Image 1 is better at keeping the cube upright, but Image 2 is better at reaching the target. Overall, "
        "the answer is 1.",
        1,
    ),
    ("Image 2 is better than Image 1 because the cube is closer to the target. Therefore, the answer is 1.", 1),
    (
        "In Image 1, the robot has not yet grasped the cube. In Image 2, the cube is on the target. So Image 2 is "
        "better: 1",
        1,
    ),
    ("Based on the analysis, the goal is better achieved in Image 2. Therefore, the answer is 1.", 1),
    ("The answer is 0 if Image 1 is better and 1 if Image 2 is better. Here Image 2 is better, so the answer is 1.", 1),
]

#: Answers that state no label, or contradict themselves: refused, never guessed. (The parser
#: before issue 54 read 5 of these 33 as a label, and raised RecursionError on one.)
REFUSED = [
    "",
    "   ",
    "I cannot tell which image is better.",
    "Both images look equally good.",
    "both look the same",
    "Neither Image 1 nor Image 2 is better.",
    "It is unclear whether Image 2 is better.",
    "Image 2 is better?",
    "It is hard to say if Image 1 is better than Image 2.",
    "I don't think Image 2 is better.",
    "I'm not sure; maybe Image 2 is better.",
    "Image 1 is not better than Image 2.",
    "Image 2 is not as good as Image 1.",
    "Image 1 does not reach the target and Image 2 is better",
    "1. Image 1 shows the arm.\n2. Image 2 shows the arm.",
    "The images show a robot arm and a cube.",
    "Answer: 2",
    "Answer: 10",
    "Answer: 1.5",
    "Answer: 0 or 1",
    '{"answer": 2}',
    '{"answer": 1e999}',
    pytest.param('{"a": ' * 5000 + "1" + "}" * 5000, id="JSON nested 5000 deep"),
    "The answer would be 1 if Image 2 were better; here neither is.",
    # both images named better, or a label that contradicts the prose (the label and the image's number confused)
    "Image 1 is better. Image 2 is better.",
    "Image 1 is better lit, but Image 2 is closer to the goal.",
    "Image 1 is closer to the goal. However, Image 2 is better.",
    "Image 1 is better. Answer: 1",
    "Image 2 is better, so the answer is 0.",
    "1\nThe goal is better achieved in Image 1.\n0",
    "0\n\nImage 2 is better.",
    "0 (Image 2 is better)",
    "Reply a single line of 0 if the goal is better achieved in Image 1, or 1 if it is better achieved in Image 2.",
]


@pytest.mark.parametrize("text, label", STATED)
def test_a_final_choice_is_read_in_a_line_json_or_prose(text, label):
    assert stated_label(text) == label
    assert parse_label(text) == label


@pytest.mark.parametrize("text", REFUSED)
def test_ambiguous_answers_are_unsure_not_guessed(text):
    assert stated_label(text) is None
    assert parse_label(text) == -1


def test_a_long_answer_parses_in_linear_time():
    start = time.monotonic()
    assert stated_label("Image 2 is better, and " * 2000 + "the answer is 1.") == 1
    assert stated_label("answer" + " " * 20000 + "x") is None
    assert time.monotonic() - start < 2.0


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
    others = {
        query_key("m2", "t", a, b),
        query_key("m", "t2", a, b),
        query_key("m", "t", b, a),
        query_key("m", "t", changed, b),
        query_key("m", "t", np.stack([a, a]), b),
    }
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
    rc = main(
        [
            "label",
            str(frames_npz),
            "--endpoint",
            f"http://127.0.0.1:{port}/v1",
            "--model",
            "m",
            "--pairs",
            "2",
            "--out",
            str(tmp_path / "labels.npz"),
            "--cache",
            str(tmp_path / "cache"),
        ]
    )
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


@pytest.mark.parametrize("style, unparsed", [("unsure", 0), ("undecided", N_PAIRS)])
def test_a_labeller_that_never_decides_gives_only_minus_one(tmp_path, world, frames_npz, capsys, style, unparsed):
    out = tmp_path / "labels.npz"
    with OracleServer(progress_by_digest(*world), style=style) as server:
        rc, cost = label(server, frames_npz, out)
        assert rc == 0 and cost["unparsed"] == unparsed and cost["label_counts"] == {"0": 0, "1": 0, "-1": N_PAIRS}
        assert (load_labels(out).label == -1).all()
        assert (f"{unparsed} of {N_PAIRS} answers stated no label" in capsys.readouterr().err) == (unparsed > 0)
        # a stated "cannot tell" and an answer that states no label are both kept in the cache (a
        # better parser may read the second): a second run asks nothing, and counts them again
        rc, again = label(server, frames_npz, tmp_path / "again.npz")
        assert server.requests == 2 * N_PAIRS
    assert rc == 0 and again["pairs_cached"] == N_PAIRS and again["unparsed"] == unparsed


def test_answers_in_prose_are_labelled_end_to_end(tmp_path, world, frames_npz, capsys):
    """Issue 54: "After comparing both images, my answer is 1" and "Image 2 is better." came back
    unparsed (16 of 60 pairs). The oracle answers in five prose formats in turn."""
    out = tmp_path / "labels.npz"
    with OracleServer(progress_by_digest(*world), style="prose") as server:
        rc, cost = label(server, frames_npz, out)
    assert rc == 0 and cost["unparsed"] == 0 and "stated no label" not in capsys.readouterr().err
    labels = load_labels(out)
    np.testing.assert_array_equal(labels.label, ground_truth(world, labels))
    assert set(labels.label.tolist()) == {0, 1}


def test_a_better_parser_relabels_from_the_cache_without_a_request(tmp_path, world, frames_npz, monkeypatch, capsys):
    """An answer the parser cannot read is cached raw, so the next parser labels it with no request."""
    import simreal.rewards.label_run as label_run

    with OracleServer(progress_by_digest(*world), style="prose") as server:
        with monkeypatch.context() as m:  # a parser that reads only a bare label, as one before issue 54 nearly did
            m.setattr(label_run, "stated_label", lambda text: int(text) if text.strip() in ("0", "1", "-1") else None)
            rc, cost = label(server, frames_npz, tmp_path / "strict.npz")
        assert rc == 0 and cost["unparsed"] == N_PAIRS and (load_labels(tmp_path / "strict.npz").label == -1).all()
        assert f"{N_PAIRS} of {N_PAIRS} answers stated no label" in capsys.readouterr().err
        asked = server.requests
        rc, cost = label(server, frames_npz, tmp_path / "labels.npz")
        assert rc == 0 and server.requests == asked == 2 * N_PAIRS
    assert cost["requests"] == 0 and cost["pairs_cached"] == N_PAIRS and cost["unparsed"] == 0
    labels = load_labels(tmp_path / "labels.npz")
    np.testing.assert_array_equal(labels.label, ground_truth(world, labels))


class ScriptedChat:
    """A :class:`~simreal.rewards.labelling.VlmChat` whose stage-2 answers are ``answers``, in turn."""

    model = "scripted"

    def __init__(self, answers):
        self.answers, self.requests = list(answers), 0

    def complete(self, parts, max_tokens):
        self.requests += 1
        if all(isinstance(p, str) for p in parts):
            return Reply(self.answers.pop(0))
        return Reply("Image 1 shows the cube on the table. Image 2 shows the cube on the target.")


def test_every_answer_but_an_empty_reply_is_cached_and_counted(tmp_path, world):
    frames, pairs = world[0], [(0, 1), (1, 2), (2, 3), (3, 4)]
    chat, account = (
        ScriptedChat(["After comparing both images, my answer is 1", "Image 1 is better.", "I cannot tell.", ""]),
        CostAccount(),
    )
    run = label_pairs(chat, LabelCache(tmp_path), account, frames, pairs, TASK)
    assert run.labels.tolist() == [1, 0, -1, -1] and account.unparsed == 2 and chat.requests == 8
    # the empty reply (a reasoning model out of tokens) is asked again; the rest comes from the cache
    chat, account = ScriptedChat(["Image 2 is better."]), CostAccount()
    run = label_pairs(chat, LabelCache(tmp_path), account, frames, pairs, TASK)
    assert run.labels.tolist() == [1, 0, -1, 1] and chat.requests == 2
    assert account.pairs_cached == 3 and account.unparsed == 1


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
    args = [
        "label",
        str(frames_npz),
        "--backend",
        "hf",
        "--model",
        str(model_dir),
        "--pairs",
        "2",
        "--out",
        str(out),
        "--cache",
        str(tmp_path / "cache"),
    ]
    assert main(args) == 0
    cost = json.loads(out.with_name("labels.npz.cost.json").read_text())["runs"][-1]
    assert cost["requests"] == 4 and cost["prompt_tokens"] > 0 and cost["completion_tokens"] > 0
    assert len(load_labels(out).label) == 2
    cached = len(list((tmp_path / "cache").rglob("*.json")))  # every answer but an empty one, gibberish too
    out.unlink()
    assert main(args) == 0
    again = json.loads(out.with_name("labels.npz.cost.json").read_text())["runs"][-1]
    assert again["pairs_cached"] == cached and again["requests"] == 2 * (2 - cached)
    capsys.readouterr()
    assert (
        main(
            [
                "label",
                str(frames_npz),
                "--backend",
                "hf",
                "--model",
                str(tmp_path / "no-such-model"),
                "--pairs",
                "2",
                "--out",
                str(tmp_path / "other.npz"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "no-such-model" in err and "hf download" in err
