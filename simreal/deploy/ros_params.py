"""Deploy config <-> ROS 2 parameters.

ROS 2 parameters are flat, dotted names (``watchdog.timeout_s``) with typed scalar or array
values; a parameters YAML writes them nested under ``<node>: ros__parameters:``. The
deploy config is that same tree, so the generated node declares one parameter per leaf
and rebuilds the tree to hand to :func:`simreal.deploy.config.resolve_deploy_config`.

Two ROS-specific details: the state topics are a mapping, so their names are also listed in
``state_topics`` (a node must know what to declare); and ROS parameter files have no
portable spelling of infinity, so "no limit" is written as :data:`NO_LIMIT` (1e9) and read
back as ``inf``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

NO_LIMIT = 1.0e9


def _finite(v: Any) -> Any:
    if isinstance(v, float) and math.isinf(v):
        return math.copysign(NO_LIMIT, v)
    if isinstance(v, (list, tuple)):
        return [_finite(x) for x in v]
    return v


def _infinite(v: Any) -> Any:
    if isinstance(v, float) and abs(v) >= NO_LIMIT:
        return math.copysign(math.inf, v)
    if isinstance(v, (list, tuple)):
        return [_infinite(x) for x in v]
    return v


def _empty(v: Any) -> bool:
    return isinstance(v, (Mapping, list)) and len(v) == 0


def to_ros_tree(tree: Mapping[str, Any]) -> dict[str, Any]:
    """A deploy-config tree as ROS parameter values (adds ``state_topics``; inf -> NO_LIMIT; empty
    mappings and arrays left out: ROS cannot type an empty array, and rcl's parameter-file parser
    reads the keys after an ``{}`` as that mapping's, so ``image_topics: {}`` moved ``image_qos``)."""
    out: dict[str, Any] = {"state_topics": list(tree.get("state", {}))}

    def conv(v: Any) -> Any:
        if isinstance(v, Mapping):
            return {k: c for k, c in ((k, conv(x)) for k, x in v.items()) if not _empty(c)}
        if isinstance(v, tuple):
            v = list(v)
        return _finite(v)

    out.update(conv(dict(tree)))
    return out


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}`` (lists stay values)."""
    flat: dict[str, Any] = {}
    for k, v in tree.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            flat.update(flatten(v, key + "."))
        else:
            flat[key] = v
    return flat


def unflatten(flat: Mapping[str, Any]) -> dict[str, Any]:
    """Inverse of :func:`flatten`."""
    tree: dict[str, Any] = {}
    for key, v in flat.items():
        node = tree
        parts = key.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = v
    return tree


def from_ros_tree(tree: Mapping[str, Any]) -> dict[str, Any]:
    """ROS parameter tree -> deploy-config overrides (drops ``state_topics``, ``bundle_path``;
    NO_LIMIT -> inf; empty arrays, which ROS cannot type, are left out)."""
    out: dict[str, Any] = {}
    for k, v in tree.items():
        if k in ("state_topics", "bundle_path"):
            continue
        if isinstance(v, Mapping):
            out[k] = from_ros_tree(v)
        elif isinstance(v, (str, bytes, bool, int, float)) or v is None:
            out[k] = _infinite(v)
        else:  # list, tuple, array.array, numpy array (rclpy returns arrays for double[])
            v = [x.item() if hasattr(x, "item") else x for x in v]
            if v:
                out[k] = _infinite(v)
    return out


def params_file(node_name: str, tree: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters-YAML mapping for ``node_name``."""
    return {node_name: {"ros__parameters": to_ros_tree(tree)}}
