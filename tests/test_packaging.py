"""What a non-editable install ships: setuptools finds only folders with ``__init__.py``."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import setuptools

pytestmark = pytest.mark.glue

PACKAGE = Path(__file__).parents[1] / "scrapy_twolevel"


def test_every_source_folder_is_a_package_setuptools_finds():
    folders = {p.parent for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts}
    found = set(setuptools.find_packages(str(PACKAGE.parent), include=["scrapy_twolevel*"]))
    expected = {".".join(f.relative_to(PACKAGE.parent).parts) for f in folders}
    assert expected <= found, f"not shipped: {sorted(expected - found)}"


def test_every_module_imports_without_the_optional_extras() -> None:
    """A plain ``pip install`` (no ``distributed``, ``bench`` or ``test`` extra) can import
    every module: the optional packages are imported only where they are used."""
    import subprocess
    import sys

    code = """
import importlib, pkgutil, sys
for name in ("redis", "matplotlib", "psutil", "pytest"):
    sys.modules[name] = None  # importing it now raises ImportError
import scrapy_twolevel
names = [m.name for m in pkgutil.walk_packages(scrapy_twolevel.__path__, "scrapy_twolevel.")]
for name in names:
    importlib.import_module(name)
print(len(names))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert int(proc.stdout) > 30


def test_the_public_names_are_the_documented_components() -> None:
    """``__all__``, what each name is, and the reference's Components agree."""
    import re

    import scrapy_twolevel

    page = (Path(__file__).parents[1] / "docs" / "reference.rst").read_text(encoding="utf-8")
    section = page.split("Components\n----------\n", 1)[1].split("\nCommands\n", 1)[0]
    documented = re.findall(r"^``(scrapy_twolevel\.[\w.]+)``$", section, re.M)
    by_name = {path.rsplit(".", 1)[1]: path for path in documented}
    assert sorted(by_name) == sorted(scrapy_twolevel.__all__)
    for name, path in by_name.items():
        module, _, attr = path.rpartition(".")
        assert getattr(scrapy_twolevel, name) is getattr(importlib.import_module(module), attr)


def test_the_lazy_public_names_are_declared_for_type_checkers_and_stay_lazy() -> None:
    """Each name ``__getattr__`` imports on first use is imported, from the same module,
    under ``TYPE_CHECKING`` (so type checkers see the class, not ``object``), and
    ``import scrapy_twolevel`` alone imports none of those modules, nor Scrapy."""
    import ast
    import subprocess
    import sys

    import scrapy_twolevel

    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    declared = {
        alias.name: "." + node.module
        for block in tree.body
        if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING"
        for node in block.body
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module
        for alias in node.names
    }
    assert declared == scrapy_twolevel._LAZY
    code = """
import sys
import scrapy_twolevel
lazy = {"scrapy"} | {"scrapy_twolevel" + m for m in scrapy_twolevel._LAZY.values()}
print(sorted(lazy & set(sys.modules)))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "[]"
