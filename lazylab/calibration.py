"""This machine's measured cost constants for ``lazylab.estimate`` (issue 25).

The constants come from timing the real training code (``lazylab.train.fit_batch``
on random images, so no data is read) at two widths, in a fresh process, once per
machine: a trained step, a head step on stored features, a bank's features, and
the compilation of a new program shape, cold and with jax's persistent
compilation cache holding it. They are kept in
``$XDG_CACHE_HOME/lazylab/calibration.json`` (``~/.cache/lazylab/calibration.json``)
and measured again when that file is missing, unreadable, or was written by
another code identity, calibration version or CPU count; ``LAZYLAB_RECALIBRATE=1``
forces it. docs/performance.md ("Estimates before a run") has the figures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import click

from lazylab.config import code_identity
from lazylab.errors import LazylabError
from lazylab.limits import CALIBRATION_VERSION  # re-exported; bump it there when what the calibration measures changes
from lazylab.locations import cache_home
from lazylab.text import printable

D, CLASSES, BATCH = 784, 10, 256


@dataclass(frozen=True)
class Calibration:
    """This machine's measured cost constants (seconds), see the module docstring.

    Every cost is in CPU seconds (the process's CPU time over all its threads), which other work on the
    machine changes little, where it changes wall time several-fold; ``lazylab.estimate`` turns them into
    wall time with the cores the command gets (``estimate.effective_cores``).

    Attributes:
      step_a, step_b: a trained step costs ``step_a + S * step_b * m`` (CPU s; ``step_b`` per unit).
      head_a, head_b: a head step on stored features costs ``head_a + S * head_b * m`` (CPU s).
      feature_s: CPU seconds per feature output (one image x one unit) of a frozen bank.
      compile_s, frozen_compile_s: first call minus a later one of a new trained / frozen
        program shape, nothing cached.
      warm_compile_s, warm_frozen_compile_s: the same when jax's persistent compilation
        cache already holds the programs (tracing and loading them).
      cores: ``os.cpu_count()`` when measured; load: the 1-minute load average then (other
        work on the machine slows every measurement); code: the code identity; version:
        CALIBRATION_VERSION; measured_at: UTC time; seconds: how long the calibration took.
      convex_eval_a, convex_eval_b: one evaluation of a convex solve (``experiments.convex_solve.solve``)
        costs ``rows * (convex_eval_a + convex_eval_b * m)`` CPU seconds on ``rows x m`` features.
    """

    step_a: float
    step_b: float
    head_a: float
    head_b: float
    feature_s: float
    compile_s: float
    warm_compile_s: float
    frozen_compile_s: float
    warm_frozen_compile_s: float
    cores: int
    load: float
    code: str
    version: int = CALIBRATION_VERSION
    measured_at: str = ""
    seconds: float = 0.0
    convex_eval_a: float = 2.7e-7
    convex_eval_b: float = 1.2e-9

    def valid_here(self) -> bool:
        """Whether it was measured by this code identity, calibration version and CPU count."""
        return (self.code, self.version, self.cores) == (code_identity(), CALIBRATION_VERSION, os.cpu_count() or 1)


# What a command estimates with when this machine is not measured yet and it must not spend the
# time measuring (a computing command deciding whether to announce a long job): the calibration
# of the 2-core development machine, nothing else running (load 0.49; docs/performance.md), measured
# in wall seconds there (the calibration's first version), which CPU seconds exceed by up to the cores
# in use; its convex evaluation from the quick preset's convex cells there (17-87 ms at m = 16-1024).
REFERENCE = Calibration(step_a=2.324e-4, step_b=6.176e-6, head_a=3.667e-5, head_b=6.668e-7, feature_s=1.080e-8,
                        compile_s=1.567, warm_compile_s=0.422, frozen_compile_s=0.622, warm_frozen_compile_s=0.258,
                        cores=2, load=0.49, code="reference", measured_at="2026-12-03T02:19:37Z (the 2-core "
                        "development machine, not this one)", seconds=21.4, convex_eval_a=2.7e-7,
                        convex_eval_b=1.2e-9)

SHARE_PROBE_S, SHARE_PROBES = 0.25, 3  # the CPU-share probe (cpu_share): seconds of each sample, samples
MIN_SHARE = 0.05  # a share below this is taken as this: a probe starved for a moment is not a 20-fold slowdown


def cpu_share(seconds: float = SHARE_PROBE_S, samples: int = SHARE_PROBES) -> float:
    """The share of this machine's cores a process gets now, 0-1: ``os.cpu_count()`` threads hash for
    ``seconds``, and the share is the process's CPU time over ``seconds x cores``; the median of ``samples``
    such probes, so that a burst of other work over one of them does not set the figure.

    It reads what the load average cannot: work at a lower priority (``nice``) takes little from a
    command at normal priority, work at the same priority takes its share. ``LAZYLAB_CPU_SHARE`` (a number in
    (0, 1]) is used instead of measuring: a fixed figure for tests, or the share a later run expects.
    Returns: the share, at least ``MIN_SHARE``.
    """
    import hashlib
    import threading

    given = os.environ.get("LAZYLAB_CPU_SHARE", "").strip()
    if given:
        try:
            value = float(given)
        except ValueError:
            value = float("nan")
        if not 0 < value <= 1:
            raise LazylabError(f"LAZYLAB_CPU_SHARE={given!r}: expected a number in (0, 1], the share of the "
                               "cores a command gets")
        return max(value, MIN_SHARE)
    block = bytes(1 << 16)  # hashlib releases the GIL for inputs over 2 KiB: the threads run in parallel
    cores = os.cpu_count() or 1

    def probe() -> float:
        stop = time.perf_counter() + seconds

        def spin():
            while time.perf_counter() < stop:
                hashlib.sha256(block).digest()

        threads = [threading.Thread(target=spin, daemon=True) for _ in range(cores)]
        cpu0, t0 = time.process_time(), time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return (time.process_time() - cpu0) / ((time.perf_counter() - t0) * cores)

    shares = sorted(probe() for _ in range(samples))
    return max(MIN_SHARE, min(1.0, shares[len(shares) // 2]))


def calibration_path() -> Path:
    """``$XDG_CACHE_HOME/lazylab/calibration.json`` (``~/.cache/lazylab/calibration.json``)."""
    return cache_home() / "calibration.json"


def calibration(path: Path | None = None, force: bool = False, measure_now: bool = True) -> Calibration:
    """This machine's Calibration: read from ``path`` (``calibration_path()``), else measured and written there.

    Measured again when the file is missing, unusable (``read``: not a regular file, not JSON, a
    field of the wrong type or out of range) or ``valid_here()`` is false, when ``force`` is true
    or ``LAZYLAB_RECALIBRATE`` is set to anything but ``0``; an unusable file is first renamed
    ``<path>.bad`` (one over ``MAX_BYTES`` removed), with one note line on stderr naming the file and the field. With
    ``measure_now`` false it is never measured, and ``REFERENCE`` stands in for a missing or
    unusable one (left in place). A file that cannot be written is not an error (the next call
    measures again).
    Raises: LazylabError if the measurement itself fails.
    """
    path = Path(path) if path is not None else calibration_path()
    force = force or os.environ.get("LAZYLAB_RECALIBRATE", "0").strip() not in ("", "0")
    bad = None
    if not force or not measure_now:
        try:
            cal = read(path)
            if cal is not None and cal.valid_here():
                return cal
        except LazylabError as exc:
            bad = str(exc)
    if not measure_now:
        return REFERENCE
    if bad is not None:
        _set_aside(path, bad)
    cal = measure()
    try:
        save(cal, path)
    except OSError:
        pass
    return cal


MAX_BYTES = 64 * 2**10  # the file lazylab writes is under 1 KiB


def read(path: Path) -> Calibration | None:
    """The Calibration in the file ``path``, checked against ``lazylab.schemas.caches.CalibrationDoc``.

    Returns: None if there is no file (nothing at ``path``, not even a broken link).
    Raises: LazylabError (one line naming the file, and the field for a value out of its range)
      for a file that is not a regular file, cannot be read, is larger than ``MAX_BYTES`` (a valid
      document padded with fields lazylab never reads: read by every command, it would cost each one
      seconds), is not JSON, or fails the schema (a missing field, a string, null, NaN, Infinity or a
      negative time). ``calibration`` sets such a file aside and measures the machine again.
    """
    from lazylab.schemas import read_json, validate
    from lazylab.schemas.caches import CalibrationDoc

    if not os.path.lexists(path):
        return None
    what = "calibration file"
    doc = validate(CalibrationDoc, read_json(path, what, MAX_BYTES), f"{what} {path}")
    return Calibration(**doc.model_dump())


def _set_aside(path: Path, why: str) -> None:
    """Rename the unusable calibration file ``path`` to ``<path>.bad`` and say so on stderr in one line; a regular
    file over ``MAX_BYTES`` is removed instead (nothing lazylab wrote: kept, it would hold the disk for nothing)."""
    aside = path.with_name(path.name + ".bad")
    try:
        if path.is_file() and not path.is_symlink() and path.stat().st_size > MAX_BYTES:
            path.unlink()
            where = "removed"
        else:
            os.replace(path, aside)
            where = f"set aside as {aside}"
    except OSError as exc:  # the measurement below still replaces it if the folder is writable
        where = f"could not be set aside ({exc.strerror or exc})"
    # One note line on stderr, as the CLI prints the memo's problems; stdout may be --json -.
    click.echo(printable(f"note: {why}; {where}, measuring this machine again"), err=True)


def save(cal: Calibration, path: Path | None = None) -> Path:
    """Write ``cal`` to ``path`` (default ``calibration_path()``) atomically; returns the path.

    A test session can keep its commands from measuring by saving ``REFERENCE`` marked as this
    machine's (``dataclasses.replace(REFERENCE, code=code_identity(), cores=os.cpu_count())``).
    Raises: OSError if it cannot be written.
    """
    path = Path(path) if path is not None else calibration_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(asdict(cal), indent=1) + "\n")
    os.replace(tmp, path)
    return path


def measure() -> Calibration:
    """Measure a Calibration in a fresh process (``_measure``; 25-55 s on the 2-core machine).

    Raises: LazylabError naming the failure if the measuring process fails or a figure is out of
      its schema's range (``CalibrationDoc``).
    """
    t0, load = time.perf_counter(), os.getloadavg()[0]  # other work on the machine, before this adds its own
    proc = subprocess.run([sys.executable, "-m", "lazylab.calibration"], capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise LazylabError(f"measuring this machine for the estimate failed: {tail}")
    fields = json.loads(proc.stdout.strip().splitlines()[-1])
    cal = Calibration(**fields, cores=os.cpu_count() or 1, load=round(load, 2), code=code_identity(),
                      measured_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                      seconds=round(time.perf_counter() - t0, 1))
    # What is saved must read back: a value its schema refuses would be set aside and measured every time.
    from lazylab.schemas import validate
    from lazylab.schemas.caches import CalibrationDoc

    validate(CalibrationDoc, asdict(cal), "measuring this machine for the estimate gave an unusable figure")
    return cal


def _measure(repeats: int = 3) -> dict:
    """The measurements behind a Calibration, in this process (run by ``measure`` in a fresh one).

    Real ``fit_batch`` programs on random float32 images in [0, 1] (a Yat bank, the
    unit of most paper arms, or the first random-init unit loaded): a trained bank at
    m = 16 (on 60,000 images) and 1024 (on 4,096), a head on stored features
    ``(60000, m)`` at m = 64 and 1024, the bank's features at m = 1024, and a convex solve's
    evaluation (``_convex_evaluation_s``). Every time is this process's CPU time (``time.process_time``:
    all threads). A step's time is (3 epochs - 1 epoch) / 2 epochs'
    steps, the fastest of ``repeats`` of each, so the call's fixed costs cancel and a
    burst of other work on the machine counts as little as possible. Compilation is the
    first call minus a later one, cold (nothing cached) and again after
    ``jax.clear_caches()`` with jax's persistent cache holding the program (warm).
    """
    import tempfile

    import jax
    import numpy as np

    from lazylab.arms import registry
    from lazylab.model import build_model, features
    from lazylab.train import fit_batch

    tmp = tempfile.TemporaryDirectory()
    for name, value in {"jax_enable_compilation_cache": True, "jax_compilation_cache_dir": tmp.name,
                        "jax_persistent_cache_min_compile_time_secs": 0,
                        "jax_persistent_cache_min_entry_size_bytes": 0}.items():
        jax.config.update(name, value)
    def pick(trained: bool):
        """The yat arm of that mode (only yat is imported), else the first random-init arm of any unit."""
        try:
            return registry().arm(f"yat-{'trained' if trained else 'frozen'}")
        except LazylabError:
            return next(a for a in registry().arms().values() if a.trained == trained and a.init == "random")
    rng = np.random.default_rng(0)
    x = rng.random((60000, D), dtype=np.float32)
    y = rng.integers(0, CLASSES, 60000).astype(np.int32)
    small, large = 64, 1024

    def timed(f) -> float:
        t = time.process_time()
        f()
        return time.process_time() - t

    def step_time(models, xs, n, warm: bool = False) -> tuple[float, float, float]:
        """(cold compile s, warm compile s, s per step) of a 1-member fit_batch on ``n`` training rows."""
        run = lambda epochs: fit_batch(models, xs[:n], y[:n], xs[:BATCH], y[:BATCH], lrs=[0.01], seeds=[0],
                                       epochs=epochs, batch=BATCH)
        first = timed(lambda: run(1))
        ones, threes = [], []
        for _ in range(repeats):
            ones.append(timed(lambda: run(1)))
            threes.append(timed(lambda: run(3)))
        one = min(ones)
        cached = 0.0
        if warm:
            jax.clear_caches()
            cached = max(timed(lambda: run(1)) - one, 0.0)
        return max(first - one, 0.0), cached, max(min(threes) - one, 0.0) / 2 / (n // BATCH)

    # The per-step cost at a small width on every training image (the batch gathers from the
    # whole (60000, 784) array, as in a real run); the per-unit cost at a large width, where
    # the products dominate, on 16 batches (a full epoch there takes seconds).
    trained = pick(True)
    compile_s, warm_s, s_small = step_time([build_model(trained, 16, 0, x)], x, len(x), warm=True)
    _, _, s_large = step_time([build_model(trained, large, 0, x)], x, 16 * BATCH)
    frozen = pick(False)
    model = build_model(frozen, large, 0, x)
    feat_first = timed(lambda: jax.block_until_ready(features(model.feat, x[:8192])))
    feat_s = min(timed(lambda: jax.block_until_ready(features(model.feat, x[:8192]))) for _ in range(repeats))
    head = {}
    for m in (small, large):
        f = jax.device_put(rng.random((60000, m), dtype=np.float32))
        head[m] = step_time([build_model(frozen, m, 0, x[:1024]).head], f, 60000, warm=m == small)
        del f
    step_b = max(s_large - s_small, 0.0) / (large - 16)
    head_b = max(head[large][2] - head[small][2], 0.0) / (large - small)
    tmp.cleanup()
    eval_small, eval_large = (_convex_evaluation_s(rng, m, CONVEX_ROWS, repeats) for m in (small, 4 * small))
    if eval_small is None or eval_large is None:  # a solve stopped early: the development machine's figures
        eval_small = CONVEX_ROWS * (REFERENCE.convex_eval_a + REFERENCE.convex_eval_b * small)
        eval_large = CONVEX_ROWS * (REFERENCE.convex_eval_a + REFERENCE.convex_eval_b * 4 * small)
    convex_b = max(eval_large - eval_small, 0.0) / (3 * small * CONVEX_ROWS)
    return {"step_a": max(s_small - step_b * 16, 0.0), "step_b": step_b,
            "head_a": max(head[small][2] - head_b * small, 0.0), "head_b": head_b,
            "feature_s": feat_s / (8192 * large), "compile_s": compile_s, "warm_compile_s": warm_s,
            "frozen_compile_s": head[small][0] + max(feat_first - feat_s, 0.0), "warm_frozen_compile_s": head[small][1],
            "convex_eval_a": max(eval_small / CONVEX_ROWS - convex_b * small, 0.0), "convex_eval_b": convex_b}


CONVEX_ROWS = 60000  # images behind the convex evaluation's timing (_convex_evaluation_s): a cell's


def _convex_evaluation_s(rng, m: int, rows: int, repeats: int) -> float:
    """CPU seconds per evaluation of a convex solve (``experiments.convex_solve.solve``, L-BFGS-B with its whitening
    and thread pool as in a real readout) on ``rows x m`` random features with linearly separable labels (so the
    solve runs to its iteration cap): (a 30-iteration solve - a 10-iteration one) / their evaluations'
    difference, the fastest of ``repeats``, so the preconditioner cancels. None if no solve ran long enough."""
    import numpy as np

    from lazylab.experiments.convex_solve import preconditioner, solve

    F = rng.standard_normal((rows, m), dtype=np.float32)
    y = np.argmax(F @ rng.standard_normal((m, CLASSES), dtype=np.float32), axis=1)
    precond = preconditioner(F, rows)
    best = None
    for _ in range(repeats):
        runs = []
        for iterations in (10, 30):
            t = time.process_time()
            fit = solve(F, y, 1e-8, tol=0.0, max_iter=iterations, precond=precond)
            runs.append((time.process_time() - t, fit["evaluations"]))
        (t10, e10), (t30, e30) = runs
        if e30 > e10:
            each = max(t30 - t10, 0.0) / (e30 - e10)
            best = each if best is None else min(best, each)
    return best


if __name__ == "__main__":
    print(json.dumps(_measure()))
