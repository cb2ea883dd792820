"""The small VLA (``simreal/policies/vla*.py``) end to end and in parts: ``arm-reach-choice``'s instructions
and balls, a recording with camera images, ``simreal train-bc --policy vla``, ``simreal eval``,
``simreal export`` (a bundle with image and instruction inputs, ONNX equal to torch),
``simreal finetune-vla``; and the pieces: tokenizer, bins, padding mask, GAE, local pretrained
model folders. Tiny models (width 16, one layer) and 0.2 s episodes."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from simreal.cli import main  # noqa: E402
from simreal.policies.run_config import VLAConfig  # noqa: E402
from simreal.policies.vla.model import VLASpec, build_vla, tokenize, word_tokenizer  # noqa: E402

SHORT = ["backend=native", "env.episode_length_s=0.2"]
TINY = [
    "train.vla.width=16",
    "train.vla.layers=1",
    "train.vla.heads=2",
    "train.vla.bins=8",
    "train.vla.max_tokens=6",
    "train.num_eval_envs=2",
    "train.batch_size=32",
]
SENTENCES = ["reach the red ball", "reach the green ball", "reach the blue ball"]


def tiny(cameras=None, vc: VLAConfig | None = None, m: int = 3):
    spec = VLASpec(cameras=cameras or {"front": (16, 16)}, state_size=4, action_size=m, bins=8, max_tokens=6)
    vc = vc or VLAConfig(width=16, layers=1, heads=2, patch_size=8)
    torch.manual_seed(0)
    return build_vla(vc, spec, SENTENCES, np.zeros(4), np.ones(4), -np.ones(m), np.ones(m))


# -- parts ---------------------------------------------------------------------------------------
def test_word_tokenizer_pads_truncates_and_marks_unknown_words():
    tok = word_tokenizer(SENTENCES, max_tokens=6)
    ids, mask = tokenize(tok, ["Reach the RED ball", "reach the purple ball please now then"])
    assert ids.shape == mask.shape == (2, 6)
    assert mask[0].tolist() == [1, 1, 1, 1, 0, 0] and ids[0, 4:].tolist() == [0, 0]
    assert mask[1].tolist() == [1] * 6  # truncated to 6
    assert ids[1, 2] == 1  # "purple": unknown
    red, green = tokenize(tok, SENTENCES[:2])[0]
    assert (red != green).sum() == 1  # the colour word alone differs


def test_bins_cover_the_range_and_the_mode_is_the_most_likely_bins_centre():
    model, _ = tiny()
    centres = model.bin_centres
    assert centres.shape == (3, 8)
    np.testing.assert_allclose(centres[:, 0].numpy(), -1 + 1 / 8)
    assert model.bin_of(centres.T).T.tolist() == [list(range(8))] * 3
    assert model.bin_of(torch.tensor([[-5.0, 5.0, 0.01]])).tolist() == [[0, 7, 4]]  # outside: the end bins
    logits = torch.full((1, 3, 8), -10.0)
    logits[0, [0, 1, 2], [0, 5, 7]] = 10.0
    np.testing.assert_allclose(model.mode(logits)[0].numpy(), centres[[0, 1, 2], [0, 5, 7]].numpy(), atol=1e-6)


def test_padding_tokens_do_not_change_the_action_and_the_words_do():
    model, tok = tiny()
    model.eval()
    ids, mask = (torch.from_numpy(a) for a in tokenize(tok, ["reach the red ball"]))
    state, image = torch.zeros(1, 4), torch.randint(0, 255, (1, 16, 16, 3), dtype=torch.uint8)
    with torch.no_grad():
        base = model(state, ids, mask, image)
        junk = ids.clone()
        junk[0, 4:] = 3  # different tokens where the mask is 0
        np.testing.assert_allclose(model(state, junk, mask, image).numpy(), base.numpy(), atol=1e-5)
        other = torch.from_numpy(tokenize(tok, ["reach the blue ball"])[0])
        assert not torch.allclose(model(state, other, mask, image), base, atol=1e-4)


def test_without_the_state_the_action_depends_on_images_and_words_only():
    import dataclasses

    model, tok = tiny()
    model.spec = dataclasses.replace(model.spec, use_state=False)
    model.eval()
    ids, mask = (torch.from_numpy(a) for a in tokenize(tok, ["reach the red ball"] * 2))
    image = torch.randint(0, 255, (1, 16, 16, 3), dtype=torch.uint8).expand(2, -1, -1, -1)
    with torch.no_grad():
        out = model(torch.randn(2, 4) * 3, ids, mask, image)
    torch.testing.assert_close(out[0], out[1])


def test_gae_on_a_hand_computed_episode():
    from simreal.policies.vla.rl import gae

    r = np.array([[0.0], [0.0], [1.0]], np.float32)
    v = np.array([[0.5], [0.2], [0.1]], np.float32)
    done = np.array([[False], [False], [True]])
    alive = np.ones((3, 1), bool)
    adv, ret = gae(r, v, done, alive, gamma=0.9, lam=1.0)
    # lambda = 1: A_t = discounted return from t - V(s_t); the last step terminal
    want_ret = np.array([0.81, 0.9, 1.0])
    np.testing.assert_allclose(ret[:, 0], want_ret, atol=1e-6)
    np.testing.assert_allclose(adv[:, 0], want_ret - v[:, 0], atol=1e-6)
    adv0, _ = gae(r, v, done, np.array([[True], [True], [False]]), 0.9, 1.0)
    assert adv0[2, 0] == 0.0  # a step after the episode: no advantage
    # lambda 0.5, the episode ends at t = 1; t = 2 belongs to no episode (its value must not leak back)
    done1, alive1 = np.array([[False], [True], [False]]), np.array([[True], [True], [False]])
    r1 = np.array([[0.0], [1.0], [5.0]], np.float32)
    adv1, _ = gae(r1, v, done1, alive1, gamma=0.9, lam=0.5)
    d0, d1 = 0.0 + 0.9 * 0.2 - 0.5, 1.0 - 0.2  # TD errors; the last step is terminal
    np.testing.assert_allclose(adv1[:2, 0], [d0 + 0.9 * 0.5 * d1, d1], atol=1e-6)


def test_local_pretrained_folders_load_their_weights_and_tokenizer(tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM, SiglipVisionConfig, SiglipVisionModel

    torch.manual_seed(1)
    vision = SiglipVisionModel(
        SiglipVisionConfig(
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            image_size=32,
            patch_size=8,
        )
    )
    vision.save_pretrained(tmp_path / "vision")
    tok = word_tokenizer(SENTENCES + ["grasp the cube"], 6)
    causal = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=tok.get_vocab_size(),
            hidden_size=24,
            intermediate_size=48,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=2,
        )
    )
    causal.save_pretrained(tmp_path / "lm")  # a causal LM's folder, as SmolLM2's: its base model is taken
    lm = causal.model
    tok.save(str(tmp_path / "lm" / "tokenizer.json"))
    vc = VLAConfig(vision_model=str(tmp_path / "vision"), language_model=str(tmp_path / "lm"))
    model, mtok = tiny(vc=vc)
    assert model.image_side == 32 and model.text.config.hidden_size == 24
    for k, v in vision.state_dict().items():
        torch.testing.assert_close(model.vision.state_dict()[k], v)
    torch.testing.assert_close(model.text.embed_tokens.weight, lm.embed_tokens.weight)
    assert mtok.encode("grasp the cube").ids[:3] == tok.encode("grasp the cube").ids[:3]
    with torch.no_grad():  # a 16x16 camera is resized to the tower's 32x32
        out = model(
            torch.zeros(1, 4),
            *(torch.from_numpy(a) for a in tokenize(mtok, ["grasp the cube"])),
            torch.zeros(1, 16, 16, 3, dtype=torch.uint8),
        )
    assert out.shape == (1, 3, 8)


def test_a_model_in_the_local_hugging_face_cache_is_found_by_its_repo_id(tmp_path, monkeypatch):
    """README: weights from a local folder or the local Hugging Face cache. A repo id resolves to
    its cached snapshot (no download); an id the cache lacks is one error naming the key."""
    import huggingface_hub.constants
    from transformers import SiglipVisionConfig, SiglipVisionModel

    from simreal.errors import ConfigError

    cache = tmp_path / "hub"
    snapshot = cache / "models--tiny--siglip" / "snapshots" / "0123abcd"
    torch.manual_seed(2)
    vision = SiglipVisionModel(
        SiglipVisionConfig(
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            image_size=32,
            patch_size=8,
        )
    )
    vision.save_pretrained(snapshot)
    (cache / "models--tiny--siglip" / "refs").mkdir()
    (cache / "models--tiny--siglip" / "refs" / "main").write_text("0123abcd")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    model, _ = tiny(vc=VLAConfig(vision_model="tiny/siglip"))
    for k, v in vision.state_dict().items():
        torch.testing.assert_close(model.vision.state_dict()[k], v)
    with pytest.raises(ConfigError, match="train.vla.vision_model.*no such model in the Hugging Face cache"):
        tiny(vc=VLAConfig(vision_model="tiny/absent"))


def test_a_model_folder_without_a_config_or_the_weights_is_named(tmp_path):
    from transformers import CLIPVisionConfig, CLIPVisionModel

    from simreal.errors import ConfigError

    (tmp_path / "lm").mkdir()
    (tmp_path / "lm" / "tokenizer.json").write_text(word_tokenizer(SENTENCES, 6).to_str())
    with pytest.raises(ConfigError, match="train.vla.language_model.*no config.json"):
        tiny(vc=VLAConfig(language_model=str(tmp_path / "lm")))
    # a vision folder of another architecture: its weights would leave the SigLIP tower random
    CLIPVisionModel(
        CLIPVisionConfig(
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            image_size=32,
            patch_size=8,
        )
    ).save_pretrained(tmp_path / "clip")
    with pytest.raises(ConfigError, match="train.vla.vision_model.*clip_vision_model checkpoint; expected a SigLIP"):
        tiny(vc=VLAConfig(vision_model=str(tmp_path / "clip")))
    # a SigLIP config with the weights of something else: refused, not left at random
    from transformers import SiglipVisionConfig

    SiglipVisionConfig(
        hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, image_size=32, patch_size=8
    ).save_pretrained(tmp_path / "clip")
    with pytest.raises(ConfigError, match="train.vla.vision_model.*does not hold the weights of a SigLIP"):
        tiny(vc=VLAConfig(vision_model=str(tmp_path / "clip")))


def test_arm_reach_choice_puts_the_goal_on_the_named_ball():
    import jax

    from simreal.policies.run_config import make_env, resolve
    from simreal.policies.vla.instructions import instruction
    from simreal.sim.tasks.arm_reach_choice import BALLS

    env = make_env(resolve("arm-reach-choice", SHORT))
    seen = set()
    for seed in range(12):
        s = env.reset(jax.random.PRNGKey(seed))
        info = {k: np.asarray(v) for k, v in s.info.items() if isinstance(v, jax.Array)}
        k = int(info["goal_index"])
        np.testing.assert_allclose(info["target_pos_w"], info["ball_pos_w"][k])
        np.testing.assert_allclose(np.asarray(env.mocap_pos(s.info)), info["ball_pos_w"])
        assert instruction("arm-reach-choice", info) == f"reach the {list(BALLS)[k]} ball"
        assert np.min(np.abs(np.diff(np.sort(info["ball_pos_w"][:, 1])))) > 0.15 - 2 * 0.02 - 1e-6
        # no ball where the gripper starts: doing nothing reaches none of them
        start = np.asarray(env.home_ee_pos)
        assert np.min(np.linalg.norm(info["ball_pos_w"] - start, axis=1)) > 2 * env.cfg.success_radius_m
        seen.add(k)
    assert seen == {0, 1, 2}
    assert "target_pos_w" not in [t["name"] for t in env.obs_layout]  # the words and the camera say where


# -- end to end ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def vla_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("vla")
    data, run = root / "choice", root / "run"
    assert (
        main(
            [
                "demos",
                "arm-reach-choice",
                *SHORT,
                "--teacher",
                "scripted",
                "--episodes",
                "4",
                "--num-envs",
                "4",
                "--camera",
                "front",
                "--image-size",
                "16x16",
                "--out",
                str(data),
            ]
        )
        == 0
    )
    assert main(["train-bc", str(data), *TINY, "--policy", "vla", "--epochs", "2", "--out", str(run)]) == 0
    return data, run


def test_vla_run_checkpoint_metrics_and_eval(vla_run, capsys):
    import csv

    from simreal.policies.vla.model import CHECKPOINT, TOKENIZER, load_vla

    _, run = vla_run
    model, tok = load_vla(run / CHECKPOINT)
    assert (run / TOKENIZER).is_file() and model.spec.cameras == {"front": (16, 16)}
    rows = list(csv.DictReader((run / "metrics.csv").open()))
    assert [r["epoch"] for r in rows] == ["1", "2"] and float(rows[-1]["eval_episodes"]) == 2
    assert float(rows[-1]["loss/train"]) < float(rows[0]["loss/train"])
    capsys.readouterr()
    assert main(["eval", str(run), "--episodes", "2"]) == 0
    assert "success" in capsys.readouterr().out


def test_vla_bundle_takes_images_and_an_instruction_and_matches_torch(vla_run, tmp_path):
    from simreal.bundle import INSTRUCTION_IDS, OnnxPolicy, load_bundle
    from simreal.errors import BundleError
    from simreal.policies.vla.model import CHECKPOINT, DeployedVLA, load_vla
    from simreal.yaml_io import dump_yaml, load_yaml

    _, run = vla_run
    out = tmp_path / "bundle"
    assert main(["export", str(run), "--out", str(out)]) == 0
    b = load_bundle(out)
    assert [(i.name, i.height, i.width) for i in b.images] == [("front", 16, 16)]
    assert b.instruction is not None and b.instruction.max_tokens == 6 and b.instruction.tokenizer in b.files
    policy = OnnxPolicy(b)
    model, _ = load_vla(run / CHECKPOINT)
    rng = np.random.default_rng(0)
    obs = rng.normal(size=b.obs_size).astype(np.float32)
    image = rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)
    for sentence in ("reach the red ball", "reach the blue ball"):
        words = b.instruction_inputs(sentence)
        got = policy(obs, {"image.front": image, **words})
        with torch.no_grad():
            want = DeployedVLA(model)(
                torch.from_numpy(obs[None]),
                *(torch.from_numpy(words[k][None]) for k in (INSTRUCTION_IDS, "instruction_mask")),
                torch.from_numpy(image[None]),
            )
        np.testing.assert_allclose(got, want[0].numpy(), atol=1e-5)
        assert got.shape == (b.action.size,) and np.all(np.abs(got) <= 1)
    raw = load_yaml(out / "bundle.yaml")
    raw["images"][0]["height"] = 32
    dump_yaml(out / "bundle.yaml", raw)
    with pytest.raises(BundleError, match="images"):
        OnnxPolicy(load_bundle(out))


def test_finetune_vla_writes_a_run_that_eval_takes(vla_run, tmp_path, capsys):
    import csv

    _, run = vla_run
    out = tmp_path / "rl"
    assert main(["finetune-vla", str(run), "env.episode_length_s=1"]) != 0
    assert "'env.episode_length_s': finetune-vla changes train.vla.rl.* only" in capsys.readouterr().err
    assert (
        main(
            [
                "finetune-vla",
                str(run),
                "train.vla.rl.iterations=1",
                "train.vla.rl.num_envs=2",
                "train.vla.rl.eval_episodes=2",
                "train.vla.rl.batch_size=8",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "before (2 episodes)" in text and "after  (2 episodes)" in text
    rows = list(csv.DictReader((out / "metrics.csv").open()))
    assert [r["round"] for r in rows] == ["0", "1"] and float(rows[1]["updates"]) >= 1
    assert np.isfinite(float(rows[1]["approx_kl"]))
    assert main(["eval", str(out), "--episodes", "2"]) == 0


def test_finetune_vla_stopped_before_its_first_round_leaves_no_run(vla_run, tmp_path, monkeypatch, capsys):
    """Ctrl-C before a round finished: no run directory that eval and export would refuse, the
    reason in one line, exit 130 (a round that finished is kept, as train-bc keeps its epochs)."""
    import simreal.policies.vla.rl as vla_rl

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    _, run = vla_run
    monkeypatch.setattr(vla_rl, "finetune", stopped)
    out = tmp_path / "rl"
    capsys.readouterr()
    assert main(["finetune-vla", str(run), "--out", str(out)]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "simreal finetune-vla: stopped by SIGINT: no round finished, nothing kept", err
    assert not out.exists()


def test_vla_needs_camera_images_in_the_dataset(tmp_path, capsys):
    data = tmp_path / "nocam"
    assert (
        main(
            [
                "demos",
                "arm-reach-choice",
                *SHORT,
                "--teacher",
                "scripted",
                "--episodes",
                "1",
                "--num-envs",
                "1",
                "--out",
                str(data),
            ]
        )
        == 0
    )
    assert main(["train-bc", str(data), *TINY, "--policy", "vla", "--epochs", "1", "--out", str(tmp_path / "r")]) != 0
    assert "no camera images (observation.images.<camera>)" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()  # nothing trained: no run left behind


# -- deploy --------------------------------------------------------------------------------------
def _image_msg(px: np.ndarray, encoding: str = "rgb8"):
    from simreal.deploy.ros_types import Image

    h, w, c = px.shape
    return Image(height=h, width=w, encoding=encoding, step=w * c, data=px.tobytes())


def test_decode_image_reads_encodings_and_strides_and_crops_to_the_policys_aspect():
    from simreal.deploy.adapters import StateMessageError
    from simreal.deploy.perception import decode_image

    rgb = np.random.default_rng(0).integers(0, 256, (8, 12, 3), dtype=np.uint8)
    # same size: exact; bgr8 and rgba8 read back to the same RGB
    np.testing.assert_array_equal(decode_image(_image_msg(rgb[:, 2:10]), 8, 8), rgb[:, 2:10])
    np.testing.assert_array_equal(decode_image(_image_msg(rgb[..., ::-1].copy(), "bgr8"), 8, 12), rgb)
    rgba = np.concatenate([rgb, np.full((8, 12, 1), 255, np.uint8)], axis=2)
    np.testing.assert_array_equal(decode_image(_image_msg(rgba, "rgba8"), 8, 12), rgb)
    # 8x12 -> 4x4: the centre 8x8 crop, each output pixel the mean of its 2x2 source box
    box = rgb[:, 2:10].astype(float).reshape(4, 2, 4, 2, 3).mean(axis=(1, 3))
    np.testing.assert_array_equal(decode_image(_image_msg(rgb), 4, 4), np.round(box).astype(np.uint8))
    np.testing.assert_array_equal(decode_image(_image_msg(rgb[:2, :2]), 4, 4), rgb[:2, :2].repeat(2, 0).repeat(2, 1))
    padded = _image_msg(np.concatenate([rgb, np.zeros((8, 2, 3), np.uint8)], axis=1))
    padded.width = 12  # rows of 14 pixels' bytes, 12 of them the image
    np.testing.assert_array_equal(decode_image(padded, 8, 12), rgb)
    with pytest.raises(StateMessageError, match="encoding '16UC1' not read"):
        decode_image(_image_msg(rgb, "16UC1"), 8, 8)
    short = _image_msg(rgb)
    short.data = rgb.tobytes()[:-5]
    with pytest.raises(StateMessageError, match="needs 288 bytes"):
        decode_image(short, 8, 8)


def test_runner_waits_for_the_instruction_and_a_fresh_image(vla_run, tmp_path):
    from simreal.bundle import load_bundle
    from simreal.deploy.ros_types import JointState, String, msg_class
    from simreal.deploy.runner import IMAGE, INSTRUCTION, PolicyRunner
    from simreal.deploy.safety import FAULT

    _, run = vla_run
    assert main(["export", str(run), "--out", str(tmp_path / "b")]) == 0
    b = load_bundle(tmp_path / "b")
    runner = PolicyRunner(b, msg_class=msg_class)
    subs = {s.name: (s.topic, s.type) for s in runner.subscriptions()}
    assert subs[IMAGE + "front"] == ("/simreal/camera/front/image_raw", "sensor_msgs/msg/Image")
    assert subs[INSTRUCTION] == ("/simreal/instruction", "std_msgs/msg/String")
    names = list(runner.spec.actuator_names)
    joint = next(n for n, s in runner.cfg.state.items() if s.type.endswith("JointState"))
    px = np.random.default_rng(1).integers(0, 256, (32, 48, 3), dtype=np.uint8)  # another size: resized
    t = 0.0
    for _ in range(5):  # state and image, no instruction: the policy does not run
        t += 0.02
        runner.dispatch(joint, JointState(name=names, position=[0.0] * len(names), velocity=[0.0] * len(names)), t)
        runner.dispatch(IMAGE + "front", _image_msg(px), t)
        runner.tick(t)
    assert runner.stats.policy_runs == 0
    for refused in ("  ", "reach the yellow ball"):  # empty; a word the policy never heard
        runner.dispatch(INSTRUCTION, String(data=refused), t)
        assert "refused" in runner.stats.last_error and runner.perception.inputs(t) is None
    runner.dispatch(IMAGE + "front", _image_msg(px, "yuv422"), t)
    assert "encoding 'yuv422' not read" in runner.stats.last_error
    runner.dispatch(INSTRUCTION, String(data="reach the red ball"), t)
    for _ in range(3):
        t += 0.02
        runner.dispatch(joint, JointState(name=names, position=[0.0] * len(names), velocity=[0.0] * len(names)), t)
        runner.tick(t)
    assert runner.stats.policy_runs == 3 and runner.perception.instruction == "reach the red ball"
    t += runner.cfg.perception.image_timeout_s  # the camera stopped: stale, the watchdog latches
    runner.dispatch(joint, JointState(name=names, position=[0.0] * len(names), velocity=[0.0] * len(names)), t)
    res = runner.tick(t)
    assert runner.stats.policy_runs == 3 and res.mode == FAULT


def test_vla_bundle_rehearses_with_rendered_images_and_the_episodes_instruction(vla_run, tmp_path):
    from simreal.bundle import load_bundle
    from simreal.deploy.sim_loop import SimLoopConfig, run_offline

    _, run = vla_run
    assert main(["export", str(run), "--out", str(tmp_path / "b")]) == 0
    report = run_offline(load_bundle(tmp_path / "b"), SimLoopConfig(duration_s=0.2, seed=3))
    r = report["runner"]
    assert r["policy_runs"] >= 9 and r["bad_state_msgs"] == 0
    assert report["gate"]["compared_s"] > 0.1 and report["gate"]["value"] is not None
