"""lazylab: a command-line laboratory for lazy training (see SPEC.md)."""

__version__ = "0.2.0"
