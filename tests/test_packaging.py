"""What a non-editable install ships: setuptools finds only folders with ``__init__.py``."""

from __future__ import annotations

from pathlib import Path

import setuptools

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
