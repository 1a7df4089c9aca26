"""The dependency direction of DESIGN.md, read from the import statements (those inside functions
included): every module stands on a floor, and imports only from its own floor and those below:
the ground floor <- tasks, retrievers <- envs <- policies, scripted agents <- playing episodes <-
the gateway <- training <- the adapters <- the CLI. Within a floor, rooms that must not know each
other (policies and scripted agents; within a training step, each part below the loop that runs
it). No import cycles between modules, nor between folders."""

import ast
import subprocess
import sys
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
S = "searchgym"
GROUND_FLOOR = ("errors", "files", "generation", "registry", "stats", "serving", "hub", "run_dir", "plots")
GROUND_FLOOR += ("failure_kinds",)
FLOORS = (  # bottom to top: a module's floor is the one of its longest matching prefix
    ("ground", tuple(f"{S}.{m}" for m in GROUND_FLOOR)),
    ("tasks and retrievers", (f"{S}.tasks", f"{S}.retrievers")),
    ("envs", (f"{S}.envs", f"{S}.config_types")),
    (
        "agents, policies and scripted agents",
        (f"{S}.agents.base", f"{S}.agents.policies", f"{S}.agents.scripted", f"{S}.agents.registry"),
    ),
    ("playing episodes", (f"{S}.agents.play",)),
    ("the gateway", (f"{S}.agents.gateway",)),
    ("training", (f"{S}.agents.train",)),
    ("adapters to other trainers", (f"{S}.agents.integrations",)),
    ("the packages' front doors", (S, f"{S}.agents")),  # __init__: what `import searchgym` gives
    ("the CLI", (f"{S}.cli", f"{S}.commands", f"{S}.sweep", f"{S}.viewer")),
)
CLI = FLOORS[-1][1]
TRAIN = "searchgym.agents.train"
STEP = ("schedule", "engine", "play", "evaluation", "rewards", "update", "grpo")
# rooms of one floor that must not import each other (module prefix -> prefixes it must not import)
FORBIDDEN = {
    "searchgym.tasks": ("searchgym.retrievers",),
    "searchgym.retrievers": ("searchgym.tasks",),
    "searchgym.agents.policies": ("searchgym.agents.scripted",),
    "searchgym.agents.scripted": ("searchgym.agents.policies",),
    # the viewer reads files
    "searchgym.viewer": ("searchgym.envs", "searchgym.agents", "searchgym.retrievers", *CLI[:-1]),
    # one training step, bottom to top: schedule <- play <- rewards <- update <- grpo (the loop)
    **{f"{TRAIN}.{m}": tuple(f"{TRAIN}.{above}" for above in STEP[i + 1 :]) for i, m in enumerate(STEP)},
    "searchgym.envs.rubric": ("searchgym.envs.rewards", "searchgym.envs.text_env"),
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


def _place(module: str) -> tuple[int, str]:
    """``module``'s floor (its index in `FLOORS`) and room (the floor's prefix it matches, the
    longest where several do)."""
    matches = [
        (len(prefix), i, prefix)
        for i, (_, prefixes) in enumerate(FLOORS)
        for prefix in prefixes
        if module == prefix or module.startswith(prefix + ".")
    ]
    assert matches, f"{module} stands on no floor: add it to FLOORS"
    _, i, prefix = max(matches)
    return i, prefix


def floor(module: str) -> int:
    return _place(module)[0]


def _rule(module: str) -> tuple[str, ...]:
    matches = [prefix for prefix in FORBIDDEN if module == prefix or module.startswith(prefix + ".")]
    return FORBIDDEN[max(matches, key=len)] if matches else ()


def test_every_module_stands_on_a_floor():
    assert {FLOORS[floor(m)][0] for m in GRAPH} == {name for name, _ in FLOORS}


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_module_imports_only_its_floor_and_below(module):
    above = sorted(m for m in GRAPH[module] if floor(m) > floor(module))
    where = f"{module} ({MODULES[module].relative_to(ROOT)}, on the floor of {FLOORS[floor(module)][0]})"
    assert not above, f"{where} imports from higher floors: {above}"


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_module_imports_no_room_its_floor_keeps_apart(module):
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


def test_no_import_cycles_between_rooms():
    """The rooms of `FLOORS` (a folder such as agents/train, or a module of the ground floor)
    import one another without a loop: integrations -> train -> gateway -> integrations was one."""
    room = {m: _place(m)[1] for m in MODULES}
    edges = {(room[a], room[b]) for a, imported in GRAPH.items() for b in imported if room[a] != room[b]}
    reach = {r: {b for a, b in edges if a == r} for r in set(room.values())}
    changed = True
    while changed:  # transitive closure: a room that reaches itself is on a loop
        changed = False
        for seen in reach.values():
            more = set().union(*(reach[g] for g in seen)) - seen
            changed |= bool(more)
            seen |= more
    assert sorted(r for r, seen in reach.items() if r in seen) == []


def test_importing_the_trainer_loads_no_server():
    """The trainer builds the gateway only when a program plays: its import loads no HTTP server
    (starlette, uvicorn), no OpenAI client, and none of searchgym's serving modules."""
    servers = ("starlette", "uvicorn", "fastapi", "openai", "searchgym.agents.gateway", "searchgym.serving")
    code = "import sys, searchgym.agents.train.grpo\n"
    code += f"print([m for m in sys.modules if m.startswith({servers})])"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"
