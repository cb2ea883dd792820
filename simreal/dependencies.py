"""Which pip install provides each third-party import, so a missing one is one line, not a traceback.

A robot computer installs the lean runtime: simreal's wheel (``pip wheel --no-deps .`` in a
checkout) or checkout with ``pip install --no-deps``, plus the ``ROBOT_RUNTIME`` distributions
(README, "On the robot computer"); a development machine installs simreal with its
dependencies and optional extras (``pip install -e .``). simreal is not on PyPI: the hints'
``pip install simreal`` and ``pip install 'simreal[torch]'`` work because simreal is
installed (pip keeps that one and adds what it depends on); where it is not (a checkout on
``PYTHONPATH``), they name the checkout instead (``pip install -e '/path/to/simreal[torch]'``). A verb that reaches a
package the install lacks fails with :class:`~simreal.errors.MissingDependencyError`
naming the package and the command that installs it: the CLI turns every
``ModuleNotFoundError`` of a package listed here into that error (exit code 2), and
:func:`require` checks up front what a verb needs in another process.

    $ simreal train quadrotor-hover                     # on the robot runtime
    simreal train: error: needs jax, part of simreal's full install (the robot runtime
    leaves it out): pip install simreal

``PROVIDERS`` lists every distribution of pyproject.toml's ``dependencies`` and of the
``torch``, ``data``, ``vlm``, ``so100``, ``teleop``, ``px4``, ``crazyflie`` and ``franka``
extras (a test keeps them, and the README's robot install, in step).
"""

from __future__ import annotations

import importlib.util

from simreal.errors import MissingDependencyError

# import name: (distribution, extra that provides it; None = the core dependencies)
PROVIDERS: dict[str, tuple[str, str | None]] = {
    "numpy": ("numpy", None),
    "yaml": ("pyyaml", None),
    "mujoco": ("mujoco", None),
    "mujoco.mjx": ("mujoco-mjx", None),
    "jax": ("jax", None),
    "jaxlib": ("jaxlib", None),
    "brax": ("brax", None),
    "flax": ("flax", None),
    "optax": ("optax", None),
    "onnx": ("onnx", None),
    "onnxruntime": ("onnxruntime", None),
    "tensorboardX": ("tensorboardX", None),
    "matplotlib": ("matplotlib", None),
    "imageio": ("imageio", None),
    "imageio_ffmpeg": ("imageio-ffmpeg", None),
    "cyclonedds": ("cyclonedds", None),
    "rosbags": ("rosbags", None),
    "mink": ("mink", None),
    "scipy": ("scipy", None),
    "daqp": ("daqp", None),
    "quadprog": ("quadprog", None),
    "torch": ("torch", "torch"),
    "stable_baselines3": ("stable-baselines3", "torch"),
    "rsl_rl": ("rsl-rl-lib", "torch"),
    "tensordict": ("rsl-rl-lib", "torch"),  # rsl-rl-lib's dependency; the torch adapters import it
    "gymnasium": ("gymnasium", "torch"),
    "safetensors": ("safetensors", "torch"),
    "pyarrow": ("pyarrow", "data"),
    "cv2": ("opencv-python-headless", "data"),
    "av": ("av", "data"),
    "transformers": ("transformers", "vlm"),
    "tokenizers": ("tokenizers", "vlm"),
    "sentencepiece": ("sentencepiece", "vlm"),
    "PIL": ("pillow", "vlm"),
    "serial": ("pyserial", "so100"),
    "pygame": ("pygame", "teleop"),
    "hid": ("hidapi", "teleop"),
    "pymavlink": ("pymavlink", "px4"),
    "cflib": ("cflib", "crazyflie"),
    "franky": ("franky-control", "franka"),
}

#: Extras of the robot side (its drivers and teleop devices): on the robot runtime, installed
#: without simreal's dependencies, their package alone is the install (the extra would pull the
#: training stack back in).
ROBOT_EXTRAS: tuple[str, ...] = ("so100", "teleop", "px4", "crazyflie", "franka")

# What `simreal deploy run` needs beside simreal itself: the policy runtime, the DDS transport,
# and rosbags for `--record` (pure Python). No jax, brax, mujoco or torch.
ROBOT_RUNTIME: tuple[str, ...] = ("numpy", "pyyaml", "onnxruntime", "cyclonedds", "rosbags")


def _simreal(extra: str | None = None) -> str:
    """What to ``pip install`` for simreal (with ``extra``): its name where simreal is installed,
    which pip resolves to that install; else this checkout (simreal is not on PyPI)."""
    from importlib import metadata
    from pathlib import Path

    try:
        metadata.distribution("simreal")
        target = "simreal"
    except metadata.PackageNotFoundError:
        target = f"-e {Path(__file__).resolve().parents[1]}"
    if extra is None:
        return target
    return f"-e '{target[3:]}[{extra}]'" if target.startswith("-e ") else f"'{target}[{extra}]'"


def install_hint(module: str) -> MissingDependencyError | None:
    """The error for a missing ``module`` (dotted names match their longest listed prefix), or
    None when no simreal install provides it (then the original ImportError is the better report)."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        name = ".".join(parts[:n])
        if name not in PROVIDERS:
            continue
        dist, extra = PROVIDERS[name]
        if extra is not None:
            lean = f" (on the robot runtime: pip install {dist})" if extra in ROBOT_EXTRAS else ""
            return MissingDependencyError(name, f"pip install {_simreal(extra)}{lean}", f"from the [{extra}] extra")
        if dist in ROBOT_RUNTIME:  # the robot runtime needs it too: never advise pulling the training stack
            return MissingDependencyError(name, f"pip install {dist}")
        return MissingDependencyError(
            name, f"pip install {_simreal()}", "part of simreal's full install (the robot runtime leaves it out)"
        )
    return None


def require(*modules: str) -> None:
    """Raise :class:`MissingDependencyError` for the first of ``modules`` that is not installed.

    For a verb that hands the work to another process, which would otherwise fail there with a
    traceback. Looks the modules up without importing them (``importlib.util.find_spec``)."""
    for module in modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:  # a parent package of a dotted name is missing
            found = False
        if not found:
            err = install_hint(module)
            if err is None:
                raise ValueError(f"{module!r} is not a package any simreal install provides")
            raise err
