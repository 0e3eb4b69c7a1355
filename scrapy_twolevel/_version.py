"""The package's version, in a module of its own: setup.cfg reads it without importing the
package, and the JOBDIR files record it without importing Scrapy (docs/compat.rst says what
a release keeps)."""

__version__ = "0.2.0"
