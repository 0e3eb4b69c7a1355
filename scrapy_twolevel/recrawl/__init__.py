"""Recrawl-interval prediction for news seed pages (see docs/recrawl.rst)."""
