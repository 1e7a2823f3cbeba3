"""The package map holds (architecture.md): a pure core, functions short enough to read, imports
at module top in the stage packages, the demo kept out of the pipeline path, a thin DAG file.
Each check names the file and line that breaks it."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "recon"
MAX_FUNCTION_LINES = 60
STAGE_PACKAGES = ("core", "decode", "merge", "publish", "audit", "ops")
# pure modules: no Spark, no pyiceberg, no files (pyarrow is allowed: the canonical event is
# an Arrow schema)
PURE = [*sorted((PACKAGE / "core").glob("*.py")), PACKAGE / "audit" / "rules.py"]
IMPURE_MODULES = ("pyspark", "pyiceberg", "os", "shutil", "tempfile", "io", "pathlib", "glob")
FILE_CALLS = {
    "open",
    "read_text",
    "write_text",
    "read_bytes",
    "write_bytes",
    "unlink",
    "mkdir",
    "iterdir",
    "glob",
    "rglob",
    "is_file",
    "is_dir",
    "exists",
    "rename",
    "replace",
}


def _modules(*roots: Path) -> Iterator[Path]:
    for root in roots:
        files = [root] if root.is_file() else sorted(root.rglob("*.py"))
        yield from (f for f in files if "_proto" not in f.parts)


def _imported(tree: ast.AST) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.lineno, node.module


def _type_checking_lines(tree: ast.AST) -> set[int]:
    """Lines inside `if TYPE_CHECKING:` blocks (imports there never run)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            for sub in node.body:
                out.update(range(sub.lineno, (sub.end_lineno or sub.lineno) + 1))
    return out


def test_the_core_is_pure() -> None:
    bad = []
    for path in PURE:
        tree = ast.parse(path.read_text())
        skip = _type_checking_lines(tree)
        for line, name in _imported(tree):
            if line not in skip and name.split(".")[0] in IMPURE_MODULES:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                f = node.func
                called = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
                if called in FILE_CALLS and not (called == "replace" and _is_str_replace(node)):
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno} calls {called}()")
    assert not bad, "the core must stay pure:\n" + "\n".join(bad)


def _is_str_replace(node: ast.Call) -> bool:
    """`text.replace(a, b)` (two arguments) is string work, not `Path.replace(target)`."""
    return len(node.args) == 2


def test_no_function_in_the_pipeline_path_is_over_the_limit() -> None:
    long = []
    for path in _modules(PACKAGE, ROOT / "dags"):
        if (PACKAGE / "demo") in path.parents:
            continue  # sample encoders and the demo are not the pipeline path
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {n} lines")
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(long)


def test_stage_packages_import_at_module_top() -> None:
    lazy = []
    for pkg in STAGE_PACKAGES:
        for path in _modules(PACKAGE / pkg):
            for fn in ast.walk(ast.parse(path.read_text())):
                if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                for node in ast.walk(fn):
                    if isinstance(node, (ast.Import, ast.ImportFrom)):
                        where = f"{path.relative_to(ROOT)}:{node.lineno}"
                        lazy.append(f"{where} in {fn.name}: {ast.unparse(node)}")
    assert not lazy, "imports inside functions in the stage packages:\n" + "\n".join(lazy)


def test_the_demo_is_not_imported_by_the_pipeline_path() -> None:
    bad = []
    for path in _modules(PACKAGE, ROOT / "dags"):
        if (PACKAGE / "demo") in path.parents or path == PACKAGE / "cli" / "__init__.py":
            continue  # the CLI's `recon demo` is the one front end that runs it
        for line, name in _imported(ast.parse(path.read_text())):
            if name == "recon.demo" or name.startswith("recon.demo."):
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert not bad, "\n".join(bad)


def test_the_dag_file_only_calls_the_factory() -> None:
    text = (ROOT / "dags" / "recon_pipelines.py").read_text()
    body = ast.parse(text).body
    code = body[1:] if ast.get_docstring(ast.Module(body=body, type_ignores=[])) else body
    assert len(text.splitlines()) <= 20
    assert [ast.unparse(x) for x in code] == [
        "from recon.airflow.dag_factory import load_dags",
        "load_dags(globals())",
    ]


@pytest.mark.parametrize(
    ("source", "complaint"),
    [
        ("import pyspark\n", "imports pyspark"),
        ("from pathlib import Path\n\ndef f(p):\n    return p.read_text()\n", "calls read_text"),
    ],
)
def test_the_purity_check_catches_what_it_should(
    source: str, complaint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checker itself can fail: a core module with Spark or file I/O is named."""
    bad = tmp_path / "recon" / "core" / "bad.py"
    bad.parent.mkdir(parents=True)
    bad.write_text(source)
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    monkeypatch.setattr(f"{__name__}.PURE", [bad])
    with pytest.raises(AssertionError, match=complaint):
        test_the_core_is_pure()


C_SOURCES = sorted((PACKAGE / "decode" / "formats").glob("_*.[ch]"))
C_OVER_LIMIT = 30
"""C functions over complexity 10 or 60 lines today (lizard): the count may only go down, as
they are split (the ceiling on the worst is `make lint`'s)."""


def test_the_c_functions_over_the_limits_do_not_grow() -> None:
    import lizard

    over = [
        f"{path.name}:{fn.start_line} {fn.name} (complexity {fn.cyclomatic_complexity}, "
        f"{fn.length} lines)"
        for path in C_SOURCES
        for fn in lizard.analyze_file(str(path)).function_list
        if fn.cyclomatic_complexity > 10 or fn.length > MAX_FUNCTION_LINES
    ]
    assert C_SOURCES and len(over) <= C_OVER_LIMIT, "\n".join(over)


LAYERS = [
    "recon",  # its version
    "recon.errors", "recon.objstore", "recon.rawdumps", "recon.faults", "recon.sparkconf", "recon.sparkpath",
    "recon.appsocket", "recon.layout", "recon.core", "recon.formats", "recon.hours",
    "recon.config", "recon.spark", "recon.decode", "recon.publish", "recon.merge", "recon.audit",
    "recon.ops", "recon.airflow", "recon.demo", "recon.cli", "recon.jobs",
]  # fmt: skip
"""The package's parts from the bottom up (architecture.md): each imports only those before it
(a stage hands its results up through its contract modules: `decode.stats`, `merge.result`,
`publish.result`)."""
ORCHESTRATORS = ("recon.ops", "recon.cli", "recon.airflow", "recon.demo", "recon.jobs")
"""The parts that run the stages (`stage.py` is theirs to import)."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _part(module: str) -> str:
    return max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)


def _import_edges() -> Iterator[tuple[str, str, str]]:
    """(importer, imported, where) of every import of a recon module that runs (not under
    TYPE_CHECKING), at any depth in the file."""
    known = {_module_name(f) for f in _modules(PACKAGE)}
    for f in _modules(PACKAGE):
        tree = ast.parse(f.read_text(encoding="utf-8"))
        skip = _type_checking_lines(tree)
        for node in ast.walk(tree):
            if getattr(node, "lineno", None) in skip:
                continue
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known
                         else node.module for a in node.names]  # fmt: skip
            for n in names:
                if n in known and n != _module_name(f):
                    yield _module_name(f), n, f"{f.relative_to(ROOT)}:{node.lineno}"


def test_no_import_runs_up_the_layers_or_into_another_packages_stage() -> None:
    bad = []
    for a, b, where in _import_edges():
        pa, pb = _part(a), _part(b)
        if pa != pb and LAYERS.index(pb) > LAYERS.index(pa):
            bad.append(f"{where}: {a} imports {b}, a layer above it")
        if pa != pb and b.endswith(".stage") and pa not in ORCHESTRATORS:
            bad.append(f"{where}: {a} imports {b}, another package's stage")
    assert not bad, "\n".join(bad)


def test_there_is_no_import_circle() -> None:
    graph: dict[str, set[str]] = {}
    for a, b, _ in _import_edges():
        graph.setdefault(a, set()).add(b)
    circles = []
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                circles.append(" -> ".join([*path[path.index(n) :], n]))
            elif n not in state:
                visit(n, [*path, n])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert not circles, "\n".join(circles)


def test_no_test_module_imports_another() -> None:
    """Shared helpers live in tests/support (a test module's are its own)."""
    bad = [
        f"{f.relative_to(ROOT)}:{line}: imports {name}"
        for f in sorted((ROOT / "tests").rglob("test_*.py"))
        for line, name in _imported(ast.parse(f.read_text(encoding="utf-8")))
        if name.startswith(("tests.unit", "tests.spark", "tests.e2e"))
    ]
    assert not bad, "\n".join(bad)
