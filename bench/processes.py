"""Run a function in one process per core, all at once, as the Ray backend's tasks run on one machine."""

from __future__ import annotations

import multiprocessing


def run_at_once(target, args: tuple, processes: int, results_each: int) -> list:
    """Start ``processes`` spawned processes running ``target(*args, barrier, results)`` and collect their results.

    Each child's jax is free to use every core (as a Ray task's is); ``barrier`` (a
    ``multiprocessing.Barrier`` of ``processes``) lets them start each measurement together.
    Returns: the ``processes * results_each`` items the children put on ``results``, in arrival order.
    """
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(processes), ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args, barrier, results)) for _ in range(processes)]
    for p in procs:
        p.start()
    got = [results.get() for _ in range(processes * results_each)]
    for p in procs:
        p.join()
    return got
