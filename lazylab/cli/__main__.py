"""``python -m lazylab.cli``: the console script."""

from lazylab.cli import main

main()
