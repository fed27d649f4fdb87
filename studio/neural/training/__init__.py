"""Tooling of the neural audio-to-motion engine: the data recipe, training, evaluation and benchmarks.

The running studio never imports this package (an import-linter contract in pyproject.toml says so); the runtime
reads weights through ``studio.neural.weights``.
"""
