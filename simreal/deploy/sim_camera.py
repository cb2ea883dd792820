"""What a vision-language-action bundle sees and hears in simulation: its cameras rendered from
the simulated scene, and the episode's instruction.

    cam = SimCamera(bundle, env)                    # env: the bundle's task env (sim_gate.training_env)
    extra = cam.inputs(qpos, task)                  # the graph's image.<cam>, instruction_ids/mask
    for name, topic, msg in cam.messages(cfg, qpos, task, stamp_ns, msg_class): ...

The images are rendered the way the training data were (:func:`simreal.sim.render.sized_renderer`
at the bundle's image size, the task's markers placed by its ``mocap_pos`` from the episode's
task inputs), from the true joint positions: a camera sees the scene, not the noisy state. The
instruction is the sentence the task says for the episode (:mod:`simreal.policies.vla.instructions`).
The rehearsal publishes both on the deploy config's perception topics (``sensor_msgs/Image``
``rgb8``, ``std_msgs/String``) and the sim-to-sim gate's reference feeds them to the policy
directly, so both runs see the same pixels and words. Simulation side only (MuJoCo, the task code).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from simreal.bundle import Bundle


class SimCamera:
    """The bundle's cameras and instruction in its task's scene (module docstring)."""

    def __init__(self, bundle: Bundle, env: Any):
        from simreal.sim.render import sized_renderer

        self.bundle, self.env = bundle, env
        self.renderer = (
            sized_renderer(env.mj_model, {im.name: (im.height, im.width) for im in bundle.images}, nthread=1)
            if bundle.images
            else None
        )

    def sentence(self, task: Mapping[str, np.ndarray]) -> str:
        from simreal.policies.vla.instructions import instruction

        return instruction(self.bundle.task, {k: np.asarray(v) for k, v in task.items()})

    def images(self, qpos: np.ndarray, task: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Camera name -> (H, W, 3) uint8 RGB of the scene at ``qpos``."""
        if self.renderer is None:
            return {}
        markers = np.asarray(self.env.mocap_pos(dict(task)), np.float32)[None] if self.env.mj_model.nmocap else None
        out = self.renderer.render(np.asarray(qpos, np.float32)[None], None, markers)
        return {im.name: out[f"pixels/{im.name}"][0] for im in self.bundle.images}

    def inputs(self, qpos: np.ndarray, task: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The graph's extra inputs (unbatched): images and the tokenised instruction."""
        extra = {f"image.{k}": v for k, v in self.images(qpos, task).items()}
        if self.bundle.instruction is not None:
            extra.update(self.bundle.instruction_inputs(self.sentence(task)))
        return extra

    def messages(
        self, cfg: Any, qpos: np.ndarray, task: Mapping[str, np.ndarray], stamp_ns: int, T: Any
    ) -> list[tuple[str, str, Any]]:
        """(subscription name, topic, message) of each camera's image and of the instruction, on the
        deploy config ``cfg``'s perception topics. The instruction goes out with every frame: its
        topic is volatile (docs/deploy.md), so a node that joins late still hears it."""
        from simreal.deploy.adapters import stamp_of
        from simreal.deploy.runner import IMAGE, INSTRUCTION

        per = cfg.perception
        out = []
        for cam, px in self.images(qpos, task).items():
            h, w, _ = px.shape
            header = T("std_msgs/msg/Header")(stamp=stamp_of(stamp_ns, T), frame_id=cam)
            msg = T("sensor_msgs/msg/Image")(
                header=header, height=h, width=w, encoding="rgb8", is_bigendian=0, step=w * 3, data=px.tobytes()
            )
            out.append((IMAGE + cam, per.image_topics[cam], msg))
        if per.instruction_topic and self.bundle.instruction is not None:
            out.append((INSTRUCTION, per.instruction_topic, T("std_msgs/msg/String")(data=self.sentence(task))))
        return out

    def close(self) -> None:
        if self.renderer is not None:
            self.renderer.close()
