"""User-facing errors: the CLI prints them as one line and exits with status 2."""


class LazylabError(Exception):
    """A problem with the user's input or environment, reported in one line."""


class DataError(LazylabError):
    """The Fashion-MNIST files are missing, truncated or malformed."""
