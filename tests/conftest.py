"""Shared fixtures: the real Fashion-MNIST, loaded once per test session."""

from __future__ import annotations

import os
import tempfile

import pytest

from lazylab import xla_cache

# Tests must not touch the user's memo or environment-selected data.
os.environ.pop("LAZYLAB_ARMS", None)
os.environ.pop("LAZYLAB_STRICT_PLUGINS", None)
# Nor the user's ./out: figures and tables written by default go to a throwaway folder.
os.environ["LAZYLAB_OUT"] = tempfile.mkdtemp(prefix="lazylab-test-out-")
# Nor the user's compilation cache; one shared by the whole session (its CLI subprocesses and
# Ray workers included) spares each test the compiles an earlier one did.
os.environ["LAZYLAB_XLA_CACHE"] = tempfile.mkdtemp(prefix="lazylab-test-xla-")
os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)
# Nor the user's memo (~/.cache/lazylab/memo by default, lazylab.cache.default_dir): a command run
# without --cache-dir uses a throwaway one (memo_dir gives a test its own).
os.environ["LAZYLAB_CACHE"] = tempfile.mkdtemp(prefix="lazylab-test-memo-")
# Nor the user's calibration (lazylab.calibration): a throwaway cache home holding the development
# machine's figures as this machine's, so no command in a test spends 25-55 s measuring it.
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="lazylab-test-home-")
xla_cache.enable()


def _keep_reference_calibration() -> None:
    import dataclasses

    from lazylab import calibration
    from lazylab.config import code_identity

    calibration.save(dataclasses.replace(calibration.REFERENCE, code=code_identity(), cores=os.cpu_count() or 1))


_keep_reference_calibration()


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
