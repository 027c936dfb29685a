"""Driving ``lazylab`` in-process from tests."""

from __future__ import annotations

import contextlib
import copy
import gzip
import json
import re
import signal
import struct
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import strategies as st

from lazylab.cli import main

# The entry points lazylab's own tests exercise, pinned (``LAZYLAB_ARMS=distribution:unit``), so that
# another plugin installed in the same environment, broken or not, changes no test (conftest sets it).
PINNED_UNITS = ("lazylab:yat", "lazylab:relu", "lazylab:gaussian", "lazylab-rff:rff")


def pinned(*units: str) -> str:
    """``LAZYLAB_ARMS`` for a test: the pinned units plus ``units`` (a test's own fake plugins)."""
    return ",".join((*PINNED_UNITS, *units))


def run(capsys, *argv):
    """``lazylab argv`` in this process: (exit status, stdout, stderr)."""
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in argv])
    captured = capsys.readouterr()
    return exc.value.code, captured.out, captured.err


PROGRESS_LINE = re.compile(r"^\[ *\d[\d. minhs]*\] ")  # "[    12 s] ladder 3/27, ...": lazylab.cli.progress


def lines(text: str) -> list[str]:
    """The non-blank lines of ``text`` that are not plain progress lines (stderr when not a terminal)."""
    return [line for line in text.splitlines() if line.strip() and not PROGRESS_LINE.match(line)]


def assert_one_line_error(code, err, *needles) -> str:
    """Exit status 2 and exactly one ``error: ...`` line on stderr containing every needle."""
    assert code == 2, err
    assert "Traceback" not in err
    found = lines(err)
    assert len(found) == 1, err
    assert found[0].startswith("error: "), found[0]
    for needle in needles:
        assert needle in found[0], (needle, found[0])
    return found[0]


def write_dist(root: Path, name: str, version: str, eps: dict[str, str], modules: dict[str, str] = {}) -> Path:
    """A minimal installed distribution in ``root``: METADATA, entry_points.txt and module files. A module of the
    same name that an earlier test imported is forgotten, so this one is imported (the earlier file went with its
    test's folder)."""
    info = root / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text("[lazylab.arms]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()))
    for filename, source in modules.items():
        (root / filename).write_text(source)
        sys.modules.pop(Path(filename).stem, None)
    return root


def fuzz(max_examples: int):
    """hypothesis settings for one property test; ``LAZYLAB_FUZZ_SCALE=10`` runs ten times the examples."""
    import os

    from hypothesis import HealthCheck, settings

    scale = int(os.environ.get("LAZYLAB_FUZZ_SCALE") or 1)
    return settings(max_examples=max_examples * scale, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large])


class CaseTimeout(BaseException):
    """Raised by ``no_hang``: a BaseException, so that ``main``'s handlers cannot turn a hang into an exit status."""


@contextlib.contextmanager
def no_hang(seconds: int):
    """Raise CaseTimeout if the body runs longer than ``seconds``: a read that waits forever is a bug."""
    def ring(signum, frame):
        raise CaseTimeout(f"no answer in {seconds} s")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


# Any JSON file lazylab reads back, mutated (tests/test_file_caches.py, tests/test_memo_binding.py).
JUNK = st.one_of(
    st.text(max_size=6), st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([1e308, -1e308, 5e-324, 0.0, -0.0, 1e6, 2**53]),
    st.lists(st.integers(-3, 3), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


def paths_of(doc, prefix=()) -> list[tuple]:
    """Every path into ``doc`` (dict keys and list indices), containers included."""
    found = []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for k, v in items:
        found.append(prefix + (k,))
        found += paths_of(v, prefix + (k,))
    return found


@st.composite
def mutated(draw, doc) -> tuple[str, bytes]:
    """``(what was done, the file's bytes)``: ``doc`` with one mutation, written as JSON."""
    doc = copy.deepcopy(doc)
    how = draw(st.sampled_from(["value", "value", "value", "drop", "extra", "nest", "truncate", "top", "deep"]))
    paths = paths_of(doc)
    if how in ("value", "drop", "nest") and paths:
        path = draw(st.sampled_from(paths))
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        if how == "value":
            parent[path[-1]] = draw(JUNK)
        elif how == "drop":
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(st.sampled_from([[parent[path[-1]]], {"v": parent[path[-1]]}]))
        how = f"{how} {'.'.join(map(str, path))}"
    elif how == "extra":
        doc[draw(st.text(min_size=1, max_size=6))] = draw(JUNK)
    elif how == "top":
        doc = draw(st.one_of(JUNK, st.just([doc])))
    text = json.dumps(doc, allow_nan=True)
    if how == "truncate":
        text = text[: draw(st.integers(0, max(len(text) - 1, 0)))]
    elif how == "deep":  # nesting past any parser's recursion limit
        depth = draw(st.sampled_from([50, 5000, 200_000]))
        text = "[" * depth + "]" * depth
    return how, text.encode()


def write_idx_dir(path: Path) -> Path:
    """A tiny Fashion-MNIST-shaped data folder (12 training and 4 test images): parsed in milliseconds."""
    rng = np.random.default_rng(0)
    arrays = {"train_images": rng.integers(0, 256, (12, 28, 28)), "train_labels": np.arange(12) % 10,
              "test_images": rng.integers(0, 256, (4, 28, 28)), "test_labels": np.arange(4)}
    from lazylab import data

    path.mkdir(parents=True)
    for key, name in data.FILES.items():
        a = np.asarray(arrays[key], np.uint8)
        header = struct.pack(f">i{a.ndim}i", 0x0800 | a.ndim, *a.shape)
        (path / name).write_bytes(gzip.compress(header + a.tobytes()))
    return path


@contextlib.contextmanager
def vetted_plugin(monkeypatch, tmp_path: Path, name: str, version: str, eps: dict[str, str], modules: dict[str, str],
                  units: tuple[str, ...]):
    """A fake plugin distribution (``write_dist`` in ``tmp_path/site``) on ``sys.path``, the ``units`` pinned beside
    lazylab's (``LAZYLAB_ARMS``), a fresh cache home (no kept unit verdicts; the session's calibration, so no
    command measures) and memo; the registry and this process's verdicts forgotten before and after.
    Yields the distribution's folder."""
    from lazylab import calibration, vetting
    from lazylab.arms import reset_registry

    session_calibration = calibration.calibration_path()
    monkeypatch.setenv("LAZYLAB_ARMS", pinned(*units))
    monkeypatch.delenv("LAZYLAB_STRICT_PLUGINS", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LAZYLAB_CACHE", str(tmp_path / "memo"))
    root = write_dist(tmp_path / "site", name, version, eps, modules)
    monkeypatch.syspath_prepend(str(root))
    for module in modules:  # another test's copy, imported earlier
        monkeypatch.delitem(__import__("sys").modules, module.removesuffix(".py"), raising=False)
    calibration.save(calibration.read(session_calibration))
    reset_registry()
    vetting._known.clear()
    vetting._announced.clear()
    try:
        yield root
    finally:
        reset_registry()
        vetting._known.clear()
        vetting._announced.clear()
