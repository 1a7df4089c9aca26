"""The dependency direction of DESIGN.md, read from the import statements."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("tasks", "retrievers", "envs", "agents")
# folder -> sibling packages it must not import
FORBIDDEN = {
    "tasks": {"retrievers", "envs", "agents"},
    "retrievers": {"tasks", "envs", "agents"},
    "envs": {"agents"},
    "agents": set(),
}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


@pytest.mark.parametrize("folder", LAYERS)
def test_layer_imports_only_what_design_allows(folder):
    offenders = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        for module in imported_modules(path):
            parts = module.split(".")
            if parts[0] in LAYERS:
                offenders.append(f"{path.relative_to(ROOT)} imports {module} (use searchgym.{module})")
            if parts[0] == "searchgym" and len(parts) > 1 and parts[1] in FORBIDDEN[folder]:
                offenders.append(f"{path.relative_to(ROOT)} imports {module}")
            if parts[0] == "searchgym" and len(parts) > 1 and parts[1] == "cli":
                offenders.append(f"{path.relative_to(ROOT)} imports the CLI")
    assert not offenders, "\n".join(offenders)


def test_no_relative_imports_reach_across_layers():
    for folder in LAYERS:
        for path in (ROOT / folder).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.level > 1:
                    pytest.fail(f"{path.relative_to(ROOT)}: relative import beyond its package")
