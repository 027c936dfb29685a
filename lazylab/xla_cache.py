"""jax's persistent compilation cache, on by default for lazylab's commands.

A ladder compiles a few hundred XLA programs (one per shape of training step,
evaluation and feature pass); on 2 CPU cores that is about a third of the
quick preset's wall time. jax can keep compiled executables on disk and load
them in later processes (https://docs.jax.dev/en/latest/persistent_compilation_cache.html);
lazylab turns that on for the CLI and for its Ray workers. Results are the
same executables either way, so the memo's records do not depend on it.

Where it lives:
  * ``LAZYLAB_XLA_CACHE=0`` (or ``off``): not used.
  * ``LAZYLAB_XLA_CACHE=DIR``: under ``DIR``.
  * ``JAX_COMPILATION_CACHE_DIR`` (jax's own setting): that folder, as is.
  * otherwise ``$XDG_CACHE_HOME/lazylab/xla`` (``~/.cache/lazylab/xla``).
lazylab's own folders get a subfolder named after this CPU: jax's cache key
names the jaxlib version and platform but not the CPU's instruction set, and an
executable built for one CPU may not run on another (a cluster's shared home).
"""

from __future__ import annotations

import hashlib
import os
import platform
import sys
import warnings
from pathlib import Path

MAX_BYTES = 1 << 30  # LRU-evicted beyond this; the paper preset writes a few MB
OFF = ("0", "off", "false", "no")
READ_ERROR = "Error reading persistent compilation cache entry"  # jax's warning (jax/_src/compiler.py)


def cpu_tag() -> str:
    """A short tag naming this machine's architecture and CPU instruction-set flags."""
    flags = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):  # x86 / ARM
                flags = " ".join(sorted(line.split(":", 1)[1].split()))
                break
    except OSError:  # not Linux
        flags = platform.processor()
    digest = hashlib.sha256(f"{platform.machine()} {flags}".encode()).hexdigest()[:12]
    return f"{platform.machine() or 'cpu'}-{digest}"


def cache_dir(environ=None) -> Path | None:
    """The folder compiled executables go to, or None when ``LAZYLAB_XLA_CACHE`` turns the cache off."""
    environ = os.environ if environ is None else environ
    setting = environ.get("LAZYLAB_XLA_CACHE", "").strip()
    if setting.lower() in OFF:
        return None
    if setting:
        base = Path(setting).expanduser()
    elif environ.get("JAX_COMPILATION_CACHE_DIR"):
        return Path(environ["JAX_COMPILATION_CACHE_DIR"]).expanduser()
    else:
        base = Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lazylab" / "xla"
    return base / cpu_tag()


def enable() -> Path | None:
    """Point jax's persistent compilation cache at ``cache_dir()`` (every program cached, LRU-capped at ``MAX_BYTES``).

    Call it before the first compilation of the process: jax settles on its
    cache at the first compile. Set through the environment when jax is not yet
    imported (so a fully memoized run need not import it), through
    ``jax.config`` when it is. A capped cache makes jax lock the folder
    (``filelock``) on each read and write, so several processes may share it.
    An entry jax cannot read (a write cut short by Ctrl-C or a full disk) is
    compiled again; lazylab says so in one line instead of jax's warning.
    Returns the folder, or None when off or when the folder cannot be made.
    """
    folder = cache_dir()
    if folder is None:
        return None
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:  # e.g. a read-only home: compile as usual rather than let jax warn on every program
        return None
    settings = {"jax_compilation_cache_dir": str(folder),
                "jax_persistent_cache_min_compile_time_secs": 0,  # the many small programs add up
                "jax_persistent_cache_min_entry_size_bytes": 0,
                "jax_compilation_cache_max_size": MAX_BYTES}
    _note_unreadable_entries(folder)
    if "jax" in sys.modules:
        import jax

        for name, value in settings.items():
            jax.config.update(name, value)
    else:
        for name, value in settings.items():
            os.environ[name.upper()] = str(value)
    return folder


def _note_unreadable_entries(folder: Path) -> None:
    """Show jax's warning about an unreadable cache entry as one note per process, naming the folder."""
    if getattr(warnings.showwarning, "lazylab_xla_cache", False):
        return
    show = warnings.showwarning
    noted = []

    def showwarning(message, category, filename, lineno, file=None, line=None):
        if not str(message).startswith(READ_ERROR):
            return show(message, category, filename, lineno, file, line)
        if not noted:
            noted.append(True)
            print(f"note: a compiled program in {folder} could not be read, so it was compiled again; "
                  "remove that folder to rebuild it", file=sys.stderr)

    showwarning.lazylab_xla_cache = True
    warnings.showwarning = showwarning


def stats(folder: Path) -> tuple[int, int]:
    """Compiled programs in ``folder`` and their bytes (0, 0 when it does not exist)."""
    files = list(folder.glob("*-cache")) if folder.is_dir() else []
    return len(files), sum(f.stat().st_size for f in files)
