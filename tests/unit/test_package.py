"""The package as a whole: its docstring lists every module, and no two modules import each
other, directly or through others, at the top or inside a function."""

import ast
from pathlib import Path

import course_lib

PACKAGE = Path(course_lib.__file__).parent


def modules() -> dict[str, Path]:
    found = {p.stem: p for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    found.update({d.name: d / "__init__.py" for d in PACKAGE.iterdir()
                  if (d / "__init__.py").is_file()})
    return found


def imports(path: Path, known) -> set[str]:
    """The course_lib modules that ``path`` imports, anywhere in the file."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 or (node.module or "").startswith("course_lib"):
                parts = (node.module or "").split(".")
                parts = parts if node.level == 1 else parts[1:]
                out |= {parts[0]} if parts and parts[0] else {a.name for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.name.split(".")[1] for a in node.names
                    if a.name.startswith("course_lib.")}
    return out & set(known)


def test_the_docstring_lists_every_module():
    listed = {line.split("``")[1] for line in course_lib.__doc__.splitlines()
              if line.startswith("- ``")}
    assert listed == set(modules())


def test_no_import_circles():
    known = modules()
    graph = {name: imports(path, known) - {name} for name, path in known.items()}

    def reaches(start, goal, seen):
        for nxt in graph[start]:
            if nxt == goal:
                return [start, nxt]
            if nxt not in seen:
                seen.add(nxt)
                path = reaches(nxt, goal, seen)
                if path:
                    return [start, *path]
        return None

    for name in graph:
        circle = reaches(name, name, set())
        assert circle is None, " -> ".join(circle)
