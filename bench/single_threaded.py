"""Run a function in one single-threaded jax process per core, all at once, as the Ray backend's tasks run."""

from __future__ import annotations

import multiprocessing
import os


def run_at_once(target, args: tuple, processes: int, results_each: int) -> list:
    """Start ``processes`` spawned processes running ``target(*args, barrier, results)`` and collect their results.

    Each child's XLA runs on one thread (``lazylab.backends.cpu_thread_flags(1)``); ``barrier``
    (a ``multiprocessing.Barrier`` of ``processes``) lets them start each measurement together.
    Returns: the ``processes * results_each`` items the children put on ``results``, in arrival order.
    """
    from lazylab.backends import cpu_thread_flags

    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(processes), ctx.Queue()
    saved = os.environ.get("XLA_FLAGS")
    os.environ["XLA_FLAGS"] = cpu_thread_flags(1)  # read by each spawned child's jax
    try:
        procs = [ctx.Process(target=target, args=(*args, barrier, results)) for _ in range(processes)]
        for p in procs:
            p.start()
        got = [results.get() for _ in range(processes * results_each)]
        for p in procs:
            p.join()
    finally:
        if saved is None:
            del os.environ["XLA_FLAGS"]
        else:
            os.environ["XLA_FLAGS"] = saved
    return got
