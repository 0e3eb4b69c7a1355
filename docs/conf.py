"""Sphinx configuration for scrapy_twolevel."""

project = "scrapy_twolevel"
author = "scrapy_twolevel developers"
copyright = "2026, scrapy_twolevel developers"
release = "0.1.0"
# No extensions: formulas are plain text (docs/policies.rst), so the built pages load no
# script from the network (sphinx.ext.mathjax would fetch MathJax from a CDN).
extensions: list[str] = []
exclude_patterns = ["_build"]
html_theme = "alabaster"
html_static_path: list[str] = []
