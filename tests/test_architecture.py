"""The layout's rules, checked on the source (docs/ARCHITECTURE.md): imports point down, the pure
core uses the standard library only, one chunk reader, modules of one concern stay small."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import nito_nb
from nito_nb import _stream_results

PACKAGE = Path(nito_nb.__file__).parent


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _type_checking_only(tree: ast.AST) -> set[ast.AST]:
    """Import nodes under ``if TYPE_CHECKING:``: they never run, so they are no edge."""
    skipped: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                skipped.update(ast.walk(child))
    return skipped


def _imports(module: str) -> Iterator[tuple[str, str, str | None]]:
    """(imported module, its full name, the function it is imported in or None) of every import
    of ``module``, module-level and function-level, without TYPE_CHECKING blocks."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = _type_checking_only(tree)
    is_package = path.name == "__init__.py"

    def visit(node: ast.AST, where: str | None) -> Iterator[tuple[str, str, str | None]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = child.name if where is None else f"{where}.{child.name}"
                yield from visit(child, name)
                continue
            if child in skipped:
                continue
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield alias.name, alias.name, where
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = module.split(".") if is_package else module.split(".")[:-1]
                    base = base[: len(base) - (child.level - 1)]
                    target = ".".join([*base, *([child.module] if child.module else [])])
                else:
                    target = child.module or ""
                for alias in child.names:
                    sub = f"{target}.{alias.name}"
                    yield (sub if sub in MODULES else target), target, where
            yield from visit(child, where)

    yield from visit(tree, None)


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    lazy = {
        ("nito_nb._stream_results", target, where)
        for where, target in _stream_results.UPWARD_IMPORTS
    }
    for module in MODULES:
        for target, _, where in _imports(module):
            if target in MODULES and target != module and (module, target, where) not in lazy:
                graph[module].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
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
                out.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            connect(v)
    return out


def test_the_import_graph_has_no_cycle_but_the_declared_lazy_edges() -> None:
    assert _cycles(_graph()) == []


def test_the_graph_sees_function_level_imports_and_the_declared_edges_are_real() -> None:
    # Without its two declarations, the engine's lazy imports close cycles: the test can fail.
    declared = {(where, target) for where, target in _stream_results.UPWARD_IMPORTS}
    found = {
        (where, target)
        for target, _, where in _imports("nito_nb._stream_results")
        if target in dict((t, w) for w, t in _stream_results.UPWARD_IMPORTS)
    }
    assert found == declared, "each declared upward import is made inside the method it names"
    graph = _graph()
    for _, target in _stream_results.UPWARD_IMPORTS:
        graph["nito_nb._stream_results"].add(target)
    assert _cycles(graph), "an upward import must show as a cycle"


#: The layers, lowest first (docs/ARCHITECTURE.md): a module imports from its own layer or below,
#: never above (but the declared lazy edges). A layer of several groups (packages that know
#: nothing of each other) also refuses an edge between its groups unless it is in SIDEWAYS.
LAYERS: tuple[tuple[str, tuple[tuple[str, ...], ...]], ...] = (
    ("core", (("nito_nb._core",),)),
    ("transport", (("nito_nb._transport",),)),
    (
        "stream",
        (
            (
                "nito_nb._stream",
                "nito_nb._stream_results",
                "nito_nb._stream_source",
                "nito_nb._recordings",
                "nito_nb._watchdog",
                "nito_nb._structured",
            ),
        ),
    ),
    (
        "client, frame, render, requests",
        (
            ("nito_nb._client",),
            ("nito_nb._frame",),
            ("nito_nb._render",),
            ("nito_nb.tools", "nito_nb._interpolate"),
        ),
    ),
    ("display", (("nito_nb._display", "nito_nb._loop", "nito_nb._last"),)),
    (
        "runs, magic, widget, capture",
        (
            ("nito_nb._runs",),
            ("nito_nb._magic",),
            ("nito_nb._widget",),
            (
                "nito_nb._capture",
                "nito_nb._capture_pump",
                "nito_nb._capture_httpx",
                "nito_nb._capture_httpx2",
                "nito_nb._watch",
                "nito_nb._live",
            ),
            ("nito_nb._marimo_chat",),
            # docs/SCORES.md: graders of a run's rows; the run only calls them (duck-typed)
            ("nito_nb.scores",),
        ),
    ),
    ("root", (("nito_nb", "nito_nb.demo", "nito_nb.otel"),)),
)
#: Edges between groups of one layer, each a decision (docs/ARCHITECTURE.md says why).
SIDEWAYS = {
    (
        "nito_nb._magic",
        "nito_nb._runs",
    ): "--over is a run (nito_nb.run); Nito.store writes the cell's streams to a run store",
    ("nito_nb._magic", "nito_nb._capture"): "%nito history lists the streams that capture kept",
    ("nito_nb._magic", "nito_nb.scores"): "--score NAME=EXPR parses a built-in score",
    ("nito_nb.scores", "nito_nb._runs"): "a judge's requests are a run of their own (nito_nb.run)",
}
#: The simulator stands beside the layers: it imports the core only; the root registers it, and
#: the magic and the widget list its models (``SIM_MODELS``, a constant of a pure module).
SIMULATOR = "nito_nb.sim"
SIMULATOR_USERS = ("nito_nb", "nito_nb._magic", "nito_nb._widget")


def _place(module: str) -> tuple[int, str] | None:
    """(layer index, group) of ``module``: its longest matching prefix (the root's module is
    ``nito_nb`` itself, no prefix: a module nobody placed has no layer, and a test says so)."""
    best: tuple[int, str, int] | None = None
    for i, (_, groups) in enumerate(LAYERS):
        for group in groups:
            for prefix in group:
                inside = module == prefix or (
                    prefix != "nito_nb" and module.startswith(prefix + ".")
                )
                if inside and (best is None or len(prefix) > best[2]):
                    best = (i, group[0], len(prefix))
    return None if best is None else best[:2]


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_every_module_has_a_layer() -> None:
    assert [m for m in MODULES if not _in(m, SIMULATOR) and _place(m) is None] == []


def _layer_problems(graph: dict[str, set[str]]) -> list[str]:
    wrong = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            if _in(target, SIMULATOR) or _in(module, SIMULATOR):
                if _in(module, SIMULATOR):
                    if not (_in(target, SIMULATOR) or _in(target, "nito_nb._core")):
                        wrong.append(f"{module} -> {target} (the simulator imports the core only)")
                elif not any(
                    module == user or (user != "nito_nb" and _in(module, user))
                    for user in SIMULATOR_USERS
                ):
                    wrong.append(
                        f"{module} -> {target} (only the root, the magic and the widget know the simulator)"
                    )
                continue
            here, there = _place(module), _place(target)
            assert here is not None and there is not None
            if there[0] > here[0]:
                wrong.append(
                    f"{module} ({LAYERS[here[0]][0]}) -> {target} ({LAYERS[there[0]][0]}): upward"
                )
            elif (
                there[0] == here[0] and there[1] != here[1] and (here[1], there[1]) not in SIDEWAYS
            ):
                wrong.append(
                    f"{module} -> {target}: sideways in {LAYERS[here[0]][0]!r}; declare it in SIDEWAYS "
                    "and say why in docs/ARCHITECTURE.md, or move the code"
                )
    return wrong


def test_imports_point_down_the_layers() -> None:
    assert _layer_problems(_graph()) == []


def test_the_layer_test_can_fail() -> None:
    # Edges that break each rule, added to the real graph, are each found.
    graph = _graph()
    graph["nito_nb._core.sse"].add("nito_nb._client.clients")  # upward
    graph["nito_nb._widget.chat"].add("nito_nb._runs.runner")  # sideways, undeclared
    graph["nito_nb.sim._app"].add("nito_nb._client.clients")  # the simulator past the core
    # a module that does not know the simulator
    graph["nito_nb._runs.runner"].add("nito_nb.sim._app")
    found = _layer_problems(graph)
    assert len(found) == 4, found


def test_the_client_never_imports_the_simulator() -> None:
    # The simulator's URL is passed in (``_client.register_simulator``, called by the root): the
    # client sits below the simulator, which a plain request to a gateway never loads.
    client = [m for m in MODULES if m == "nito_nb._client" or m.startswith("nito_nb._client.")]
    assert "nito_nb._client.clients" in client and "nito_nb._client.endpoint" in client
    found = [
        f"{m} imports {target}"
        for m in client
        for target, full, _ in _imports(m)
        if any(name == "nito_nb.sim" or name.startswith("nito_nb.sim.") for name in (target, full))
    ]
    assert found == []


@pytest.mark.parametrize("package", ["nito_nb._client", "nito_nb._transport", "nito_nb._runs"])
def test_these_package_roots_only_re_export(package: str) -> None:
    # Code in a package's __init__ is what its own modules end up importing from the package
    # (runs._sweep called run() from runs/__init__: a cycle). Here the root holds none.
    tree = ast.parse(MODULES[package].read_text(encoding="utf-8"))
    code = [
        ast.unparse(node).splitlines()[0]
        for node in tree.body
        if not (
            isinstance(node, (ast.Import, ast.ImportFrom))
            # the docstring
            or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
            or (
                isinstance(node, ast.Assign)
                and [ast.unparse(t) for t in node.targets] == ["__all__"]
            )
        )
    ]
    assert code == [], f"{package} defines more than re-exports: move it to a module of the package"


def test_the_core_imports_only_the_standard_library() -> None:
    core = [m for m in MODULES if m == "nito_nb._core" or m.startswith("nito_nb._core.")]
    assert "nito_nb._core.sse" in core and "nito_nb._core.metrics" in core
    outside = []
    for module in core:
        for _, full, _ in _imports(module):
            top = full.split(".")[0]
            if (
                full.startswith("nito_nb._core")
                or top in sys.stdlib_module_names
                or top == "__future__"
            ):
                continue
            outside.append(f"{module} imports {full}")
    assert outside == []


# -- one reader -------------------------------------------------------------------------------

_NEW_FIELD = (
    'data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"role":"assistant","x_thought":"hmm"}}]}\n\n'
    'data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n'
    'data: {"id":"c","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    "data: [DONE]\n\n"
)


def test_the_stream_and_the_frame_read_chunks_with_the_same_function() -> None:
    from nito_nb._core import accumulate, chunk
    from nito_nb._frame import build

    assert accumulate.read_chunk is chunk.read_chunk and build.read_chunk is chunk.read_chunk
    assert accumulate.plain_reasoning_source is chunk.plain_reasoning_source
    assert build.plain_reasoning_source is chunk.plain_reasoning_source


def test_a_rule_changed_in_the_reader_is_seen_by_the_stream_and_the_frame(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What "add a delta field" takes: one change in _core/chunk.py. Here a vendor's `x_thought`
    # becomes reasoning; before the change it is a vendor field (the frame's extras) and nothing
    # of it is reasoning, after it both the Stream and the frame show it.
    from nito_nb._core import chunk

    before = nito_nb.read_sse(_NEW_FIELD)
    assert before.reasoning == "" and nito_nb.frame(before).nito.reasoning().iloc[0] == ""
    original = chunk._read_delta

    def read_delta(delta: dict, reading: chunk.Reading) -> None:
        original(delta, reading)
        if isinstance(delta.get("x_thought"), str):
            reading.reasoning.append(
                chunk.ReasoningPiece("reasoning", None, delta["x_thought"], None)
            )

    monkeypatch.setattr(chunk, "_read_delta", read_delta)
    s = nito_nb.read_sse(_NEW_FIELD)
    df = nito_nb.frame(s)
    assert s.reasoning == "hmm" and s.content == "Hi"
    assert df.nito.reasoning().iloc[0] == "hmm" and df.nito.text().iloc[0] == "Hi"
    assert bool(df.loc[df.seq == 0, "token"].iloc[0])  # both count it as token-bearing
    assert s.snapshot().n_token_chunks == 2


def test_stream_and_async_stream_are_siblings_over_one_base() -> None:
    # No subclass that disables its parent's methods: each has only the ways of reading it has.
    # Their producers are siblings over one base too: no feeding written twice.
    from nito_nb._stream_results import StreamResults
    from nito_nb._stream_source import AsyncStreamSource, SourceBase, StreamSource

    assert not issubclass(nito_nb.AsyncStream, nito_nb.Stream)
    assert issubclass(nito_nb.Stream, StreamResults) and issubclass(
        nito_nb.AsyncStream, StreamResults
    )
    for name in ("snapshot", "on_done"):
        assert getattr(nito_nb.Stream, name) is getattr(StreamResults, name)
        assert getattr(nito_nb.AsyncStream, name) is getattr(StreamResults, name)
    assert not issubclass(AsyncStreamSource, StreamSource)
    for name in ("feed", "end", "protect", "set_response", "fail_http", "note"):
        assert getattr(StreamSource, name) is getattr(SourceBase, name)
        assert getattr(AsyncStreamSource, name) is getattr(SourceBase, name)
    assert not hasattr(nito_nb.Stream, "__aiter__") and not hasattr(
        nito_nb.AsyncStream, "__enter__"
    )


# -- objects by concern ---------------------------------------------------------------------------

RUNS = PACKAGE / "_runs"

#: Private names that a module of ``_runs/`` may read on another module's object, and why.
#: IPython's display protocol names look private but are the protocol's public entry points.
RUNS_PRIVATE_READS_ALLOWED = {
    "_ipython_display_": "IPython's display protocol (a Run shown by map() in a kernel)",
    "_repr_mimebundle_": "IPython's display protocol (the widgets' bundle, with a text/html copy added)",
    "_display_": "marimo's display protocol (a Run followed in the cell by map() in marimo)",
}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _defined_privates(tree: ast.AST) -> set[str]:
    """The private names a module defines: its functions, classes and module-level names, and
    the attributes its code sets on ``self`` or ``cls``."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("self", "cls")
        ):
            names.add(node.attr)
    return {name for name in names if _private(name)}


def _private_reads(tree: ast.AST) -> Iterator[tuple[int, str, str]]:
    """(line, expression, name) of every ``x._name`` whose ``x`` is not ``self`` or ``cls``."""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and _private(node.attr)
            and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
        ):
            yield node.lineno, ast.unparse(node), node.attr


def _runs_reads_of_other_modules_privates() -> list[str]:
    """Each read, in a module of ``_runs/``, of a private attribute that is not the module's own:
    one it does not define, or one another module of ``_runs/`` defines too (then the object may
    well be that module's: ``run._writer`` where a dispatcher also has a ``_writer``). Objects of
    modules outside ``_runs/`` (a client's ``_build``) count as another module's too."""
    trees = {
        path.name: ast.parse(path.read_text(encoding="utf-8")) for path in sorted(RUNS.glob("*.py"))
    }
    defined = {name: _defined_privates(tree) for name, tree in trees.items()}
    found = []
    for name, tree in trees.items():
        elsewhere = set().union(*(names for other, names in defined.items() if other != name))
        for line, expression, attr in _private_reads(tree):
            own = attr in defined[name] and attr not in elsewhere
            if not own and attr not in RUNS_PRIVATE_READS_ALLOWED:
                found.append(f"_runs/{name}:{line}: {expression}")
    return found


def test_no_module_of_runs_reads_another_modules_private_attributes() -> None:
    # A Run's collaborators (dispatcher, writer, stats) own their state and talk through small
    # documented methods; a private attribute read from another module is a rule living in two
    # places (runs/_record.py read 13 of the Run's, runs/_remote.py 11: issue 29).
    assert _runs_reads_of_other_modules_privates() == []


def test_the_private_read_check_sees_what_it_must() -> None:
    code = (
        "class Own:\n"
        "    def __init__(self):\n"
        "        self._mine = 1\n"
        "def f(own, run, client):\n"
        "    own._mine; run._queue; client._build(); run.public; own.__class__; run._repr_mimebundle_()\n"
    )
    tree = ast.parse(code)
    reads = [expression for _, expression, _ in _private_reads(tree)]
    assert reads == ["own._mine", "run._queue", "client._build", "run._repr_mimebundle_"]
    assert _defined_privates(tree) == {"_mine"}
