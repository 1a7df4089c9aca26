"""The dependency direction of DESIGN.md, read from the import statements (those inside functions
included): ground floor <- tasks, retrievers <- envs <- agents (policies, scripted <- train,
integrations) <- the CLI; within a training step, each part below the loop that runs it; and no
import cycles between modules."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# installed package -> source folder (pyproject.toml's package-dir)
PACKAGES = {
    "searchgym": "searchgym",
    "searchgym.envs": "envs",
    "searchgym.agents": "agents",
    "searchgym.retrievers": "retrievers",
    "searchgym.tasks": "tasks",
}
GROUND_FLOOR = ("errors", "files", "generation", "registry", "stats")
CLI = ("searchgym.cli", "searchgym.commands", "searchgym.sweep", "searchgym.plots")
TRAIN = "searchgym.agents.train"
STEP = ("schedule", "engine", "play", "evaluation", "rewards", "update", "grpo")
# module prefix -> module prefixes it must not import
FORBIDDEN = {
    **{
        f"searchgym.{m}": (
            "searchgym.tasks",
            "searchgym.retrievers",
            "searchgym.envs",
            "searchgym.agents",
            *CLI,
        )
        for m in GROUND_FLOOR
    },  # fmt: skip
    "searchgym.tasks": ("searchgym.retrievers", "searchgym.envs", "searchgym.agents", *CLI),
    "searchgym.retrievers": ("searchgym.tasks", "searchgym.envs", "searchgym.agents", *CLI),
    "searchgym.envs": ("searchgym.agents", *CLI),
    "searchgym.agents.policies": ("searchgym.agents.train", "searchgym.agents.scripted", *CLI),
    "searchgym.agents.scripted": ("searchgym.agents.train", "searchgym.agents.policies", *CLI),
    "searchgym.agents.rollout": ("searchgym.agents.train", *CLI),
    "searchgym.agents.gateway": ("searchgym.agents.train", *CLI),  # the trainer plays programs through it
    "searchgym.agents": CLI,
    "searchgym.viewer": ("searchgym.envs", "searchgym.agents", "searchgym.retrievers", *CLI),  # reads files
    # one training step, bottom to top: schedule <- play <- rewards <- update <- grpo (the loop)
    **{
        f"{TRAIN}.{m}": (*(f"{TRAIN}.{above}" for above in STEP[i + 1 :]), *CLI) for i, m in enumerate(STEP)
    },  # fmt: skip
    "searchgym.envs.rubric": ("searchgym.envs.rewards", "searchgym.envs.text_env", "searchgym.agents", *CLI),
}


def modules() -> dict[str, Path]:
    """Every module of the package, by its installed name."""
    found = {}
    for package, folder in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join((package, *parts))
            if package != "searchgym" or parts[:1] not in {(p.split(".")[1],) for p in PACKAGES if "." in p}:
                found[name] = path
    return found


def imported_modules(path: Path, known: dict[str, Path]) -> set[str]:
    """The package modules ``path`` imports: ``from a.b import c`` counts as ``a.b.c`` where that
    is a module, else as ``a.b``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in known else node.module)
    return {m for m in found if m in known}


MODULES = modules()
GRAPH = {name: imported_modules(path, MODULES) for name, path in MODULES.items()}


def test_the_graph_sees_the_packages():
    assert {"searchgym.registry", "searchgym.agents.train.grpo", "searchgym.envs.text_env"} <= set(GRAPH)
    assert "searchgym.agents.train.config" in GRAPH["searchgym.agents.train.grpo"]


def _rule(module: str) -> tuple[str, ...]:
    matches = [prefix for prefix in FORBIDDEN if module == prefix or module.startswith(prefix + ".")]
    return FORBIDDEN[max(matches, key=len)] if matches else ()


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_module_imports_only_what_design_allows(module):
    forbidden = _rule(module)
    offenders = [m for m in GRAPH[module] if any(m == f or m.startswith(f + ".") for f in forbidden)]
    assert not offenders, f"{module} ({MODULES[module].relative_to(ROOT)}) imports {sorted(offenders)}"


def test_code_imports_the_installed_names_only():
    offenders = []
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            offenders += [
                f"{name} imports {n}"
                for n in names
                if n.split(".")[0] in set(PACKAGES.values()) - {"searchgym"}
            ]
            if isinstance(node, ast.ImportFrom) and node.level > 1:
                offenders.append(f"{name}: relative import beyond its package")
    assert not offenders, "\n".join(offenders)


def test_no_import_cycles():
    """Tarjan's strongly connected components over the module graph: every one is a single module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v] - {v}:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"
