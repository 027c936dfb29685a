"""Where missing runs are computed: in this process, or as tasks on a Ray cluster.

A backend takes groups of runs (``experiments.batch_groups``) and yields each
group with its records as it finishes; the caller (``Workspace.run_cells``, on
the driver) alone writes the memo. The caller also passes the function that
computes a group (``experiments.train_runs``, ``experiments.trajectory.trajectory_run``):
this module imports nothing from ``lazylab.experiments``, which imports it
(tests/test_imports.py keeps it so).
"""

from __future__ import annotations

import os
import socket
from typing import Iterator

import numpy as np

from lazylab.errors import LazylabError


class LocalBackend:
    """Computes each group in this process, one after the other."""

    name = "local"  # what estimates price (lazylab.estimate)

    def compute(self, ws, groups: list[tuple], reporter, train) -> Iterator[tuple[list, list[dict]]]:
        """Yield ``(group, records)`` for each ``(arm, group of RunConfig)`` in order.

        ``train(ws, arm, group, on_epoch)`` computes one group's records (the experiment passes
        ``experiments.train_runs``: a backend imports no experiment).
        """
        for arm, group in groups:
            for cfg in group:
                reporter.start(cfg)
            yield group, train(ws, arm, group, reporter.epoch)

    def trajectories(self, ws, items: list, reporter, run) -> Iterator[tuple[int, dict, np.ndarray]]:
        """Yield ``(i, record, snapshots)`` for each ``items[i] = (arm, TrajectoryConfig)`` in order.

        ``run(ws, arm, tcfg, on_epoch)`` computes one trajectory (the experiment passes
        ``experiments.trajectory.trajectory_run``).
        """
        for i, (arm, tcfg) in enumerate(items):
            reporter.start(tcfg.run)
            record, snaps = run(ws, arm, tcfg, lambda e, a, cfg=tcfg.run: reporter.epoch(cfg, e, a))
            yield i, record, snaps

    def close(self) -> None:
        """Nothing to release."""


# ------------------------------------------------------------------------ Ray
RAY_HINT = "pip install 'lazylab[ray]'"
# jax/XLA settings a worker takes from the driver's environment when set there.
FORWARDED_ENV = ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_ALLOCATOR",
                 "XLA_FLAGS", "JAX_PLATFORMS")
# Several tasks may share one GPU: by default none grabs 75 % of its memory up front.
DEFAULT_WORKER_ENV = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
# LAZYLAB_* paths name places on the driver's machine; a worker resolves its own (see WorkerWorkspace).
NOT_FORWARDED = ("LAZYLAB_DATA", "LAZYLAB_CACHE", "LAZYLAB_OUT")
WAIT_SECONDS = 0.5  # ray.wait slices, so that a Ctrl-C on the driver is seen promptly


def worker_env(environ=None) -> dict[str, str]:
    """Environment variables every Ray task runs with: jax memory settings and lazylab's plugin settings.

    ``XLA_PYTHON_CLIENT_PREALLOCATE`` defaults to ``"false"``; the other ``FORWARDED_ENV``
    names and every ``LAZYLAB_*`` setting (``LAZYLAB_ARMS``, ``LAZYLAB_STRICT_PLUGINS``, ...)
    but the paths in ``NOT_FORWARDED`` are copied from ``environ`` (default ``os.environ``) when set.
    """
    environ = os.environ if environ is None else environ
    env = dict(DEFAULT_WORKER_ENV)
    for name, value in environ.items():
        if name in FORWARDED_ENV or (name.startswith("LAZYLAB_") and name not in NOT_FORWARDED):
            env[name] = value
    return env


FROZEN_COST = 0.1  # a frozen run's time relative to a trained run of its width (paper run: 21 s vs 240 s at 8192)


def group_cost(arm, group: list) -> float:
    """Rough relative cost of training ``group`` (runs of ``arm`` of one shape): width x epochs x images x runs
    (a convex readout, which has no epochs, counts as a frozen run of its width)."""
    cfg = group[0]
    epochs = getattr(cfg, "epochs", 12)
    return cfg.width * epochs * cfg.train_size * len(group) * (1.0 if arm.trained else FROZEN_COST)


def ray_available() -> bool:
    """Whether ``import ray`` works here (Ray is the optional extra ``lazylab[ray]``)."""
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


class RayBackend:
    """Computes each group of runs (or each trajectory) as one Ray task; only the driver writes the memo.

    Every missing group is submitted at once and yielded as its task finishes, so the
    driver stores each group as it arrives. A task gets the arm's name and plugin, the
    runs as canonical JSON and the driver's data directory; it opens no memo (see
    ``WorkerWorkspace``) and checks that its data has the driver's fingerprint.
    (``name``: what estimates price, ``lazylab.estimate``.)

    Args:
      address: a running cluster (``"auto"``, ``"ray://head:10001"``, ``"head:6379"``); None starts
        a local instance on first use. If Ray is already initialised in this process it is reused.
      num_cpus, num_gpus: Ray resources each task claims (they bound how many tasks run at once
        on a node; jax itself still uses every core the task's process sees).
    Raises: LazylabError (one line) if Ray is not installed.
    """

    name = "ray"

    def __init__(self, address: str | None = None, num_cpus: float = 1.0, num_gpus: float = 0.0):
        # Connecting to a cluster, Ray's C++ core would print its retries (e.g. a refused token, once
        # a second) on stderr; it reads this when ray is first imported. Not for a local instance:
        # the setting itself makes Ray print a line saying so.
        if address is not None:
            os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "error")
        # A local instance would otherwise report usage statistics to Ray's servers on the user's behalf.
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        if not ray_available():
            raise LazylabError(f"--backend ray needs Ray, which is not installed: {RAY_HINT}")
        self.address = address
        self.num_cpus = num_cpus
        self.num_gpus = num_gpus
        self.env = worker_env()
        self.tasks = 0  # tasks submitted (0 on a fully memoized run: Ray is then not even started)
        self._started = False  # whether this backend started Ray (and so shuts it down)
        self._pending: dict = {}  # ObjectRef -> what it computes, until it is stored
        self._remotes: dict = {}

    def where(self) -> str:
        """Where tasks run, in words."""
        return f"the Ray cluster at {self.address}" if self.address else "a local Ray instance"

    def _ray(self):
        """The ``ray`` module, initialised (connecting or starting a local instance on first use)."""
        import logging
        import warnings

        import ray

        if not ray.is_initialized():
            _check_reachable(self.address)
            try:
                with warnings.catch_warnings():  # Ray Client warns before it raises: keep the error one line
                    warnings.simplefilter("ignore")
                    ray.init(address=self.address, include_dashboard=False if self.address is None else None,
                             log_to_driver=False, logging_level=logging.ERROR)
            except Exception as exc:  # ConnectionError, RuntimeError, ValueError, grpc errors: one line
                doing = f"connect to the Ray cluster at {self.address}" if self.address else "start a local Ray instance"
                raise LazylabError(f"cannot {doing}: {_one_line(exc)} (see docs/scaling.md)") from None
            self._started = True
        return ray

    def _submit(self, fn, what, *args):
        """Submit ``fn(*args)`` as a task; ``what`` comes back with its result from ``_as_done``."""
        ray = self._ray()
        if fn not in self._remotes:  # one RemoteFunction per function: Ray exports it once
            self._remotes[fn] = ray.remote(fn).options(num_cpus=self.num_cpus, num_gpus=self.num_gpus,
                                                       runtime_env={"env_vars": self.env})
        ref = self._remotes[fn].remote(*args)
        self._pending[ref] = what
        self.tasks += 1
        return ref

    def _as_done(self) -> Iterator[tuple[object, object]]:
        """Yield ``(what, result)`` of each pending task as it finishes; cancel the rest on any exit."""
        import ray

        try:
            while self._pending:
                ready, _ = ray.wait(list(self._pending), num_returns=1, timeout=WAIT_SECONDS)
                for ref in ready:
                    what = self._pending.pop(ref)
                    yield what, _get(ray, ref)
        finally:
            self.cancel()

    def compute(self, ws, groups: list[tuple], reporter, train) -> Iterator[tuple[list, list[dict]]]:
        """Yield ``(group, records)`` for each ``(arm, group of RunConfig)`` as its task finishes (any order).

        Each group runs ``train(ws, arm, group)`` (``experiments.train_runs``, or
        ``experiments.convex.convex_cells`` for convex readouts) in one task on a
        ``WorkerWorkspace``; ``train`` and the group's config class must be module-level, which Ray
        sends by reference (the worker imports them from its own lazylab).
        Tasks are submitted costliest first (``group_cost``), so the last tasks to
        finish are short ones and no worker idles long at the end.
        Raises: LazylabError (one line) for a worker whose data, plugin or lazylab differ
        from the driver's, or a task that failed; the exception a task raised otherwise.
        """
        data_dir = str(ws.data_dir)
        for arm, group in sorted(groups, key=lambda ag: -group_cost(*ag)):
            self._submit(_ray_train_runs, group, train, type(group[0]), arm.name, arm.plugin,
                         [c.canonical() for c in group], [c.key() for c in group], data_dir)
        yield from self._as_done()

    def trajectories(self, ws, items: list, reporter, run) -> Iterator[tuple[int, dict, np.ndarray]]:
        """Yield ``(i, record, snapshots)`` for each ``items[i] = (arm, TrajectoryConfig)`` as its task finishes.

        Each runs ``run(ws, arm, tcfg)`` (``experiments.trajectory.trajectory_run``, module-level, sent by
        reference) in one task; the worker rebuilds ``tcfg`` with its own class of the same name
        (``type(tcfg)``, sent by reference too) and checks its key. ``snapshots`` is float32
        ``(E + 1, snapshots, d)``. Raises as ``compute``.
        """
        data_dir = str(ws.data_dir)
        for i, (arm, tcfg) in enumerate(items):
            reporter.start(tcfg.run)
            self._submit(_ray_trajectory, i, run, type(tcfg), arm.name, arm.plugin, tcfg.run.canonical(), tcfg.snapshots,
                         tcfg.key(), data_dir)
        for i, (record, snaps) in self._as_done():
            yield i, record, np.array(snaps)  # a writable copy of the object store's read-only array

    def cancel(self) -> None:
        """Cancel every task not yet returned (their results are dropped; stored ones stay in the memo)."""
        if self._pending:
            import ray

            for ref in self._pending:
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # already finished, or its worker already gone
                    pass
            self._pending.clear()

    def close(self) -> None:
        """Cancel what is pending and shut Ray down if this backend started it."""
        self.cancel()
        if self._started:
            import ray

            ray.shutdown()
            self._started = False


CONNECT_TIMEOUT_S = 10.0


def _check_reachable(address: str | None) -> None:
    """Refuse a ``HOST:PORT`` cluster address that does not accept a TCP connection.

    ``ray.init`` retries such an address for as long as Ray's GCS reconnect timeout
    allows (over ten minutes, printing a warning every few seconds); a plain socket
    answers within ``CONNECT_TIMEOUT_S``. ``auto``, ``ray://`` (Ray Client has its
    own timeout) and None (a local instance) are left to Ray.
    Raises: LazylabError (one line) if the address is malformed or unreachable.
    """
    if address is None or address == "auto" or address.startswith("ray://"):
        return
    host, _, port = address.rpartition(":")
    try:
        if not host or not port.isdigit():
            raise ValueError("not HOST:PORT")
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except (OSError, ValueError) as exc:
        raise LazylabError(f"cannot connect to the Ray cluster at {address}: {_one_line(exc)} "
                           "(expected HOST:PORT of a running head node, auto, or ray://HOST:10001; "
                           "see docs/scaling.md)") from None


def _one_line(exc: BaseException, limit: int = 400) -> str:
    """``exc``'s message on one line (Ray's often span several), cut to ``limit`` characters."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _get(ray, ref):
    """``ray.get(ref)``; a task's own exception is re-raised as itself, Ray's failures as one LazylabError line."""
    from ray.exceptions import RayError, RayTaskError

    try:
        return ray.get(ref)
    except RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, Exception):
            raise cause from None
        raise LazylabError(f"a Ray task failed: {_one_line(exc)}") from None
    except RayError as exc:  # a worker or node died, out of memory, cancelled
        raise LazylabError(f"a Ray task failed: {type(exc).__name__}: {_one_line(exc)}") from None


# -------------------------------------------------------------- on the worker
class WorkerWorkspace:
    """What ``train_runs`` and ``trajectory_run`` need on a Ray worker: the data, and bank features in memory.

    No memo: a worker neither reads nor writes the driver's cache. The data is the driver's
    directory if this node has it there, else this node's own (``LAZYLAB_DATA`` or the Debian
    package); either way its fingerprint must equal the driver's (``check``).

    Raises: DataError (one line, naming the node) if neither holds Fashion-MNIST.
    """

    def __init__(self, driver_dir: str):
        from lazylab import data as fmnist
        from lazylab.errors import DataError

        try:
            self.data_dir = fmnist.locate(driver_dir)
        except DataError:
            try:
                self.data_dir = fmnist.locate(None)
            except DataError as exc:
                raise DataError(f"Ray worker on {socket.gethostname()}: Fashion-MNIST is not at the driver's "
                                f"{driver_dir} nor found here ({exc})") from None
        self.data = fmnist.load(self.data_dir)
        self.fingerprint = self.data.fingerprint
        self._features: tuple[tuple, tuple] | None = None  # (bank, features): one bank, reused across rates

    def check(self, fingerprint: str) -> None:
        """Raise LazylabError unless this node's data is the driver's (``fingerprint``, ``RunConfig.data``)."""
        if fingerprint != self.fingerprint:
            raise LazylabError(f"Ray worker on {socket.gethostname()}: Fashion-MNIST at {self.data_dir} has fingerprint "
                               f"{self.fingerprint}, the driver's has {fingerprint}; install the same files on every "
                               "node (or point LAZYLAB_DATA there to them)")

    def bank_features(self, arm, cfg, model) -> tuple:
        """Train ``(train_size, m)`` and test ``(n_test, m)`` float32 features of ``model.feat`` (as ``Workspace.bank_features``)."""
        import jax

        from lazylab.model import features

        bank = (arm.name, arm.plugin, cfg.width, cfg.seed, cfg.fan_in, cfg.train_size, cfg.data)
        if self._features is None or self._features[0] != bank:
            self._features = None
            pair = jax.block_until_ready((features(model.feat, self.data.x_train[: cfg.train_size]),
                                          features(model.feat, self.data.x_test)))
            self._features = (bank, pair)
        return self._features[1]


_WORKER_WORKSPACES: dict[str, WorkerWorkspace] = {}  # per worker process: the data is loaded once


def _worker_setup(arm_name: str, plugin: str, driver_dir: str):
    """The arm and workspace of a task, checked against the driver's plugin."""
    from lazylab import xla_cache
    from lazylab.arms import get_arm

    xla_cache.enable()
    host = socket.gethostname()
    try:
        arm = get_arm(arm_name)
    except LazylabError as exc:
        raise LazylabError(f"Ray worker on {host}: {exc} (install the same plugins on every node)") from None
    if arm.plugin != plugin:
        raise LazylabError(f"Ray worker on {host}: {arm_name} comes from {arm.plugin} here but from {plugin} on the "
                           "driver; install the same lazylab and plugins on every node")
    if driver_dir not in _WORKER_WORKSPACES:
        _WORKER_WORKSPACES[driver_dir] = WorkerWorkspace(driver_dir)
    return arm, _WORKER_WORKSPACES[driver_dir]


def _version_mismatch(what: str) -> str:
    return (f"Ray worker on {socket.gethostname()}: its lazylab reads {what} configurations differently from the "
            "driver's; install the same lazylab version on every node")


def _run_config(canonical: str, key: str | None, config_type=None):
    """The driver's config (``config_type``, default ``RunConfig``) rebuilt from its canonical JSON, refused
    unless it has the driver's ``key`` (if given)."""
    import json

    from lazylab.config import RunConfig

    config_type = config_type or RunConfig
    try:
        cfg = config_type(**json.loads(canonical))
    except TypeError:  # a field this lazylab does not know
        raise LazylabError(_version_mismatch("run")) from None
    if key is not None and cfg.key() != key:
        raise LazylabError(_version_mismatch("run"))
    return cfg


def _ray_train_runs(train, config_type, arm_name: str, plugin: str, canonicals: list[str], keys: list[str],
                    driver_dir: str) -> list[dict]:
    """Ray task: ``train(ws, arm, cfgs)`` (``experiments.train_runs``, ``experiments.convex.convex_cells``) of one
    group of ``config_type`` configs, on this worker's data; the records go back to the driver."""
    arm, ws = _worker_setup(arm_name, plugin, driver_dir)
    cfgs = [_run_config(c, k, config_type) for c, k in zip(canonicals, keys)]
    for cfg in cfgs:
        ws.check(cfg.data)
    return train(ws, arm, cfgs)


def _ray_trajectory(run, config_type, arm_name: str, plugin: str, canonical: str, snapshots: int, key: str,
                    driver_dir: str) -> tuple[dict, np.ndarray]:
    """Ray task: one ``run(ws, arm, tcfg)`` (``experiments.trajectory.trajectory_run``) with
    ``tcfg = config_type(RunConfig, snapshots)`` (``TrajectoryConfig``), refused unless it has the driver's
    ``key``; its record and snapshots go back to the driver."""
    arm, ws = _worker_setup(arm_name, plugin, driver_dir)
    cfg = _run_config(canonical, None)
    tcfg = config_type(cfg, snapshots)
    if tcfg.key() != key:
        raise LazylabError(_version_mismatch("trajectory"))
    ws.check(cfg.data)
    return run(ws, arm, tcfg)
