"""Typed configs: YAML files plus ``key=value`` overrides, validated into dataclasses.

Every config section is a frozen dataclass. :func:`build` turns a nested mapping into one,
checking each key against the dataclass's fields: an unknown key, a wrong type, a value
outside ``metadata={"min":..., "max":...}`` or outside ``metadata={"choices": (...)}``
raises :class:`ConfigError` naming the dotted key and what was expected. A ``tuple[float, ...]``
field with a non-empty default is a fixed-size vector or range (a position, a (low, high)):
a value of another length is refused too (an arm task once read a 3-vector's last element as
y, and a 2-vector crashed inside JAX); an empty default leaves the length free. Nothing falls
through silently.

    >>> build(PPOConfig, {"num_envs": 64}, prefix="train")        # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml

from simreal.errors import ConfigError, printable
from simreal.yaml_io import parse_yaml

T = TypeVar("T")


def field(
    default: Any = dataclasses.MISSING,
    *,
    min: float | None = None,
    max: float | None = None,
    choices: Sequence[Any] | None = None,
    doc: str = "",
) -> Any:
    """A dataclass field carrying validation bounds and a one-line description."""
    meta = {"min": min, "max": max, "choices": tuple(choices) if choices else None, "doc": doc}
    if isinstance(default, (list, dict)):
        val = default
        return dataclasses.field(default_factory=lambda: type(val)(val), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp)).replace("typing.", "")


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Check ``value`` against annotation ``tp``; ints widen to float; sequences become tuples."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:  # an optional value: its own error says more than "X or NoneType"
            return _coerce(value, options[0], key)
        for a in options:
            try:
                return _coerce(value, a, key)
            except ConfigError:
                pass
        raise ConfigError(key, f"expected {' or '.join(_type_name(a) for a in args)}, got {value!r}")
    if origin is typing.Literal:
        allowed = typing.get_args(tp)
        if value not in allowed:
            raise ConfigError(key, f"expected one of {', '.join(map(repr, allowed))}, got {value!r}")
        return value
    if origin in (tuple, list, Sequence):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(key, f"expected a list, got {value!r}")
        args = typing.get_args(tp)
        elem = args[0] if args else Any
        return tuple(_coerce(v, elem, f"{key}[{i}]") for i, v in enumerate(value))
    if origin in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise ConfigError(key, f"expected a mapping, got {value!r}")
        kt, vt = typing.get_args(tp) or (Any, Any)
        return {k: _coerce(v, vt, f"{key}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        section = typing.cast(type, tp)  # an annotation: a dataclass type, not an instance
        if isinstance(value, section):
            return value
        if not isinstance(value, Mapping):
            raise ConfigError(key, f"expected a mapping for section {_type_name(section)}, got {value!r}")
        return build(section, value, prefix=key)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(key, f"expected true or false, got {value!r}")
        return value
    if tp is int:
        return integer(value, key)
    if tp is float:
        value = _yaml12_number(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(key, f"expected a number, got {value!r}")
        try:
            number = float(value)
        except OverflowError:  # an integer beyond the float range
            assert isinstance(value, int)  # float(a float) never overflows
            raise ConfigError(
                key, f"expected a number, got an integer of {value.bit_length()} bits, beyond the float range"
            ) from None
        if math.isnan(number):  # NaN passes every min/max comparison: refuse it here
            raise ConfigError(key, "expected a number, got NaN")
        return number
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(key, f"expected a string, got {value!r}")
        return value
    return value


def integer(value: Any, key: str, source: str | None = None) -> int:
    """``value`` as an integer: an int, a number's YAML 1.2 text or an integral float (``2.5e6``
    steps, ``seed=2.0e1``); else a ConfigError naming ``key`` (and ``source``, the file)."""
    value = _yaml12_number(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(key, f"expected an integer, got {value!r}", source)
    return value


#: The largest seed, wherever one is given (``seed:``, ``--seed``): every library a run seeds
#: takes it (NumPy's and stable-baselines3's ``np.random.seed`` stop at 2**32 - 1, JAX's key at a
#: C long), with room for the offsets a run adds (evaluation episodes: seed + 12345).
SEED_MAX = 2**31 - 1


def seed(value: Any, key: str = "seed", source: str | None = None) -> int:
    """``value`` as a seed: an integer (as :func:`integer` reads one) in [0, SEED_MAX]; else a
    ConfigError naming ``key``."""
    try:
        value = integer(value, key, source)
    except ConfigError:
        pass
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= SEED_MAX:
        raise ConfigError(key, f"expected an integer in [0, {SEED_MAX}], got {value!r}", source)
    return value


def positive_int_arg(text: str) -> int:
    """An argparse ``type`` for a count that must be at least 1 (``--episodes``, ``--jobs``)."""
    return _checked_arg(text, int, lambda v: v >= 1, "an integer >= 1")


def positive_float_arg(text: str) -> float:
    """An argparse ``type`` for a finite quantity that must be > 0 (a rate [Hz])."""
    return _checked_arg(text, float, lambda v: math.isfinite(v) and v > 0, "a number > 0")


def domain_id_arg(text: str) -> int:
    """An argparse ``type`` for a DDS domain id: ROS 2's ``ROS_DOMAIN_ID`` range, 0..232."""
    return _checked_arg(text, int, lambda v: 0 <= v <= 232, "a DDS domain id 0..232 (ROS_DOMAIN_ID)")


def outage_arg(text: str) -> tuple[float, float]:
    """An argparse ``type`` for ``AT:SECONDS`` (a start time and a length, both finite and >= 0 [s])."""

    def cast(t: str) -> tuple[float, float]:
        at, sep, length = t.partition(":")
        if not sep:
            raise ValueError(t)
        return float(at), float(length)

    return _checked_arg(
        text, cast, lambda v: all(math.isfinite(x) and x >= 0 for x in v), "AT:SECONDS, two times >= 0 [s] (e.g. 3:0.3)"
    )


def _checked_arg(text: str, cast: Callable[[str], Any], ok: Callable[[Any], bool], expected: str) -> Any:
    """``cast(text)`` when ``ok`` of it; else argparse's one-line error saying what was ``expected``."""
    import argparse

    try:
        value = cast(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
    if not ok(value):
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text}")
    return value


def seed_arg(text: str) -> int:
    """An argparse ``type`` for ``--seed``: :func:`seed`, its error as argparse's one line naming
    the flag."""
    import argparse

    try:
        return seed(text, "--seed")
    except ConfigError as e:
        raise argparse.ArgumentTypeError(e.message) from None


def build(cls: type[T], data: Mapping[str, Any] | None, prefix: str = "") -> T:
    """Build dataclass ``cls`` from ``data``, validating every key (see module docstring)."""
    if data is not None and not isinstance(data, Mapping):
        raise ConfigError(
            prefix or "(top level)", f"expected a mapping for section {_type_name(cls)}, got {data!r:.60}"
        )
    data = dict(data or {})
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(typing.cast(Any, cls))}  # cls: a dataclass type
    dot = f"{prefix}." if prefix else ""
    for k in data:
        if k not in fields:
            raise ConfigError(
                f"{dot}{k}", f"unknown key; valid keys under '{prefix or 'top level'}': {', '.join(sorted(fields))}"
            )
    kwargs = {}
    for name, f in fields.items():
        key = f"{dot}{name}"
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ConfigError(key, "missing required key")
            continue
        v = _coerce(data[name], hints[name], key)
        meta: Mapping[str, Any] = f.metadata or {}
        size = _vector_size(f, hints[name])
        if size is not None and len(v) != size:
            assert isinstance(f.default, tuple)  # _vector_size: a non-empty tuple default
            raise ConfigError(key, f"expected {size} numbers (as the default {list(f.default)}), got {list(v)}")
        if meta.get("choices") and v not in meta["choices"]:
            raise ConfigError(key, f"expected one of {', '.join(map(str, meta['choices']))}, got {v!r}")
        lo, hi = meta.get("min"), meta.get("max")
        for i, x in enumerate(v if isinstance(v, tuple) else (v,)):  # a tuple's bounds hold per element
            if isinstance(x, (int, float)) and not isinstance(x, bool):
                where = f"{key}[{i}]" if isinstance(v, tuple) else key
                if lo is not None and x < lo:
                    raise ConfigError(where, f"must be >= {lo}, got {x}")
                if hi is not None and x > hi:
                    raise ConfigError(where, f"must be <= {hi}, got {x}")
        kwargs[name] = v
    return cls(**kwargs)


def _vector_size(f: dataclasses.Field, tp: Any) -> int | None:
    """The fixed length of a ``tuple[float, ...]`` field with a non-empty default (module docstring)."""
    if tp != tuple[float, ...] or not isinstance(f.default, tuple) or not f.default:
        return None
    return len(f.default)


def to_dict(cfg: Any) -> Any:
    """A dataclass tree as plain YAML-safe Python (tuples become lists)."""
    if dataclasses.is_dataclass(cfg):
        return {f.name: to_dict(getattr(cfg, f.name)) for f in dataclasses.fields(cfg)}
    if isinstance(cfg, (list, tuple)):
        return [to_dict(v) for v in cfg]
    if isinstance(cfg, dict):
        return {k: to_dict(v) for k, v in cfg.items()}
    return cfg


#: A float as YAML 1.2 writes it. PyYAML reads YAML 1.1, where a float needs a dot, so
#: ``learning_rate: 3e-4`` and ``train.num_timesteps=1e6`` arrive as text.
_YAML12_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")


def _yaml12_number(value: Any) -> Any:
    """``value`` as a float when it is text YAML 1.2 reads as one (``3e-4``), else unchanged."""
    # (a number's text is short: 5,000 digits are text, as the YAML reader leaves them)
    if isinstance(value, str) and len(value) <= 64 and _YAML12_FLOAT.fullmatch(value):
        return int(value) if value.lstrip("+-").isdigit() else float(value)  # digits alone: exact
    return value


def parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    """Parse ``a.b=value`` strings into a nested mapping; values are read as YAML scalars."""
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(printable(item), "expected an override of the form key=value (e.g. train.num_envs=512)")
        key, raw = item.split("=", 1)
        if not key or any(not part for part in key.split(".")):
            raise ConfigError(printable(key or item), "empty key in override")
        if any(c.isspace() or not c.isprintable() for c in key):
            raise ConfigError(printable(key), "a key has no spaces or control characters (e.g. train.num_envs)")
        try:
            value = parse_yaml(raw) if raw != "" else ""
        except yaml.YAMLError:
            value = raw  # not YAML (e.g. a path with a colon): the text itself
        node = out
        parts = key.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(key, "override sets a key below a value that is not a section")
        node[parts[-1]] = value
    return out


def deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """Recursive merge; ``over`` wins. Mappings merge key by key, everything else replaces."""
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def configs_dir() -> Path:
    """The folder holding the shipped YAML configs (``configs/`` in a checkout)."""
    import simreal.configs

    return Path(simreal.configs.__file__).parent


def task_params_arg(items: list[str]) -> dict[str, Any]:
    """``--task-param KEY=VALUE`` items -> {key: number or list of numbers}: task inputs a bundle's
    policy observes that no robot state carries (``target_pos_w``, a goal); a SimrealError names
    the item otherwise."""
    from simreal.errors import SimrealError

    tree = parse_overrides(items)
    for k, v in tree.items():
        flat = v if isinstance(v, list) else [v]
        if not flat or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in flat):
            raise SimrealError(f"--task-param {k}: expected a number or a list of numbers, got {v!r}")
    return tree
