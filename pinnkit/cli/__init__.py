"""The ``pinnkit`` command line (`main`); the one place that sets ``jax.config``."""

from .main import main as main
