"""simreal.sim: robots, tasks, domain randomisation, physics backends.

MuJoCo's MJX prints "Failed to import warp" on stdout when the optional NVIDIA Warp
package is absent (always, on CPU machines); importing it here once with stdout captured
keeps that line out of ``--json`` outputs and pipes.
"""

import contextlib
import io

with contextlib.redirect_stdout(io.StringIO()):
    import mujoco.mjx  # noqa: F401
