"""The policy bundle: ``policy.onnx`` plus ``bundle.yaml``, everything deploy needs.

``bundle.yaml`` (format_version 1)::

    format_version: 1
    robot: crazyflie2                 # robot spec name
    robot_spec: {...}                 # the full robot spec, so deploy needs no configs/
    task: quadrotor-hover
    control_rate_hz: 100.0
    observation:
      size: 22
      terms: [{name: pos_error_w, size: 3}, {name: rot_mat_wb, size: 9}, ...]
      normalization: {mean: [...], std: [...], baked_into_onnx: true}
    action:
      mode: rotor_thrust              # rotor_thrust | ctbr | joint_position | ...
      size: 4
      names: [m1, m2, m3, m4]         # motor or joint names, driver order
      units: [N, N, N, N]
      scale: [...]                    # physical = offset + scale * a, a in [-1, 1]
      offset: [...]
      low: [...]                      # physical limits; deploy clamps to them
      high: [...]
    latency: {action_delay_steps: 0, obs_history: 1}   # obs_history: frames the policy observes,
                                      # newest first; observation.size = obs_history x the terms' sizes
    task_params: {target_pos_w: [0.0, 0.0, 1.0]}   # the task's fixed inputs on the robot
    task_config: {...}                # the env config it was trained with (the rehearsal rebuilds it;
                                      # a clip it reads is carried in inputs/, simreal/input_files.py)
    task_topics: {goal: {topic: /simreal/goal_pose, type: geometry_msgs/msg/PoseStamped, role: target}}
    reference: {file: reference.npz, rate_hz: 100.0, loop: true}   # optional: a time-varying
                                      # task input played back from the hand-over (simreal/reference.py)
    onnx: {file: policy.onnx, input: obs, output: action, opset: 17}
    images: [{name: front, height: 64, width: 64}]   # optional: camera inputs (a VLA's)
    instruction: {tokenizer: tokenizer.json, max_tokens: 16}   # optional: a language instruction
    action_chunk: {size: 20, temporal_ensemble_coeff: 0.01}   # optional: a chunked policy (ACT)
    provenance: {run_dir: ..., config_hash: ..., git_commit: ..., created_utc: ..., simreal_version: ...}

The ONNX graph maps a raw observation ``obs`` (1, size) float32 to the deterministic
normalised action ``action`` (1, action.size) in [-1, 1]; observation normalisation is
baked into the graph. With ``action_chunk`` the graph's output is the chunk of the next
``action_chunk.size`` actions (1, size, action.size), and :class:`OnnxPolicy` returns one
action per call, the temporal ensemble of the chunks so far (:mod:`simreal.action_chunk`);
bundles without the section are read as before.

A bundle with ``images`` or ``instruction`` (a vision-language-action policy) has more graph
inputs beside ``obs``: ``image.<name>`` (N, height, width, 3) uint8 RGB per camera, and
``instruction_ids`` and ``instruction_mask`` (N, max_tokens) int64, the instruction tokenised by
the bundle's ``tokenizer.json`` (Hugging Face ``tokenizers``, imported only for such a bundle),
padded and truncated to ``max_tokens``. :class:`OnnxPolicy` takes them as ``extra`` inputs
(:meth:`Bundle.instruction_inputs` tokenises a sentence). :func:`load_bundle` validates all of
it and raises :class:`BundleError` naming the field. Imports: numpy, yaml, onnxruntime only.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from simreal.action_chunk import ActionChunk, ChunkedPolicy
from simreal.errors import BundleError
from simreal.input_files import bundled_inputs
from simreal.npz import short_reason
from simreal.reference import Reference, as_rate_hz, read_reference
from simreal.yaml_io import dump_yaml, load_yaml

FORMAT_VERSION = 1
BUNDLE_YAML = "bundle.yaml"
#: The task config keys of a walking policy's velocity command ranges (low, high): vx, vy, yaw rate.
COMMAND_RANGE_KEYS = ("cmd_vx_m_s", "cmd_vy_m_s", "cmd_yaw_rad_s")


@dataclasses.dataclass(frozen=True)
class ObsTerm:
    """One named slice of the observation vector."""

    name: str
    size: int


@dataclasses.dataclass(frozen=True)
class ActionLayout:
    """How the normalised action maps to physical commands: ``offset + scale * a``, clamped."""

    mode: str
    names: tuple[str, ...]
    units: tuple[str, ...]
    scale: np.ndarray
    offset: np.ndarray
    low: np.ndarray
    high: np.ndarray

    @property
    def size(self) -> int:
        return len(self.names)

    def to_physical(self, a: np.ndarray) -> np.ndarray:
        """Map a normalised action a in [-1, 1] to clamped physical units."""
        a = np.clip(np.asarray(a, dtype=np.float64), -1.0, 1.0)
        return np.clip(self.offset + self.scale * a, self.low, self.high)


#: Graph input names of the instruction's tokens and their padding mask.
INSTRUCTION_IDS, INSTRUCTION_MASK = "instruction_ids", "instruction_mask"
#: The padding token a VLA's word tokenizer defines (a pretrained tokenizer without one pads with id 0).
PAD = "[PAD]"


@dataclasses.dataclass(frozen=True)
class ImageInput:
    """A camera the policy sees: graph input ``image.<name>``, (N, height, width, 3) uint8 RGB."""

    name: str
    height: int
    width: int

    @property
    def onnx_input(self) -> str:
        return f"image.{self.name}"


@dataclasses.dataclass(frozen=True)
class InstructionInput:
    """The policy's language instruction: tokenised by ``tokenizer`` to ``max_tokens`` ids."""

    tokenizer: Path
    max_tokens: int


@dataclasses.dataclass(frozen=True)
class Bundle:
    """A validated policy bundle (see module docstring)."""

    path: Path
    robot: str
    robot_spec: dict[str, Any]
    task: str
    control_rate_hz: float
    obs_terms: tuple[ObsTerm, ...]
    obs_mean: np.ndarray
    obs_std: np.ndarray
    action: ActionLayout
    latency: dict[str, Any]
    task_params: dict[str, Any]
    task_config: dict[str, Any]
    task_topics: dict[str, Any]
    reference: Reference | None
    onnx_file: Path
    onnx_input: str
    onnx_output: str
    provenance: dict[str, Any]
    raw: dict[str, Any]
    action_chunk: ActionChunk | None = None  # None: the graph outputs one action
    images: tuple[ImageInput, ...] = ()  # cameras the graph takes
    instruction: InstructionInput | None = None
    obs_history: int = 1  # observation frames the graph takes, newest first (latency.obs_history)

    def instruction_inputs(self, sentence: str) -> dict[str, np.ndarray]:
        """``instruction_ids`` and ``instruction_mask`` (max_tokens,) int64 of ``sentence``, by the
        bundle's tokenizer; BundleError naming ``instruction.tokenizer`` when it cannot be read."""
        enc = self.tokenizer().encode(sentence)
        return {
            INSTRUCTION_IDS: np.asarray(enc.ids, np.int64),
            INSTRUCTION_MASK: np.asarray(enc.attention_mask, np.int64),
        }

    def tokenizer(self) -> Any:
        """The instruction's ``tokenizers`` tokenizer, padding and truncating to ``max_tokens`` (read
        once per process); BundleError naming ``instruction`` or ``instruction.tokenizer``."""
        if self.instruction is None:
            raise BundleError("instruction", "this bundle's policy takes no instruction", str(self.path / BUNDLE_YAML))
        return _tokenizer(self.instruction.tokenizer, self.instruction.max_tokens)

    @property
    def extra_input_shapes(self) -> dict[str, tuple[tuple[int, ...], str]]:
        """Graph inputs beside ``obs``: name -> (shape after N, ONNX element type)."""
        out: dict[str, tuple[tuple[int, ...], str]] = {
            im.onnx_input: ((im.height, im.width, 3), "tensor(uint8)") for im in self.images
        }
        if self.instruction is not None:
            out.update(
                {k: ((self.instruction.max_tokens,), "tensor(int64)") for k in (INSTRUCTION_IDS, INSTRUCTION_MASK)}
            )
        return out

    @property
    def action_shape(self) -> tuple[int, ...]:
        """The graph's output per observation: (action.size,), or (chunk size, action.size)."""
        m = self.action.size
        return (m,) if self.action_chunk is None else (self.action_chunk.size, m)

    def command_ranges(self) -> np.ndarray | None:
        """(3, 2) the (low, high) of each component of the velocity command (vx [m/s], vy [m/s],
        yaw rate [rad/s]) the policy was trained on (the task config's :data:`COMMAND_RANGE_KEYS`),
        or None for a bundle whose task takes no velocity command."""
        takes_command = "command" in self.obs_names or "command" in self.task_params
        if not takes_command or not all(k in self.task_config for k in COMMAND_RANGE_KEYS):
            return None
        return np.array([[min(self.task_config[k]), max(self.task_config[k])] for k in COMMAND_RANGE_KEYS], np.float64)

    def with_task_params(self, given: Mapping[str, Any], flag: str = "--task-param") -> Bundle:
        """This bundle with ``given`` task inputs in place of its own; a SimrealError naming ``flag``
        for a velocity command outside the range the policy was trained on (:meth:`command_ranges`)."""
        ranges = self.command_ranges()
        if "command" in given and ranges is not None:
            cmd = np.asarray(given["command"], np.float64).reshape(-1)
            if cmd.shape != (3,) or np.any(cmd < ranges[:, 0] - 1e-9) or np.any(cmd > ranges[:, 1] + 1e-9):
                from simreal.errors import SimrealError

                trained = ", ".join(f"{n} [{lo:g}, {hi:g}]" for n, (lo, hi) in zip(("vx", "vy", "yaw"), ranges))
                raise SimrealError(
                    f"{flag} command: {cmd.tolist()} is not a (vx, vy, yaw rate) within what the policy "
                    f"was trained on: {trained}"
                )
        return dataclasses.replace(self, task_params={**self.task_params, **given})

    @property
    def obs_size(self) -> int:
        """The graph's observation length: ``obs_history`` frames of :attr:`obs_terms`."""
        return self.obs_history * self.frame_size

    @property
    def frame_size(self) -> int:
        """One observation frame's length (the sum of the terms' sizes)."""
        return sum(t.size for t in self.obs_terms)

    @property
    def obs_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.obs_terms)

    @property
    def files(self) -> tuple[Path, ...]:
        """Every file of the bundle (what a copy of it must carry)."""
        ref = self.raw.get("reference")
        return (
            (self.path / BUNDLE_YAML, self.onnx_file)
            + ((self.path / str(ref["file"]),) if ref else ())
            + ((self.instruction.tokenizer,) if self.instruction else ())
            + bundled_inputs(self.task_config, self.path)
        )


def _req(d: Mapping[str, Any], key: str, prefix: str, path: str) -> Any:
    if not isinstance(d, Mapping):
        raise BundleError(prefix.rstrip(".") or "(top level)", f"expected a mapping, got {d!r:.60}", path)
    if key not in d:
        raise BundleError(f"{prefix}{key}", "missing", path)
    return d[key]


def _int(d: Mapping[str, Any], key: str, prefix: str, path: str) -> int:
    """A required integer >= 1 (a size)."""
    v = _req(d, key, prefix, path)
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise BundleError(f"{prefix}{key}", f"expected an integer >= 1, got {v!r:.60}", path)
    return v


def _names(d: Mapping[str, Any], key: str, n: int | None, prefix: str, path: str) -> tuple[str, ...]:
    """A list of strings (``n`` of them when given)."""
    v = _req(d, key, prefix, path)
    if not isinstance(v, list) or not all(isinstance(x, (str, int, float)) for x in v):
        raise BundleError(f"{prefix}{key}", f"expected a list of names, got {v!r:.60}", path)
    if n is not None and len(v) != n:
        raise BundleError(f"{prefix}{key}", f"expected {n} entries, got {len(v)}", path)
    return tuple(str(x) for x in v)


def _section(raw: Mapping[str, Any], key: str, path: str) -> dict[str, Any]:
    """An optional mapping (absent or null: empty)."""
    v = raw.get(key)
    if v is None:
        return {}
    if not isinstance(v, Mapping):
        raise BundleError(key, f"expected a mapping, got {v!r:.60}", path)
    return dict(v)


def _task_params(raw: Mapping[str, Any], path: str) -> dict[str, Any]:
    """``task_params``: each a finite number or a list of them (the task's fixed inputs)."""
    params = _section(raw, "task_params", path)
    for key, value in params.items():
        flat = value if isinstance(value, list) else [value]
        if not flat or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and np.isfinite(x) for x in flat
        ):
            raise BundleError(f"task_params.{key}", f"expected a number or a list of numbers, got {value!r:.60}", path)
    return params


def _vec(d: Mapping[str, Any], key: str, n: int, prefix: str, path: str) -> np.ndarray:
    v = _req(d, key, prefix, path)
    try:
        arr = np.asarray(v, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError, OverflowError):
        raise BundleError(f"{prefix}{key}", f"expected a list of {n} numbers", path) from None
    if arr.shape != (n,):
        raise BundleError(f"{prefix}{key}", f"expected {n} values, got {arr.size}", path)
    if not np.all(np.isfinite(arr)):
        raise BundleError(f"{prefix}{key}", "contains NaN or Inf", path)
    return arr


def _action_chunk(raw: Mapping[str, Any], path: str) -> ActionChunk | None:
    """The optional ``action_chunk`` section (absent or null: a policy of one action per step)."""
    if raw.get("action_chunk") is None:
        return None
    section = _section(raw, "action_chunk", path)
    m = _req(section, "temporal_ensemble_coeff", "action_chunk.", path)
    if isinstance(m, bool) or not isinstance(m, (int, float)) or not math.isfinite(m):
        raise BundleError("action_chunk.temporal_ensemble_coeff", f"expected a finite number, got {m!r:.60}", path)
    return ActionChunk(_int(section, "size", "action_chunk.", path), float(m))


@functools.lru_cache(maxsize=8)
def _tokenizer(path: Path, max_tokens: int) -> Any:
    """The ``tokenizers`` tokenizer at ``path``, padding and truncating to ``max_tokens`` (read once
    per process: an instruction arriving on a topic is tokenised without touching the disk)."""
    try:
        from tokenizers import Tokenizer
    except ModuleNotFoundError:
        raise BundleError(
            "instruction.tokenizer",
            "reading an instruction needs the tokenizers package: pip install tokenizers",
            str(path),
        ) from None
    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as e:  # tokenizers raises a bare Exception on a malformed file
        raise BundleError(
            "instruction.tokenizer", f"not a tokenizers tokenizer.json ({short_reason(e)})", str(path)
        ) from None
    return fixed_length(tok, max_tokens)


def fixed_length(tok: Any, max_tokens: int) -> Any:
    """``tok`` (a ``tokenizers.Tokenizer``) padding and truncating every instruction to
    ``max_tokens``, the policy graph's fixed instruction length L."""
    pad_id = tok.token_to_id(PAD)
    tok.enable_padding(length=max_tokens, pad_id=0 if pad_id is None else pad_id, pad_token=PAD)
    tok.enable_truncation(max_tokens)
    return tok


def _images(raw: Mapping[str, Any], path: str) -> tuple[ImageInput, ...]:
    """The optional ``images`` list: ``{name, height, width}`` each, names unique."""
    v = raw.get("images")
    if v is None:
        return ()
    if not isinstance(v, list):
        raise BundleError("images", f"expected a list of {{name, height, width}}, got {v!r:.60}", path)
    out = tuple(
        ImageInput(
            str(_req(c, "name", f"images[{i}].", path)),
            _int(c, "height", f"images[{i}].", path),
            _int(c, "width", f"images[{i}].", path),
        )
        for i, c in enumerate(v)
    )
    if len({c.name for c in out}) != len(out):
        raise BundleError("images", f"duplicate camera names in {[c.name for c in out]}", path)
    return out


def _instruction(raw: Mapping[str, Any], bundle_dir: Path, path: str) -> InstructionInput | None:
    """The optional ``instruction`` section; its tokenizer file must exist."""
    if raw.get("instruction") is None:
        return None
    section = _section(raw, "instruction", path)
    tok = bundle_dir / str(_req(section, "tokenizer", "instruction.", path))
    if not os.path.isfile(tok):
        raise BundleError("instruction.tokenizer", f"file not found: {tok}", path)
    return InstructionInput(tok, _int(section, "max_tokens", "instruction.", path))


#: Every top-level section of ``bundle.yaml``. Anything else is refused: the optional ones are
#: read with ``get``, so a misspelled ``reference`` made a figure-8 bundle hover in place unwarned.
SECTIONS = (
    "format_version",
    "robot",
    "robot_spec",
    "task",
    "control_rate_hz",
    "observation",
    "action",
    "latency",
    "task_params",
    "task_config",
    "task_topics",
    "onnx",
    "provenance",
    "reference",
    "action_chunk",
    "images",
    "instruction",
)


def parse_bundle(raw: Mapping[str, Any], bundle_dir: Path) -> Bundle:
    """Validate a ``bundle.yaml`` mapping; every error names its field."""
    path = str(bundle_dir / BUNDLE_YAML)
    if not isinstance(raw, Mapping):
        raise BundleError("(top level)", f"expected a mapping of sections, got {raw!r:.60}", path)
    unknown = [k for k in raw if k not in SECTIONS]
    if unknown:
        close = difflib.get_close_matches(str(unknown[0]), SECTIONS, n=1)
        raise BundleError(
            str(unknown[0]),
            "unknown section"
            + (f" (did you mean '{close[0]}'?)" if close else "")
            + f"; sections: {', '.join(SECTIONS)}",
            path,
        )
    version = _req(raw, "format_version", "", path)
    if type(version) is not int or version != FORMAT_VERSION:
        raise BundleError(
            "format_version", f"this simreal reads version {FORMAT_VERSION}, bundle has {version!r:.60}", path
        )
    obs = _req(raw, "observation", "", path)
    terms_raw = _req(obs, "terms", "observation.", path)
    if not isinstance(terms_raw, list) or not terms_raw:
        raise BundleError("observation.terms", "expected a non-empty list of {name, size}", path)
    terms = tuple(
        ObsTerm(
            str(_req(t, "name", f"observation.terms[{i}].", path)), _int(t, "size", f"observation.terms[{i}].", path)
        )
        for i, t in enumerate(terms_raw)
    )
    size = _int(obs, "size", "observation.", path)
    latency = _section(raw, "latency", path)
    history = _int(latency, "obs_history", "latency.", path) if "obs_history" in latency else 1
    if size != history * sum(t.size for t in terms):
        raise BundleError(
            "observation.size",
            f"{size} != latency.obs_history {history} x the sum of term sizes {sum(t.size for t in terms)}",
            path,
        )
    norm = _req(obs, "normalization", "observation.", path)
    mean = _vec(norm, "mean", size, "observation.normalization.", path)
    std = _vec(norm, "std", size, "observation.normalization.", path)
    act = _req(raw, "action", "", path)
    n = _int(act, "size", "action.", path)
    names = _names(act, "names", n, "action.", path)
    if len(set(names)) != n:
        raise BundleError("action.names", f"duplicate names in {list(names)}", path)
    units = _names(act, "units", n, "action.", path) if "units" in act else ("",) * n
    layout = ActionLayout(
        mode=str(_req(act, "mode", "action.", path)),
        names=names,
        units=units,
        scale=_vec(act, "scale", n, "action.", path),
        offset=_vec(act, "offset", n, "action.", path),
        low=_vec(act, "low", n, "action.", path),
        high=_vec(act, "high", n, "action.", path),
    )
    if np.any(layout.low > layout.high):
        raise BundleError("action.low", "some lower limits exceed action.high", path)
    onnx = _req(raw, "onnx", "", path)
    onnx_file = bundle_dir / str(_req(onnx, "file", "onnx.", path))
    if not os.path.isfile(onnx_file):  # unlike Path.is_file, False for a name too long
        raise BundleError("onnx.file", f"file not found: {onnx_file}", path)
    rate = as_rate_hz(_req(raw, "control_rate_hz", "", path))
    if rate is None:
        raise BundleError(
            "control_rate_hz", f"expected a finite rate > 0 [Hz], got {raw['control_rate_hz']!r:.60}", path
        )
    images, instruction, chunk = _images(raw, path), _instruction(raw, bundle_dir, path), _action_chunk(raw, path)
    if chunk is not None and (images or instruction):
        raise BundleError(
            "action_chunk",
            "a policy with camera or instruction inputs predicts one action per step "
            "here (no chunk ensembling of image inputs)",
            path,
        )
    return Bundle(
        path=bundle_dir,
        robot=str(_req(raw, "robot", "", path)),
        robot_spec=_section(raw, "robot_spec", path),
        task=str(_req(raw, "task", "", path)),
        control_rate_hz=rate,
        obs_terms=terms,
        obs_mean=mean,
        obs_std=std,
        action=layout,
        latency=latency,
        obs_history=history,
        task_params=_task_params(raw, path),
        task_config=_section(raw, "task_config", path),
        task_topics=_section(raw, "task_topics", path),
        reference=read_reference(raw.get("reference"), bundle_dir, path),
        onnx_file=onnx_file,
        onnx_input=str(onnx.get("input", "obs")),
        onnx_output=str(onnx.get("output", "action")),
        provenance=_section(raw, "provenance", path),
        raw=dict(raw),
        action_chunk=chunk,
        images=images,
        instruction=instruction,
    )


def load_bundle(
    bundle_dir: str | Path, *, robot: str | None = None, obs_size: int | None = None, action_size: int | None = None
) -> Bundle:
    """Load and validate a bundle folder; optional expectations are checked and named on mismatch."""
    d = Path(bundle_dir)
    if d.name == BUNDLE_YAML and os.path.isfile(d):
        d = d.parent
    if not os.path.isfile(d / BUNDLE_YAML):
        what = "is not a folder" if d.exists() else "does not exist"
        if (d / "bundle" / BUNDLE_YAML).is_file():  # a run directory, exported
            hint = f"; a run directory: its bundle is {d / 'bundle'}"
        elif (d / "config.yaml").is_file():  # a run directory, not exported yet
            hint = f"; a run directory: `simreal export {d}` writes its bundle"
        else:
            hint = ""
        raise BundleError(
            BUNDLE_YAML,
            f"no {BUNDLE_YAML} in {d}{hint}"
            if d.is_dir()
            else f"{d} {what} (a bundle is a folder with {BUNDLE_YAML}, e.g. RUN_DIR/bundle)",
            str(d),
        )
    b = parse_bundle(load_yaml(d / BUNDLE_YAML), d)
    where = str(d / BUNDLE_YAML)
    if robot is not None and b.robot != robot:
        raise BundleError("robot", f"bundle is for robot '{b.robot}', expected '{robot}'", where)
    if obs_size is not None and b.obs_size != obs_size:
        raise BundleError("observation.size", f"bundle has {b.obs_size}, expected {obs_size}", where)
    if action_size is not None and b.action.size != action_size:
        raise BundleError("action.size", f"bundle has {b.action.size}, expected {action_size}", where)
    return b


def write_bundle_yaml(bundle_dir: str | Path, data: Mapping[str, Any]) -> None:
    """Atomically write ``bundle.yaml`` (after validating it parses)."""
    d = Path(bundle_dir)
    parse_bundle(data, d)
    dump_yaml(d / BUNDLE_YAML, dict(data))


class OnnxPolicy:
    """ONNX Runtime inference of a bundle's policy: raw observation -> normalised action.

    Opening it checks the graph against ``bundle.yaml`` before anything runs: the file loads
    as an ONNX model, its input ``onnx.input`` is a float tensor (N, observation.size), its
    other inputs are exactly the bundle's images and instruction (:attr:`Bundle.extra_input_shapes`),
    its output ``onnx.output`` a tensor (N, action.size) (with ``action_chunk``: (N, chunk size,
    action.size)), and one zero observation runs through it to an output of that shape with
    N = 1. Any failure is a BundleError naming ``policy.onnx`` and what the bundle expected.

    A chunked bundle's policy is stateful: each call is one control step, and :meth:`reset`
    starts the ensemble over (a new episode, a gap in the steps).
    """

    def __init__(self, bundle: Bundle, *, intra_op_threads: int = 1):
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = intra_op_threads
        so.inter_op_num_threads = 1
        so.log_severity_level = 3  # errors only: a damaged graph's warnings would break the one-line report
        self.bundle = bundle
        where = str(bundle.onnx_file)
        n_obs, out_shape = bundle.obs_size, bundle.action_shape
        extra = bundle.extra_input_shapes
        expected = (
            f"expected the policy graph {bundle.onnx_input} (N, {n_obs}) float"
            + "".join(f", {k} {_shape(['N', *s])} {t[7:-1]}" for k, (s, t) in extra.items())
            + f" -> {bundle.onnx_output} {_shape(['N', *out_shape])} as bundle.yaml says"
        )
        try:
            # enable_fallback=0: onnxruntime would otherwise print a banner and retry on a bad file
            self.session = ort.InferenceSession(where, so, providers=["CPUExecutionProvider"], enable_fallback=0)
        except Exception as e:  # onnxruntime's error classes share no base below Exception
            raise BundleError(
                "onnx.file", f"not a loadable ONNX model ({short_reason(e)}); {expected}", where
            ) from None
        inp = {i.name: i for i in self.session.get_inputs()}
        out = {o.name: o for o in self.session.get_outputs()}
        if bundle.onnx_input not in inp:
            raise BundleError(
                "onnx.input", f"graph has inputs {sorted(inp)}, not '{bundle.onnx_input}'; {expected}", where
            )
        if bundle.onnx_output not in out:
            raise BundleError(
                "onnx.output", f"graph has outputs {sorted(out)}, not '{bundle.onnx_output}'; {expected}", where
            )
        if set(inp) != {bundle.onnx_input, *extra}:
            key = "onnx.input" if not extra and not (set(inp) & {INSTRUCTION_IDS, INSTRUCTION_MASK}) else "images"
            raise BundleError(key, f"graph has {len(inp)} inputs {sorted(inp)}; {expected}", where)
        x, y = inp[bundle.onnx_input], out[bundle.onnx_output]
        if x.type != "tensor(float)" or not _is_shape(x.shape, (n_obs,)):
            raise BundleError(
                "observation.size", f"graph input '{x.name}' is {x.type} {_shape(x.shape)}; {expected}", where
            )
        for name, (shape, dtype) in extra.items():
            if inp[name].type != dtype or not _is_shape(inp[name].shape, shape):
                key = "instruction.max_tokens" if name.startswith("instruction") else "images"
                raise BundleError(
                    key, f"graph input '{name}' is {inp[name].type} {_shape(inp[name].shape)}; {expected}", where
                )
        if not _is_shape(y.shape, out_shape):
            key = "action.size" if bundle.action_chunk is None else "action_chunk.size"
            raise BundleError(key, f"graph output '{y.name}' is {y.type} {_shape(y.shape)}; {expected}", where)
        zeros = {
            k: np.zeros((1, *s), np.uint8 if t == "tensor(uint8)" else np.int64)  # the probe's only
            for k, (s, t) in extra.items()
        }
        probe = ort.RunOptions()
        probe.log_severity_level = 4  # a failing probe is reported below, not logged by onnxruntime too
        try:
            (a,) = self.session.run(
                [bundle.onnx_output], {bundle.onnx_input: np.zeros((1, n_obs), np.float32), **zeros}, probe
            )
        except Exception as e:  # as above: any onnxruntime failure on the probe
            raise BundleError(
                "onnx.file", f"the graph fails on one zero observation ({short_reason(e)}); {expected}", where
            ) from None
        if np.shape(a) != (1, *out_shape):
            raise BundleError(
                "action.size",
                f"one observation gives an action of shape {np.shape(a)}, "
                f"expected {(1, *out_shape)} as bundle.yaml says",
                where,
            )
        self._chunked = ChunkedPolicy(self.graph, bundle.action_chunk) if bundle.action_chunk is not None else None

    def graph(self, obs: np.ndarray, extra: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
        """The graph's own output: obs (obs_size,) or (B, obs_size) -> action in [-1, 1] (the chunk
        of a chunked bundle), same leading shape. ``extra``: the bundle's image and instruction
        inputs by graph input name, batched like ``obs`` (required when the bundle has them)."""
        x = np.asarray(obs, dtype=np.float32)
        single = x.ndim == 1
        x = x.reshape(1, -1) if single else x
        feed = {self.bundle.onnx_input: x}
        if set(extra or {}) != set(self.bundle.extra_input_shapes):
            raise BundleError(
                "images" if self.bundle.images else "instruction",
                f"the policy takes {sorted(self.bundle.extra_input_shapes) or 'no inputs'} beside "
                f"'{self.bundle.onnx_input}', was given {sorted(extra or {})}",
                str(self.bundle.onnx_file),
            )
        if extra:
            feed.update({k: np.asarray(v)[None] if single else np.asarray(v) for k, v in extra.items()})
        (y,) = self.session.run([self.bundle.onnx_output], feed)
        return y[0] if single else y

    def __call__(self, obs: np.ndarray, extra: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
        """obs (obs_size,) or (B, obs_size) -> this step's action in [-1, 1], same leading shape
        (a chunked bundle's: the temporal ensemble, one call per control step)."""
        return self.graph(obs, extra) if self._chunked is None else self._chunked(obs)

    def reset(self) -> None:
        """Start a chunked bundle's ensemble over (nothing to do for one action per step)."""
        if self._chunked is not None:
            self._chunked.reset()


def _is_shape(shape: list[Any], tail: tuple[int, ...]) -> bool:
    """An ONNX value's shape is (N, *tail); a symbolic or unknown size passes (the probe checks it)."""
    return len(shape) == 1 + len(tail) and all(not isinstance(d, int) or d == t for d, t in zip(shape[1:], tail))


def _shape(shape: list[Any]) -> str:
    """An ONNX value's shape as ``(N, 22)``; symbolic dimensions print by name."""
    return "(" + ", ".join(str(d) if d is not None else "?" for d in shape) + ")"
