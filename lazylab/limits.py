"""The limits of the command line's values, shared by its options (``lazylab.cli.options``, which
re-exports them) and by the schemas of the files lazylab reads back (``lazylab.schemas``).

A module of its own, importing nothing: ``lazylab.data`` checks its parsed copy with
``lazylab.schemas``, and the backends import ``lazylab.data``, so the schemas must not import
``lazylab.cli`` (which imports the experiments, which import the backends: tests/test_imports.py).
"""

MAX_SEED = 2**32 - 1  # jax keys hold 32 bits: a larger seed would silently repeat a smaller one
MAX_LR = 1e6  # far past every divergence; larger rates overflow float32 updates to inf
MAX_WIDTH = 65536  # 8x the protocol's widest bank; beyond this the features alone outgrow a workstation
MAX_AMPLITUDE = 1e6  # ntk lab's --bump and --noise: far past any useful target; 1e308 overflows its float64 squares
MAX_LIST = 100_000  # values in one list option: far past any sweep, small enough to check at once
NAME_MAX = 255  # bytes in one path component on Linux file systems (ext4, xfs, btrfs, tmpfs)
