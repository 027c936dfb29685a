"""jax's persistent compilation cache: where it goes, and that it changes no result."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lazylab import xla_cache

LADDER = ["ladder", "--arms", "yat-frozen,relu-trained", "--widths", "16", "--seeds", "0", "--epochs", "2",
          "--lr", "0.1", "--train-size", "1024"]


@pytest.mark.parametrize("environ, expected", [
    ({"LAZYLAB_XLA_CACHE": "0"}, None),
    ({"LAZYLAB_XLA_CACHE": "off", "JAX_COMPILATION_CACHE_DIR": "/j"}, None),
    ({"LAZYLAB_XLA_CACHE": "/x", "JAX_COMPILATION_CACHE_DIR": "/j"}, "/x/{tag}"),
    ({"JAX_COMPILATION_CACHE_DIR": "/j"}, "/j"),
    ({"XDG_CACHE_HOME": "/c"}, "/c/lazylab/xla/{tag}"),
])
def test_cache_dir_follows_the_settings(environ, expected):
    got = xla_cache.cache_dir(environ)
    assert got == (None if expected is None else Path(expected.format(tag=xla_cache.cpu_tag())))


def test_cpu_tag_names_the_machine_and_is_stable():
    import platform

    tag = xla_cache.cpu_tag()
    assert tag.startswith(platform.machine() + "-") and len(tag.split("-")[-1]) == 12
    assert tag == xla_cache.cpu_tag()


def _ladder(tmp_path: Path, name: str, xla_setting: str, *options: str) -> tuple[dict, str]:
    """A tiny real-data ladder (``options`` added) in a fresh process and memo: its runs (timing dropped), stderr."""
    out = tmp_path / f"{name}.json"
    env = {**os.environ, "LAZYLAB_CACHE": str(tmp_path / f"memo-{name}"), "LAZYLAB_XLA_CACHE": xla_setting}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    proc = subprocess.run([sys.executable, "-m", "lazylab.cli", "-q", *LADDER, *options, "--json", str(out)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    runs = {r["key"]: {k: v for k, v in r.items() if k != "seconds"} for r in json.loads(out.read_text())["runs"]}
    return runs, proc.stderr


@pytest.mark.slow
def test_cached_programs_give_the_same_runs_as_compiling(tmp_path):
    """Cold (compiles and writes), warm (loads every program), off and damaged: bit-identical run records."""
    cache = tmp_path / "xla"
    cache_folder = cache / xla_cache.cpu_tag()
    cold, err_cold = _ladder(tmp_path, "cold", str(cache))
    entries = sorted(p.name for p in cache.rglob("*-cache"))
    assert len(entries) > 10, entries  # every program, however small, is kept
    warm, err_warm = _ladder(tmp_path, "warm", str(cache))
    assert sorted(p.name for p in cache.rglob("*-cache")) == entries  # nothing new compiled
    off, _ = _ladder(tmp_path, "off", "0")
    assert len(cold) == 2
    assert json.dumps(cold, sort_keys=True) == json.dumps(warm, sort_keys=True) == json.dumps(off, sort_keys=True)
    assert err_cold == err_warm == ""  # jax says nothing about its cache
    # Writes cut short (Ctrl-C, a full disk): the programs are compiled again, with one note. A process
    # cut short records no digests (that is at its exit), so jax meets the entries unchecked.
    (cache_folder / xla_cache.DIGESTS).unlink()
    for path in cache.rglob("*-cache"):
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    cut, err_cut = _ladder(tmp_path, "cut", str(cache))
    assert json.dumps(cut, sort_keys=True) == json.dumps(off, sort_keys=True)
    assert err_cut.startswith(f"note: a compiled program in {cache_folder} could not be read (") and \
        err_cut.endswith("); removed, compiled again and stored\n") and len(err_cut.splitlines()) == 1, err_cut
    # ... and stored again: the next ladder reads them all, silently, even from a moved copy of the
    # folder (jax's default would put a path inside the folder into every key).
    assert sorted(p.name for p in cache.rglob("*-cache")) == entries
    moved = tmp_path / "moved"
    shutil.copytree(cache, moved)
    healed, err_healed = _ladder(tmp_path, "healed", str(moved))
    assert json.dumps(healed, sort_keys=True) == json.dumps(off, sort_keys=True) and err_healed == ""
    assert sorted(p.name for p in moved.rglob("*-cache")) == entries
    # An entry without its -atime file (a write cut short) would stop jax storing any new program.
    next(moved.rglob("*-atime")).unlink()
    _, err_new = _ladder(tmp_path, "new-shapes", str(moved), "--train-size", "512")
    assert len(list(moved.rglob("*-cache"))) > len(entries) and err_new == ""
    info = subprocess.run([sys.executable, "-m", "lazylab.cli", "cache", "info"], capture_output=True, text=True,
                          env={**os.environ, "LAZYLAB_XLA_CACHE": str(cache)}, cwd=tmp_path, timeout=120)
    assert f"{len(entries)} compiled programs" in " ".join(info.stdout.split()), info.stdout


@pytest.mark.slow
@pytest.mark.parametrize("setting", ["LAZYLAB_XLA_CACHE", "JAX_COMPILATION_CACHE_DIR"])
def test_a_folder_that_cannot_be_written_turns_the_cache_off(tmp_path, setting):
    """A path through a regular file: no folder, no lock, so jax's cache is off, silently."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    env = {**os.environ, setting: str(blocker / "xla")}
    if setting == "JAX_COMPILATION_CACHE_DIR":
        env.pop("LAZYLAB_XLA_CACHE")
    script = ("import jax, lazylab.xla_cache as x; print(x.enable()); "
              "print(jax.config.jax_enable_compilation_cache); jax.jit(lambda v: v + 1)(1.0)")
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.split() == ["None", "False"], proc
    assert proc.stderr == ""
    info = subprocess.run([sys.executable, "-m", "lazylab.cli", "cache", "info"], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=120)
    assert "cannot be written (jax locks it even to read), so compiled programs are not kept or used" in " ".join(info.stdout.split()), info.stdout
