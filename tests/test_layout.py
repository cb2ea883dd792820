"""The package's layout holds what ../shared/DESIGN.md says of it: dependencies point one way,
core <- rewards <- sim <- retarget <- policies <- deploy <- hardware <- cli, and every CLI verb is a
module of ``simreal/cli/`` that nothing else imports (benchmarks call ``simreal.cli.main``, the
entry point, as a user runs the command)."""

from __future__ import annotations

import ast
import builtins
import keyword
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: package -> layer: a module may import its own layer and those below it (the core, 0, is every
#: module of ``simreal`` outside the packages named here).
LAYERS = {
    "simreal": 0,
    "simreal.rewards": 1,
    "simreal.sim": 2,
    "simreal.retarget": 3,
    "simreal.policies": 4,
    "simreal.deploy": 5,
    "simreal.hardware": 6,
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
    for package, layer in sorted(LAYERS.items(), key=lambda p: -len(p[0])):
        if module == package or module.startswith(package + "."):
            return package, layer
    return None


def _module_name(path: Path) -> str:
    """The dotted name a source file of the tree is imported by: its path from the root."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _sources() -> Iterator[tuple[Path, tuple[str, int]]]:
    """(file, its package and layer) of every module of simreal."""
    for path in sorted((ROOT / "simreal").rglob("*.py")):
        own = _layer(_module_name(path))
        assert own is not None, path
        yield path, own


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
        # list_.py: the builtin list stays; import_.py: a keyword is no module name
        name = verb.replace("-", "_") + ("_" if verb in dir(builtins) or keyword.iskeyword(verb) else "")
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


def test_every_import_of_simreal_is_the_file_its_name_says():
    """A tool that reads the tree without the editable install (an editor, a type checker, a
    reviewer's grep) finds ``simreal.a.b`` at ``simreal/a/b.py`` or ``simreal/a/b/__init__.py``;
    ``from simreal.a import name`` may name an attribute of ``simreal/a``. The one package kept
    elsewhere is ``simreal.configs``, the YAML users edit, at the top-level ``configs/``."""
    files = {_module_name(p) for p in (ROOT / "simreal").rglob("*.py")} | {"simreal.configs"}
    sources = [p for p, _ in _sources()] + sorted((ROOT / "bench").glob("*.py")) + sorted((ROOT / "tests").glob("*.py"))
    bad = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in sources
        for line, module in _imports(path)
        if module.split(".")[0] == "simreal" and module not in files and module.rsplit(".", 1)[0] not in files
    ]
    assert not bad, "\n".join(bad)


def test_the_tests_mirror_the_packages():
    """Each folder of tests/ (but fixtures/) is named for a package of simreal, and the tests at
    the top of tests/ are the core's and the whole tool's (README, every task end to end)."""
    packages = {p.name for p in (ROOT / "simreal").iterdir() if (p / "__init__.py").is_file()}
    folders = {p.name for p in (ROOT / "tests").iterdir() if p.is_dir() and not p.name.startswith((".", "_"))}
    assert folders - {"fixtures"} <= packages, sorted(folders - {"fixtures"} - packages)
    assert folders - {"fixtures"}, "tests/ is flat again"
