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
