"""The package's shape, read from its source: the rules of docs/architecture.rst.

- no import cycle between scrapy_twolevel's modules, imports inside functions included
  (those under ``if TYPE_CHECKING:`` never run and are left out);
- the pure core (``frontier/``, ``seen/``, ``recrawl/``, ``distributed/buckets.py``,
  ``live/snapshot.py``, ``live/prometheus.py``, ``live/timeline.py``)
  imports nothing from Scrapy, Twisted, Redis, the storage backends or the glue;
- no module reaches into another object's private members (``other._name``); the
  Scrapy internals the package needs are all in ``_engine.py``;
- no ``getattr``/``setattr`` outside ``_engine.py`` but those listed (on Scrapy's or the
  user's objects, modules, or a dataclass's own fields by name), with why;
- no part wired by mutation: no ``self.<part>.<attribute> = ...`` but on the module's own
  records (listed).

Files are split by concept, not by a line count: no size rule.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

PACKAGE = Path(__file__).resolve().parent.parent / "scrapy_twolevel"
PURE_CORE = (
    "frontier",
    "seen",
    "recrawl",
    "distributed.buckets",
    "live.snapshot",
    "live.prometheus",
    "live.timeline",
)
#: What the pure core may not import (a prefix of the module name).
NOT_IN_CORE = (
    "scrapy",
    "twisted",
    "redis",
    "scrapy_twolevel.storage",
    "scrapy_twolevel.glue",
    "scrapy_twolevel.testweb",
    "scrapy_twolevel.commands",
    "scrapy_twolevel.scheduler",
    "scrapy_twolevel.middleware",
    "scrapy_twolevel.dupefilter",
    "scrapy_twolevel.distributed",  # the Redis side...
    "scrapy_twolevel._engine",
)
#: ...but for the pure bucket table (the package's ``__init__`` imports only that).
CORE_ALLOWED = ("scrapy_twolevel.distributed", "scrapy_twolevel.distributed.buckets")


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_nodes(tree: ast.AST):
    """Every node, except those under ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                stack.extend(child.orelse)
                continue
            stack.append(child)


def _imports(module: str, path: Path) -> set[str]:
    """Modules ``module`` imports at run time (absolute names, functions' imports too)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            # ``from . import meta`` imports the module meta; other names come from prefix
            for alias in node.names:
                submodule = f"{prefix}.{alias.name}"
                names.add(submodule if submodule in MODULES else prefix)
    return names


def _graph() -> dict[str, set[str]]:
    graph = {}
    for module, path in MODULES.items():
        graph[module] = set()
        for name in _imports(module, path):
            # Importing a.b.c runs a and a.b first: depend on the deepest module named.
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name and name != module:
                graph[module].add(name)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in graph[node]:
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_the_graph_sees_lazy_and_relative_imports():
    graph = _graph()
    # Imported inside from_crawler, relative, two levels up: must be in the graph.
    assert "scrapy_twolevel.glue.seed_planner" in graph["scrapy_twolevel.testweb.news"]
    assert "scrapy_twolevel.meta" in graph["scrapy_twolevel.seeds"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycle():
    assert _cycles(_graph()) == []


@pytest.mark.parametrize("core", PURE_CORE)
def test_the_pure_core_imports_no_scrapy_twisted_redis_storage_or_glue(core):
    prefix = f"scrapy_twolevel.{core}"
    offending = []
    for module, path in MODULES.items():
        if module != prefix and not module.startswith(prefix + "."):
            continue
        for name in _imports(module, path):
            if name in CORE_ALLOWED:
                continue
            if any(name == bad or name.startswith(bad + ".") for bad in NOT_IN_CORE):
                offending.append(f"{module} imports {name}")
    assert offending == []


def _private_uses(path: Path) -> list[str]:
    """``x._name`` where ``x`` is not ``self``, ``cls``, or an instance a classmethod of the
    same class has just made (``x = cls(...)`` / ``cls.__new__(cls)``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef | ast.Module):
            continue
        own = {"self", "cls"}
        for node in ast.walk(function):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                func = node.value.func
                made_by_cls = (isinstance(func, ast.Name) and func.id == "cls") or (
                    isinstance(func, ast.Attribute)
                    and isinstance(func.value, ast.Name)
                    and func.value.id == "cls"
                )
                if made_by_cls:
                    own.update(t.id for t in node.targets if isinstance(t, ast.Name))
        for node in ast.walk(function):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and not (isinstance(node.value, ast.Name) and node.value.id in own)
            ):
                found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return sorted(set(found))


def test_the_private_use_check_finds_what_it_should(tmp_path):
    sample = tmp_path / "_private_sample.py"
    sample.write_text(
        "class A:\n"
        "    @classmethod\n"
        "    def make(cls):\n"
        "        a = cls()\n"
        "        a._ok()\n"
        "        return a\n"
        "    def use(self, other):\n"
        "        self._fine()\n"
        "        other._not_fine()\n"
    )
    assert _private_uses(sample) == ["_private_sample.py:9: other._not_fine"]


def test_no_module_uses_another_objects_private_members():
    offending = []
    for module, path in MODULES.items():
        if module == "scrapy_twolevel._engine":  # the one place for Scrapy's internals
            continue
        offending += _private_uses(path)
    assert offending == []


#: The ``getattr``/``setattr`` calls the package makes outside ``_engine.py``: none on
#: another part of the package (those are reached through typed attributes and the view,
#: ``view.py``). ``(module, call)`` -> why.
REFLECTION_ALLOWED = {
    ("scrapy_twolevel", "getattr(importlib.import_module(_LAZY[name], __name__), name)"): (
        "the package's lazy exports"
    ),
    ("scrapy_twolevel.testweb", "getattr(importlib.import_module(f'.{module}', __name__), name)"): (
        "the test web's lazy exports"
    ),
    ("scrapy_twolevel.config", "getattr(spidercls, 'twolevel_topics', None)"): "the user's spider",
    ("scrapy_twolevel.config", "getattr(spidercls, '__name__', 'spider')"): "the user's spider",
    ("scrapy_twolevel.topics", "getattr(crawler, 'spidercls', None)"): "Scrapy's crawler",
    ("scrapy_twolevel.glue.preflight", "getattr(crawler, 'spidercls', None)"): "Scrapy's crawler",
    ("scrapy_twolevel.glue.preflight", "getattr(spidercls, 'name', None)"): "the user's spider",
    ("scrapy_twolevel.glue.preflight", "getattr(cls, 'twolevel_role', None)"): (
        "any class in the user's settings: the role our components declare"
    ),
    ("scrapy_twolevel.glue.topic_tracker", "getattr(response, 'request', None)"): (
        "Scrapy's response (item_scraped may pass one without a request)"
    ),
    ("scrapy_twolevel.live.extension", "getattr(self.crawler, 'spider', None)"): "Scrapy's crawler",
    ("scrapy_twolevel.middleware", "getattr(crawler, 'spider', None)"): "Scrapy's crawler",
    ("scrapy_twolevel.middleware", "getattr(scrapy_exceptions, name)"): (
        "Scrapy's exceptions, which differ by version"
    ),
    ("scrapy_twolevel.middleware", "getattr(response, 'protocol', None)"): (
        "Scrapy's response (its protocol depends on the download handler)"
    ),
    ("scrapy_twolevel.middleware", "getattr(spider, 'handle_httpstatus_list', None)"): (
        "the user's spider"
    ),
    (
        "scrapy_twolevel.testweb.extension",
        "getattr(spider, 'start_urls', None)",
    ): "the user's spider",
    ("scrapy_twolevel.codec", "getattr(func, '__func__', None)"): "a request's callback",
    ("scrapy_twolevel.codec", "getattr(func, '__self__', None)"): "a request's callback",
    ("scrapy_twolevel.codec", "getattr(spider, name, None)"): "the user's spider",
    ("scrapy_twolevel.codec", "getattr(getattr(spider, name, None), '__func__', None)"): (
        "the user's spider"
    ),
    ("scrapy_twolevel.codec", "getattr(request, attr)"): (
        "Scrapy's Request.attributes, as Request.to_dict reads them"
    ),
    ("scrapy_twolevel.frontier.estimates", "getattr(default, f.name)"): "a dataclass's own fields",
    ("scrapy_twolevel.frontier.topic_frontier", "setattr(st, key, int(saved[key]))"): (
        "a dataclass's own fields, from saved state"
    ),
    (
        "scrapy_twolevel.testweb.stats",
        "setattr(self, f.name, {} if f.default_factory is dict else 0)",
    ): ("its own dataclass fields"),
    ("scrapy_twolevel.testweb.web", "getattr(self, f.name)"): "its own dataclass fields",
}
#: ``self.<record>.<attribute> = ...``: a module's own record (a counter dataclass), not a
#: part. ``(module, record)``.
RECORDS_ALLOWED = {
    ("scrapy_twolevel.seen.seen_set", "counters"),
    ("scrapy_twolevel.testweb.server", "stats"),
}


def _reflection(path: Path) -> list[str]:
    calls = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr")
        ):
            calls.append(ast.unparse(node))
    return calls


def _wired_by_mutation(path: Path) -> list[tuple[str, str]]:
    """``(record, source)`` of each ``self.<record>.<attribute> = ...``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            for sub in ast.walk(target):
                base = sub.value if isinstance(sub, ast.Attribute) else None
                if (
                    isinstance(sub, ast.Attribute)
                    and isinstance(sub.ctx, ast.Store)
                    and isinstance(base, ast.Attribute)
                    and isinstance(base.value, ast.Name)
                    and base.value.id == "self"
                ):
                    found.append((base.attr, f"{path.name}:{node.lineno}: {ast.unparse(sub)}"))
    return found


def test_the_reflection_and_mutation_checks_find_what_they_should(tmp_path):
    sample = tmp_path / "_wiring_sample.py"
    sample.write_text(
        "class A:\n"
        "    def open(self, b):\n"
        "        self.part.frontier = b\n"
        "        self.mine = getattr(b, 'x', None)\n"
    )
    assert _reflection(sample) == ["getattr(b, 'x', None)"]
    assert _wired_by_mutation(sample) == [("part", "_wiring_sample.py:3: self.part.frontier")]


def test_no_getattr_on_the_packages_own_parts():
    found = {
        (module, call)
        for module, path in MODULES.items()
        if module != "scrapy_twolevel._engine"
        for call in _reflection(path)
    }
    assert sorted(found - set(REFLECTION_ALLOWED)) == []
    assert sorted(set(REFLECTION_ALLOWED) - found) == []  # the list is kept exact


def test_no_part_is_wired_by_assigning_its_attributes():
    offending = [
        source
        for module, path in MODULES.items()
        for record, source in _wired_by_mutation(path)
        if (module, record) not in RECORDS_ALLOWED
    ]
    assert offending == []
