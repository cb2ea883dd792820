"""simreal.retarget: human motion capture -> humanoid reference motions (the motion file).

Modules, in the order data flows through them:

- loaders: ``load_motion_source`` for every format: bvh (any rig, units, axes, channel order),
  amass (SMPL / SMPL+H / SMPL-X through user-supplied body models), keypoints_file (CSV / npz);
  all return a skeleton.HumanMotion (Z-up, metres). joint_names maps rigs to canonical keypoints.
- robot: ``load_robot`` (g1, h1, a spec YAML, or an MJCF / URDF) with a keypoint_map, scene boxes,
  limits, feet and the self-collision filter.
- targets: scaling (from limb lengths) + contacts (stance labels) -> per-frame targets.
- ik (mink, frame by frame, with collisions' clearance rows) and interaction (interaction_mesh +
  window_qp + qp + collisions: windowed SQP with hard constraints) solve for the joint trajectory.
- metrics: the physical measurements, the same for both methods; checks: the graded report
  (thresholds, per-frame-range findings, the verdict); feasibility: PD playback of the result
  with the robot's own servos and a free base.
- motion_file: ``save_motion`` / ``load_motion``, the contract sim's tracking tasks read.
- pipeline: ``retarget`` (one clip end to end; the ``simreal retarget`` verb is simreal/cli/retarget.py);
  video: robot beside the source skeleton.

Synthesised clips for tests and benchmarks are a test fixture (tests/fixtures/synth_motion.py).
Like every package ``__init__`` here, this one imports nothing: mink, MuJoCo and SciPy load
with the modules that use them.
"""
