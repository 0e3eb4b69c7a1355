"""Sphinx configuration for scrapy_twolevel."""

project = "scrapy_twolevel"
author = "scrapy_twolevel developers"
release = "0.1.0"
extensions = ["sphinx.ext.mathjax"]
exclude_patterns = ["_build"]
html_theme = "alabaster"
html_static_path: list[str] = []
