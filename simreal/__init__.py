"""simreal: a sim-to-real RL toolkit.

Subpackages map the repository's top-level folders (DESIGN.md, Layout):
``simreal.sim``, ``simreal.rewards``, ``simreal.retarget``, ``simreal.policies``,
``simreal.deploy``, ``simreal.hardware``. This core package holds the CLI, config
loading and validation, the robot spec, registries and run directories.
"""

__version__ = "0.1.0"
