"""Recording demonstrations: a teacher drives a batch of the task's env, and the first episode
of each env becomes one dataset episode.

    cfg, env, teacher = load_teacher("scripted", "arm-reach")
    for ep in record(env, teacher, "arm-reach", episodes=50):
        ...   # ep.frames["action"] (T, m), ep.instruction, ep.success

The env runs through its own ``reset``/``step`` (jitted and vmapped, :class:`JaxBatch`), so
the data are the task's: its observation noise, randomisation and action delay. Frame ``t``
of an episode holds, under LeRobot's names:

=============================  ===========  ==================================================
``observation.state``          (n,) f32     o_t, what the policy sees (a dict observation's ``state``)
``observation.images.<cam>``   (H, W, 3) u8 camera ``<cam>`` at the state o_t was taken in
``observation.environment_state`` (k,) f32  the task's noise-free scene state at o_t (its
                                            ``environment_state_terms``; only tasks naming some)
``action``                     (m,) f32     a_t, the teacher's command clipped to [-1, 1] (env.step's input,
                                            unless a driver acts)
``next.reward``                (1,) f32     r_{t+1}
``next.done``                  (1,) bool    the episode ended with this step (time limit or failure)
``next.success``               (1,) bool    the task's success criterion after this step
=============================  ===========  ==================================================

``next.success`` is the task's ``final_stats`` success on the state after the step, "success
if the episode ended here" (at the last frame: the episode's own result).

With a ``driver`` (DAgger, Ross et al. 2011: ``simreal demos --drive RUN``) the driver's action
steps the env and the teacher only labels: the states are those the driver visits (a cloned
policy's own mistakes), the recorded action is what the teacher would do there, and success is
the driver's. Images are rendered
from the nominal model (:class:`~simreal.sim.render.BatchRenderer`) at the size asked for.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from simreal.errors import ConfigError
from simreal.policies.demos.teachers import Teacher
from simreal.policies.vla.instructions import instruction
from simreal.sim.render import sized_renderer

STATE, ACTION = "observation.state", "action"
ENV_STATE = "observation.environment_state"
IMAGE_PREFIX = "observation.images."
#: The sidecar beside LeRobot's metadata saying where a recording came from (lerobot ignores it):
#: ``format``, ``teacher``, ``seed``, ``cameras``, ``config`` (the resolved run config of the env
#: recorded, which ``simreal train-bc`` rebuilds) and, once the recording ended, ``teacher_success``;
#: ``appended`` lists each ``--append`` recording since (``teacher``, ``drive``, ``seed``, ``episodes``).
SOURCE_FILE = "meta/simreal.yaml"
SOURCE_FORMAT = "simreal-demos/1"


@dataclasses.dataclass(frozen=True)
class Episode:
    """One recorded episode: its frames (key -> (T, ...) array), sentence and result."""

    frames: dict[str, np.ndarray]
    instruction: str
    success: bool | None  # None: the task reports no success statistic

    @property
    def length(self) -> int:
        return len(self.frames[ACTION])


def read_source(root: str | Path) -> dict[str, Any] | None:
    """A dataset's :data:`SOURCE_FILE`, or None for one recorded elsewhere (no such file);
    DataFileError naming the file when it is not one ``simreal demos`` wrote."""
    from simreal.errors import DataFileError
    from simreal.yaml_io import load_yaml

    path = Path(root) / SOURCE_FILE
    if not path.is_file():
        return None
    data = load_yaml(path)
    if data.get("format") != SOURCE_FORMAT or not isinstance(data.get("config"), Mapping):
        raise DataFileError(
            str(path), f"expected 'format: {SOURCE_FORMAT}' and a 'config' mapping (the file simreal demos writes)"
        )
    return data


def write_source(
    root: str | Path,
    cfg: Any,
    teacher: str,
    seed: int,
    cameras: Mapping[str, tuple[int, int]],
    tally: Tally | None = None,
) -> None:
    """Write :data:`SOURCE_FILE` of a recording: the resolved config ``cfg``, the teacher, seed,
    cameras and, once known, the teacher's success (``tally``)."""
    from simreal.yaml_io import dump_yaml

    data = {
        "format": SOURCE_FORMAT,
        "teacher": teacher,
        "seed": seed,
        "cameras": {k: list(v) for k, v in cameras.items()},
        "config": cfg.to_dict(),
    }
    if tally is not None:
        data["teacher_success"] = {"episodes": tally.ran, "succeeded": tally.succeeded}
    dump_yaml(Path(root) / SOURCE_FILE, data)


def note_append(
    root: str | Path, source: Mapping[str, Any], teacher: str, drive: str | None, seed: int, episodes: int
) -> None:
    """Add an ``--append`` recording of ``episodes`` episodes to the ``appended`` list of the
    dataset's :data:`SOURCE_FILE` (``source``, as :func:`read_source` read it)."""
    from simreal.yaml_io import dump_yaml

    entry = {"teacher": teacher, "drive": drive, "seed": seed, "episodes": episodes}
    dump_yaml(Path(root) / SOURCE_FILE, {**source, "appended": [*source.get("appended", []), entry]})


def used_seeds(source: Mapping[str, Any]) -> list[int]:
    """The seeds of a dataset's recordings: the first one's, then each ``--append``'s."""
    return [int(source.get("seed", 0))] + [int(a["seed"]) for a in source.get("appended", [])]


def state_size(env: Any) -> int:
    """Length of the policy's state vector (a dict observation's ``state``)."""
    size = env.observation_size
    return int(size["state"][0]) if isinstance(size, Mapping) else int(size)


def features(env: Any, cameras: Mapping[str, tuple[int, int]] = {}) -> dict[str, dict[str, Any]]:
    """LeRobot feature specs of a recording of ``env`` with ``cameras`` (name -> (H, W) [px])."""
    out: dict[str, dict[str, Any]] = {
        STATE: {
            "dtype": "float32",
            "shape": [state_size(env)],
            "names": _element_names(env.obs_layout, env.cfg.obs_history_steps),
        },
        ACTION: {"dtype": "float32", "shape": [int(env.action_size)], "names": list(env.robot.actuator_names)},
        "next.reward": {"dtype": "float32", "shape": [1], "names": None},
        "next.done": {"dtype": "bool", "shape": [1], "names": None},
    }
    if env.environment_state_terms:
        names = _element_names(env.environment_state_layout)
        out[ENV_STATE] = {"dtype": "float32", "shape": [len(names)], "names": names}
    if reports_success(env):
        out["next.success"] = {"dtype": "bool", "shape": [1], "names": None}
    for cam, (h, w) in cameras.items():
        out[IMAGE_PREFIX + cam] = {"dtype": "video", "shape": [h, w, 3], "names": ["height", "width", "channels"]}
    return out


def _element_names(layout: Sequence[Mapping[str, Any]], frames: int = 1) -> list[str]:
    """``<term>.<i>`` for each element of a [{name, size}] layout (what ``simreal frames`` reads
    back), then ``<term>.<i>@t-<j>`` for each earlier frame j of a stacked observation."""
    names = [f"{t['name']}.{i}" for t in layout for i in range(t["size"])]
    return names + [f"{n}@t-{j}" for j in range(1, frames) for n in names]


def camera_sizes(
    env: Any, names: Sequence[str], task: str, size: tuple[int, int] | None = None
) -> dict[str, tuple[int, int]]:
    """name -> (H, W) [px] of the model cameras ``names``: ``size``, or each camera's own
    resolution; ConfigError naming ``--camera`` for a name the model lacks, listing its cameras."""
    from simreal.sim.cameras import camera_size

    return {cam: size or camera_size(env.mj_model, cam, "--camera", owner=task) for cam in names}


def reports_success(env: Any) -> bool:
    """Whether the task's episode statistics include ``success``."""
    return "success" in env.final_stats(env.init_stats(), jnp.bool_(False))


def _success_now(env: Any) -> Callable[[Any], jax.Array] | None:
    """Batched "success if the episode ended now" from the task's statistics, or None when the
    task reports no success."""
    if not reports_success(env):
        return None
    return jax.jit(jax.vmap(lambda stats: env.final_stats(stats, jnp.bool_(False))["success"] > 0.5))


@dataclasses.dataclass
class Tally:
    """Episodes a recording ran, and how many the task counted as a success."""

    ran: int = 0
    succeeded: int = 0

    @property
    def rate(self) -> float:
        """Success rate (NaN before the first episode)."""
        return self.succeeded / self.ran if self.ran else float("nan")


def record(
    env: Any,
    teacher: Teacher,
    task: str,
    episodes: int,
    seed: int = 0,
    num_envs: int = 16,
    cameras: Mapping[str, tuple[int, int]] = {},
    only_success: bool = False,
    max_attempts: int | None = None,
    tally: Tally | None = None,
    on_step: Callable[[int], None] | None = None,
    driver: Teacher | None = None,
    stop: Callable[[], bool] | None = None,
) -> Iterator[Episode]:
    """Yield ``episodes`` episodes of ``teacher`` in ``env`` (module docstring), in env order.

    Args:
      task: the task's name (for the episode's instruction).
      seed: seeds the envs' resets (the batch of ``num_envs`` is reset once per round).
      cameras: name -> (H, W) [px] of the model cameras to record (:func:`camera_sizes`).
      only_success: yield only the episodes the task counts as a success.
      max_attempts: stop after this many episodes were run (default: ``episodes``, or ten
        times that with ``only_success``); fewer than ``episodes`` may then come out.
      tally: counts every episode run (kept or not) and its successes, as they finish.
      on_step: called with the number of frames recorded by each batched step (progress).
      driver: acts in the env instead of the teacher, which then only labels (module docstring).
      stop: asked before each step; True ends the recording there (the episodes of the batch under
        way are dropped, those yielded before are kept): a stop signal, between two steps rather
        than inside the physics callback.
    """
    from simreal.sim.adapter_core import JaxBatch, to_numpy

    success_now = _success_now(env)
    env_state = jax.jit(jax.vmap(env.environment_state)) if env.environment_state_terms else None
    markers = jax.jit(jax.vmap(env.mocap_pos)) if env.mj_model.nmocap else None
    if only_success and success_now is None:
        raise ConfigError("--only-success", f"{task} reports no success statistic to keep episodes by")
    tally = tally if tally is not None else Tally()
    limit = max_attempts or (10 * episodes if only_success else episodes)
    batch = JaxBatch(env, max(1, min(num_envs, limit)), seed)
    renderer = sized_renderer(env.mj_model, cameras) if cameras else None
    kept = 0
    try:
        while kept < episodes and tally.ran < limit:
            batch.reset()
            teacher.reset()
            if driver is not None:
                driver.reset()
            b = batch.num_envs
            info = {k: np.asarray(v) for k, v in batch.state.info.items() if isinstance(v, jax.Array)}
            frames: list[dict[str, list[np.ndarray]]] = [{} for _ in range(b)]
            result: list[bool | None] = [None] * b
            alive = np.ones(b, bool)
            for _ in range(env.episode_steps):
                if stop is not None and stop():
                    return
                s = batch.state
                obs = to_numpy(s.obs)
                row = {
                    STATE: (obs["state"] if isinstance(obs, dict) else obs).astype(np.float32),
                    ACTION: np.clip(teacher.act(s), -1.0, 1.0).astype(np.float32),
                }
                if env_state is not None:
                    row[ENV_STATE] = np.asarray(env_state(s.pipeline_state, s.info), np.float32)
                if renderer is not None:
                    images = renderer.render(
                        np.asarray(s.pipeline_state.qpos),
                        alive,
                        None if markers is None else np.asarray(markers(s.info)),
                    )
                    row.update({IMAGE_PREFIX + c: images[f"pixels/{c}"] for c in cameras})
                out = batch.step(row[ACTION] if driver is None else np.clip(driver.act(s), -1.0, 1.0))
                done = np.asarray(out.done)
                row["next.reward"] = np.asarray(out.reward, np.float32)[:, None]
                row["next.done"] = done[:, None]
                if success_now is not None:
                    ended = np.asarray(out.episode_metrics["episode/success"]) > 0.5
                    now = np.asarray(success_now(batch.state.info["stats"]))
                    row["next.success"] = np.where(done, ended, now)[:, None]
                for i in np.flatnonzero(alive):
                    for k, v in row.items():
                        frames[i].setdefault(k, []).append(v[i])
                    if done[i] and success_now is not None:
                        result[i] = bool(row["next.success"][i, 0])
                if on_step is not None:
                    on_step(int(alive.sum()))
                alive &= ~done
                if not alive.any():
                    break
            for j in range(b):
                if kept >= episodes or tally.ran >= limit:
                    break
                tally.ran += 1
                tally.succeeded += bool(result[j])
                if only_success and not result[j]:
                    continue
                kept += 1
                yield Episode(
                    frames={k: np.stack(v) for k, v in frames[j].items()},
                    instruction=instruction(task, {k: v[j] for k, v in info.items()}),
                    success=result[j],
                )
    finally:
        if renderer is not None:
            renderer.close()
