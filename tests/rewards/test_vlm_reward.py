"""Zero-shot VLM rewards: the math against hand-computed values, and tiny CLIP/SigLIP models end to end."""

from __future__ import annotations

import numpy as np
import pytest

from simreal.config import build
from simreal.errors import ConfigError, DataFileError
from simreal.rewards.vlm_math import (
    contrast_reward,
    goal_baseline_projection,
    goal_baseline_reward,
    prompt_mean,
    unit_rows,
)

E1, E2, E3 = np.eye(3)


# -- math on 3-D embeddings ------------------------------------------------------------------------
def test_projection_matrix_by_hand():
    # g = e1, b = e2: d = (1, -1, 0), |d|^2 = 2, d d^T / |d|^2 = [[1, -1, 0], [-1, 1, 0], [0, 0, 0]] / 2.
    P = goal_baseline_projection(E1, E2, alpha=0.5)
    want = 0.5 * np.array([[0.5, -0.5, 0.0], [-0.5, 0.5, 0.0], [0.0, 0.0, 0.0]]) + 0.5 * np.eye(3)
    np.testing.assert_allclose(P, want, atol=1e-12)


@pytest.mark.parametrize(
    "alpha, want",
    [
        # s = e3, s - g = (-1, 0, 1); (s - g) P = (a/2 - 1, a/2, 1 - a); R = 1 - |.|^2 / 2.
        (0.0, 0.0),  # (-1, 0, 1): |.|^2 = 2, R = 0 = cos(e3, e1)
        (0.5, 0.5625),  # (-0.75, 0.25, 0.5): |.|^2 = 0.875
        (1.0, 0.75),  # (-0.5, 0.5, 0): |.|^2 = 0.5
    ],
)
def test_goal_baseline_reward_by_hand(alpha, want):
    r = goal_baseline_reward(E3[None], E1, goal_baseline_projection(E1, E2, alpha))
    assert r.shape == (1,)
    np.testing.assert_allclose(r, [want], atol=1e-12)


def test_goal_baseline_reward_batch_and_limits():
    P = goal_baseline_projection(E1, E2, alpha=0.5)
    s = np.stack([E1, E2, E3])
    # s = g: R = 1 (the maximum). s = b = e2: s - g = (-1, 1, 0) lies along d, so (s - g) P = s - g and R = 0.
    np.testing.assert_allclose(goal_baseline_reward(s, E1, P), [1.0, 0.0, 0.5625], atol=1e-12)
    # alpha = 0 is the cosine similarity for any unit s.
    rng = np.random.default_rng(0)
    s = unit_rows(rng.normal(size=(5, 3)))
    np.testing.assert_allclose(goal_baseline_reward(s, E1, goal_baseline_projection(E1, E2, 0.0)), s @ E1, atol=1e-12)


def test_contrast_reward_by_hand():
    s = np.array([[0.6, 0.8, 0.0], [3.0, 0.0, 4.0]])  # the second is not unit: cosines normalise it to (0.6, 0, 0.8)
    np.testing.assert_allclose(contrast_reward(s, E1, E2), [0.6 - 0.8, 0.6 - 0.0], atol=1e-12)
    np.testing.assert_allclose(contrast_reward(s, 2 * E1, E2), [-0.2, 0.6], atol=1e-12)


def test_prompt_mean_normalises_before_and_after():
    want = np.array([1.0, 1.0, 0.0]) / np.sqrt(2.0)
    np.testing.assert_allclose(prompt_mean(np.stack([2 * E1, E2])), want, atol=1e-12)
    np.testing.assert_allclose(
        prompt_mean(np.stack([E1, E1, E2])), np.array([2.0, 1.0, 0.0]) / np.sqrt(5.0), atol=1e-12
    )


# -- config ----------------------------------------------------------------------------------------
def _cfg(**over):
    from simreal.rewards.vlm import ClipRewardConfig

    return build(ClipRewardConfig, {"model": "m", "prompts": ["a red cube"], **over}, prefix="reward")


@pytest.mark.parametrize(
    "over, key",
    [
        ({"prompts": []}, "reward.prompts"),
        ({"prompts": [" "]}, "reward.prompts"),
        ({"prompts": "a red cube"}, "reward.prompts"),
        ({"alpha": 1.5}, "reward.alpha"),
        ({"every_k_steps": 0}, "reward.every_k_steps"),
        ({"kind": "siglip2"}, "reward.kind"),
        ({"baselines": ["a cube"], "negatives": ["no cube"]}, "reward.negatives"),
        ({"negatives": [""]}, "reward.negatives"),
        ({"prompt": ["x"]}, "reward.prompt"),
    ],
)
def test_config_errors_name_the_key(over, key):
    with pytest.raises(ConfigError) as err:
        _cfg(**over)
    assert err.value.key == key


def test_config_defaults_and_required_keys():
    from simreal.rewards.vlm import ClipRewardConfig

    with pytest.raises(ConfigError, match="reward.model': missing required key"):
        build(ClipRewardConfig, {"prompts": ["a"]}, prefix="reward")
    cfg = _cfg(baselines=["a table"])
    assert (cfg.kind, cfg.alpha, cfg.weight, cfg.every_k_steps) == ("clip", 0.5, 1.0, 1)
    assert cfg.prompts == ("a red cube",) and cfg.baselines == ("a table",)


# -- tiny models -----------------------------------------------------------------------------------
@pytest.fixture(scope="module", params=["clip", "siglip"])
def tiny_model(request, tmp_path_factory):
    pytest.importorskip("transformers")
    from fixtures import vlm_models

    if request.param == "siglip":
        pytest.importorskip("sentencepiece")
        return vlm_models.make_tiny_siglip(tmp_path_factory.mktemp("siglip"))
    return vlm_models.make_tiny_clip(tmp_path_factory.mktemp("clip"))


def _frames(n: int, seed: int = 0, size: tuple[int, int] = (48, 64)) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, *size, 3), dtype=np.uint8)


def _reference_embeddings(directory, texts, frames):
    """Embeddings straight from transformers, without simreal's loader: what the reward must reproduce."""
    import torch
    from transformers import AutoModel, AutoProcessor

    model = AutoModel.from_pretrained(directory, local_files_only=True).eval()
    proc = AutoProcessor.from_pretrained(directory, local_files_only=True)
    padding = "max_length" if model.config.model_type == "siglip" else True
    with torch.inference_mode():
        t = model.get_text_features(**proc(text=texts, padding=padding, return_tensors="pt")).pooler_output
        s = model.get_image_features(**proc(images=list(frames), return_tensors="pt")).pooler_output
    unit = lambda x: (x / x.norm(dim=-1, keepdim=True)).double().numpy()  # noqa: E731
    return unit(t), unit(s)


def test_loader_reads_the_saved_directory(tiny_model):
    from simreal.rewards.vlm_loading import load_clip_family

    model, processor = load_clip_family(str(tiny_model))
    assert model.config.model_type in ("clip", "siglip") and not model.training
    ids = processor(text=["red cube", "blue ball"], padding=True)["input_ids"]
    assert ids[0] != ids[1]  # the tokenizer tells prompts apart


def test_projection_reward_matches_transformers(tiny_model):
    from simreal.rewards.vlm import ClipReward

    prompts, baselines = ["a red cube", "the red cube"], ["a table"]
    reward = ClipReward(_cfg(model=str(tiny_model), prompts=prompts, baselines=baselines, alpha=0.7, batch_size=3))
    frames = _frames(7)
    r = reward(frames)
    assert r.shape == (7,) and r.dtype == np.float32 and np.all(np.isfinite(r))

    t, s = _reference_embeddings(tiny_model, prompts + baselines, frames)
    g, b = prompt_mean(t[:2]), prompt_mean(t[2:])
    d = g - b
    P = 0.7 * np.outer(d, d) / (d @ d) + 0.3 * np.eye(len(d))
    want = 1.0 - 0.5 * np.sum(((s - g) @ P) ** 2, axis=1)
    np.testing.assert_allclose(r, want, atol=1e-5)
    assert np.ptp(r) > 0  # different frames, different rewards
    # Batching changes nothing: one frame alone scores as it does inside the batch.
    np.testing.assert_allclose(reward(frames[4:5]), r[4:5], atol=1e-5)


def test_contrast_and_plain_rewards_match_transformers(tiny_model):
    from simreal.rewards.vlm import ClipReward

    frames = _frames(4, seed=1, size=(32, 32))
    t, s = _reference_embeddings(tiny_model, ["red cube", "blue ball"], frames)
    contrast = ClipReward(_cfg(model=str(tiny_model), prompts=["red cube"], negatives=["blue ball"]))
    np.testing.assert_allclose(contrast(frames), s @ t[0] - s @ t[1], atol=1e-5)
    plain = ClipReward(_cfg(model=str(tiny_model), prompts=["red cube"]))  # no baselines: cos(s, g)
    np.testing.assert_allclose(plain(frames), s @ t[0], atol=1e-5)
    assert plain(frames[:0]).shape == (0,)
    with pytest.raises(ValueError, match="uint8"):
        plain(frames.astype(np.float32))


def test_baseline_equal_to_goal_is_a_config_error(tiny_model):
    from simreal.rewards.vlm import ClipReward

    with pytest.raises(ConfigError, match="reward.baselines"):
        ClipReward(_cfg(model=str(tiny_model), prompts=["red cube"], baselines=["red cube"]))


# -- missing weights -------------------------------------------------------------------------------
def test_missing_weights_say_where_and_how(tmp_path):
    pytest.importorskip("transformers")
    from simreal.rewards.vlm_loading import load_clip_family

    for name in (str(tmp_path / "no-such-dir"), "simreal-tests/not-in-any-cache"):
        with pytest.raises(DataFileError) as err:
            load_clip_family(name)
        msg = str(err.value)
        assert msg.startswith(name) and "reward.model" in msg and "hf download" in msg and "\n" not in msg
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataFileError, match="no config.json"):
        load_clip_family(str(empty))
    (empty / "config.json").write_text('{"model_type": "bert"}')
    with pytest.raises(DataFileError, match="'bert' is not a CLIP-family model; supported: clip, siglip"):
        load_clip_family(str(empty))
    (empty / "config.json").write_text('{"model_type": "no-such-architecture"}')
    with pytest.raises(DataFileError, match="model type transformers does not know"):
        load_clip_family(str(empty))
    (empty / "config.json").write_text("{not json")
    with pytest.raises(DataFileError, match="not a valid JSON file"):
        load_clip_family(str(empty))


def test_weights_without_processor_or_weights(tmp_path, tiny_model):
    import shutil

    from simreal.rewards.vlm_loading import load_clip_family

    (tmp_path / "m").mkdir()
    shutil.copy(tiny_model / "config.json", tmp_path / "m")
    with pytest.raises(DataFileError, match="no weights"):
        load_clip_family(str(tmp_path / "m"))
    shutil.copy(tiny_model / "model.safetensors", tmp_path / "m")
    with pytest.raises(DataFileError, match="no processor files"):
        load_clip_family(str(tmp_path / "m"))


def test_a_model_without_its_tokenizer_files_is_refused(tmp_path, tiny_model):
    """transformers built an empty tokenizer (2 tokens) where the tokenizer's files were missing,
    and the CLIP reward gave every prompt the same embedding, silently."""
    import shutil

    from simreal.rewards.vlm_loading import load_clip_family

    bare = tmp_path / "m"
    shutil.copytree(tiny_model, bare)
    gone = [
        f for f in bare.iterdir() if f.name.startswith(("tokenizer", "vocab", "merges", "special_tokens", "spiece"))
    ]
    assert gone, sorted(f.name for f in bare.iterdir())
    for f in gone:
        f.unlink()
    with pytest.raises(DataFileError, match="tokenizer's files are missing"):
        load_clip_family(str(bare))


def test_damaged_weights_are_one_line_naming_the_key(tmp_path, tiny_model):
    """A truncated model.safetensors was a traceback from inside safetensors."""
    import shutil

    from simreal.rewards.vlm_loading import load_clip_family

    shutil.copytree(tiny_model, tmp_path / "m")
    w = tmp_path / "m" / "model.safetensors"
    w.write_bytes(w.read_bytes()[: w.stat().st_size // 2])
    with pytest.raises(DataFileError, match=r"\(reward.model\) the weights cannot be read \(SafetensorError"):
        load_clip_family(str(tmp_path / "m"))


def test_a_relative_model_directory_is_saved_absolute(tiny_model, tmp_path, monkeypatch):
    """A run's config named the CLIP directory as typed, so --resume and export from another
    directory could not find it; a repo id of the Hugging Face cache stays as it is."""
    from simreal.rewards.learned import reward_section

    monkeypatch.chdir(tiny_model.parent)
    section = {"kind": "clip", "model": tiny_model.name, "prompts": ["a robot arm at the goal"]}
    assert reward_section(section).model == str(tiny_model)
    assert reward_section({**section, "model": "openai/clip-vit-base-patch32"}).model == "openai/clip-vit-base-patch32"


def test_the_correlation_bench_scores_frames_against_their_task_reward(tiny_model, tmp_path, capsys):
    """bench_vlm_reward --correlate: the command that measures a real model's correlation with task
    progress runs end to end on a tiny model (whose correlation means nothing) and names a frames
    file without a task reward in one line."""
    import io
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    import bench_vlm_reward

    n = 12
    frames = _frames(n, size=(32, 32))
    buf = io.BytesIO()
    np.savez(
        buf,
        frames=frames,
        task_reward=np.linspace(0, 1, n, dtype=np.float32),
        dataset_index=np.zeros(n, np.int64),
        episode_index=np.repeat([0, 1], n // 2),
    )
    (tmp_path / "f.npz").write_bytes(buf.getvalue())
    assert (
        bench_vlm_reward.main(
            [
                "--model",
                str(tiny_model),
                "--correlate",
                str(tmp_path / "f.npz"),
                "--prompt",
                "a red cube",
                "--baseline",
                "a table",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| VLM reward"))
    values = [float(v) for v in row.strip("|").split("|")[1:]]
    assert len(values) == 2 and all(-1.0 <= v <= 1.0 for v in values), row
    assert "on 12 frames" in out and "(2 episodes)" in out
    buf = io.BytesIO()
    np.savez(buf, frames=frames)
    (tmp_path / "g.npz").write_bytes(buf.getvalue())
    assert bench_vlm_reward.main(["--model", str(tiny_model), "--correlate", str(tmp_path / "g.npz")]) == 2
    assert "g.npz: field 'task_reward' is missing: nothing to correlate with" in capsys.readouterr().err
