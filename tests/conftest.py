"""Shared fixtures: the real Fashion-MNIST, loaded once per test session."""

from __future__ import annotations

import os

import pytest

# Tests must not touch the user's memo or environment-selected data.
os.environ.pop("LAZYLAB_ARMS", None)
os.environ.pop("LAZYLAB_STRICT_PLUGINS", None)
# Nor the user's ./out: figures and tables written by default go to a throwaway folder.
os.environ["LAZYLAB_OUT"] = __import__("tempfile").mkdtemp(prefix="lazylab-test-out-")


@pytest.fixture(scope="session")
def fmnist(tmp_path_factory):
    """The real dataset (60k/10k), parsed once into a session cache."""
    from lazylab import data

    return data.load(None, cache_dir=tmp_path_factory.mktemp("datacache"))


@pytest.fixture
def memo_dir(tmp_path, monkeypatch):
    """A fresh memo directory, also exported as LAZYLAB_CACHE."""
    d = tmp_path / "memo"
    monkeypatch.setenv("LAZYLAB_CACHE", str(d))
    return d
