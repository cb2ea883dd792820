"""The package's layout holds what ../shared/DESIGN.md says of it: dependencies point one way,
core <- rewards <- sim <- retarget <- policies <- deploy <- hardware <- cli, and every CLI verb is a
module of ``simreal/cli/`` that nothing else imports (benchmarks call ``simreal.cli.main``, the
entry point, as a user runs the command)."""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: folder -> (import package, layer): a module may import its own layer and those below it.
FOLDERS = {
    "simreal": ("simreal", 0),
    "rewards": ("simreal.rewards", 1),
    "sim": ("simreal.sim", 2),
    "retarget": ("simreal.retarget", 3),
    "policies": ("simreal.policies", 4),
    "deploy": ("simreal.deploy", 5),
    "hardware": ("simreal.hardware", 6),
}
CLI = ("simreal.cli", 7)


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) of every absolute import in ``path``, at the top or inside a function."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield from ((node.lineno, f"{node.module}.{a.name}") for a in node.names)


def _layer(module: str) -> tuple[str, int] | None:
    """The (package, layer) ``module`` belongs to; None outside simreal."""
    if module == CLI[0] or module.startswith(CLI[0] + "."):
        return CLI
    for package, layer in sorted(FOLDERS.values(), key=lambda p: -len(p[0])):
        if module == package or module.startswith(package + "."):
            return package, layer
    return None


def _sources() -> Iterator[tuple[Path, tuple[str, int]]]:
    for folder, own in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            inside_cli = path.is_relative_to(ROOT / "simreal" / "cli")
            yield path, CLI if inside_cli else own


def test_dependencies_point_one_way():
    bad = [
        f"{path.relative_to(ROOT)}:{line} ({own[0]}) imports {module}"
        for path, own in _sources()
        for line, module in _imports(path)
        if (dep := _layer(module)) is not None and dep[0] != own[0] and dep[1] >= own[1]
    ]
    assert not bad, "\n".join(bad)


def test_every_verb_is_a_module_of_simreal_cli_that_nothing_else_imports():
    from simreal.cli import VERBS

    for verb, module in VERBS.items():
        name = verb.replace("-", "_") + ("_" if verb in dir(builtins) else "")  # list_.py: the builtin list stays
        assert module == f"simreal.cli.{name}", (verb, module)
        assert (ROOT / "simreal" / "cli" / f"{name}.py").is_file(), verb
    assert not list(ROOT.glob("*/cmd_*.py")) and not list(ROOT.glob("*/*/cmd_*.py"))
    outside = [p for p, own in _sources() if own != CLI] + sorted((ROOT / "bench").glob("*.py"))
    bad = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in outside
        for line, module in _imports(path)
        if _layer(module) == CLI and not (path.parent.name == "bench" and module == "simreal.cli.main")
    ]
    assert not bad, "\n".join(bad)
