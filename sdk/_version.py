"""The package version: the single source (pyproject.toml reads it, ``[tool.setuptools.dynamic]``)."""

__version__ = "0.1.0"
