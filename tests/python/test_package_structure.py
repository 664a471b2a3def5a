"""The Python package's structure: every module imports alone, module-level
imports form no cycle, no function imports one of the package's own modules
(only optional third-party ones, each with a comment saying why), and native
handles are released in one place, safely at interpreter exit."""
import ast
import os
import subprocess
import sys

import numpy as np
import pytest

import sambaflow.samba as samba
from sambaflow.samba._lib import NativeHandle

PACKAGE_DIR = os.path.dirname(os.path.abspath(samba.__file__))
# Where dotted names start: the directory holding the top-level `sambaflow`.
IMPORT_ROOT = os.path.dirname(os.path.dirname(PACKAGE_DIR))
# Optional dependencies a function may import on first use.
LAZY_THIRD_PARTY = {"torch", "numpy", "onnx"}


def _modules():
    """(dotted name, path) of every module of the sambaflow.samba package."""
    out = []
    for root, _, files in os.walk(PACKAGE_DIR):
        for f in sorted(files):
            if f.endswith(".py"):
                path = os.path.join(root, f)
                rel = os.path.relpath(path, IMPORT_ROOT)[:-3].replace(os.sep, ".")
                out.append((rel[: -len(".__init__")] if rel.endswith(".__init__") else rel, path))
    return out


MODULES = _modules()


def _resolve(module, node):
    """The absolute package module an import node names, or None when it is not the package's."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
        return [n for n in names if n == "sambaflow" or n.startswith("sambaflow.")]
    is_package = any(p.endswith("__init__.py") for m, p in MODULES if m == module)
    base = module.split(".")
    if node.level:
        base = base[: len(base) - node.level + (1 if is_package else 0)]
    elif not (node.module or "").startswith("sambaflow"):
        return []
    else:
        base = []
    target = ".".join(base + ([node.module] if node.module else []))
    known = {m for m, _ in MODULES}
    found = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in known]
    return found or [target]


def _function_imports(tree):
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    yield node


@pytest.mark.parametrize("module", [m for m, _ in MODULES] + ["sambaflow"])
def test_each_module_imports_alone_in_a_fresh_interpreter(module):
    r = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "Exception ignored" not in r.stderr, r.stderr


def test_no_function_imports_a_module_of_the_package():
    found = []
    for module, path in MODULES:
        with open(path) as f:
            source = f.read()
        lines = source.splitlines()
        for node in _function_imports(ast.parse(source)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            third_party = not getattr(node, "level", 0) and all(n.split(".")[0] in LAZY_THIRD_PARTY for n in names)
            if not third_party:
                found.append(f"{path}:{node.lineno}: {lines[node.lineno - 1].strip()}")
            elif "#" not in lines[node.lineno - 1]:
                found.append(f"{path}:{node.lineno}: a lazy import without a comment saying why")
    assert not found, "\n".join(found)


def test_module_level_imports_form_no_cycle():
    graph = {}
    for module, path in MODULES:
        with open(path) as f:
            tree = ast.parse(f.read())
        deps = set()
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                deps.update(d for d in _resolve(module, node) if d != module)
        graph[module] = deps
    state, stack = {}, []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for d in sorted(graph.get(m, ())):
            if d not in graph:
                continue
            if state.get(d) == "open":
                cycle = stack[stack.index(d):] + [d]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if d not in state:
                visit(d)
        stack.pop()
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m)


def test_the_leaf_module_imports_nothing_of_the_package():
    with open(os.path.join(PACKAGE_DIR, "_lib.py")) as f:
        tree = ast.parse(f.read())
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level], \
        "_lib.py must import nothing of the package"


def test_native_handles_are_released_in_one_place():
    owners = []
    for module, path in MODULES:
        with open(path) as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name == "__del__":
                released = [c for c in ast.walk(node) if isinstance(c, ast.Attribute) and c.attr.endswith("_release")]
                if released:
                    owners.append(module)
    # Only NativeHandle (sambaflow.samba._lib) releases, through close().
    assert owners == [], owners
    assert "__del__" in vars(NativeHandle)
    for cls in (samba.SambaTensor, samba.Materializer, samba.SambaGraph, samba.optim.Optimizer,
                type(samba.session._native)):
        assert issubclass(cls, NativeHandle), cls


def test_handles_alive_at_interpreter_exit_are_released_quietly():
    program = """if True:
        import numpy as np
        import sambaflow.samba as samba
        s = samba.SambaSession()
        keep = [samba.from_numpy(np.ones((2, 3), np.float32)), samba.randn(4), s, samba.Materializer("zeros"),
                samba.parameter("p", (3, 2)), samba.session]
        keep.append(keep)  # a cycle: collected late, while modules are torn down
        t = keep[0] * 2
    """
    r = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "Exception ignored" not in r.stderr and "Error" not in r.stderr, r.stderr


def test_a_handle_is_released_once():
    t = samba.from_numpy(np.ones(3, np.float32))
    t.close()
    t.close()  # a second close, and the collection after it, release nothing
    assert t.handle is None
