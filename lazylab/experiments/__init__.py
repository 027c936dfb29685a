"""Experiments: config in, records out, no printing (DESIGN.md).

``Workspace`` holds what every experiment shares — the memo and a lazily
loaded dataset — and ``run_cell`` is the one way a training run is computed
or fetched from the memo.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import numpy as np

from lazylab import data as fmnist
from lazylab.arms import Arm
from lazylab.backends import LocalBackend
from lazylab.cache import Memo
from lazylab.config import RunConfig


class Reporter:
    """Progress hooks an experiment calls; the CLI renders them. The default does nothing."""

    def plan(self, total: int) -> None: ...

    def more(self, n: int) -> None:
        """``n`` runs beyond the plan (a rate bracket's grid extension, ``lazylab.bracket``)."""

    def start(self, cfg: RunConfig) -> None: ...

    def epoch(self, cfg: RunConfig, epoch: int, acc: float) -> None: ...

    def done(self, cfg: RunConfig, record: dict, cached: bool) -> None: ...


class Workspace:
    """The memo plus Fashion-MNIST, loaded only when something must be computed.

    Args:
      data_dir: explicit data directory (else ``LAZYLAB_DATA``, else the Debian package's).
      cache_dir: memo directory (else ``lazylab.cache.default_dir()``: ``$LAZYLAB_CACHE``, else ``~/.cache/lazylab/memo``).
      cache_limit: cap in bytes on the memo's feature store (None: ``lazylab.cache.DEFAULT_CACHE_LIMIT``,
        8 GiB; 0 stores no features). Run records are never evicted.
    Raises: DataError if the data cannot be located; LazylabError if the memo cannot be opened.
    """

    def __init__(self, data_dir: str | Path | None = None, cache_dir: str | Path | None = None,
                 cache_limit: int | None = None):
        self.memo = Memo(cache_dir, feature_limit=cache_limit)
        self.data_dir = fmnist.locate(data_dir)
        self.fingerprint = fmnist.fingerprint(self.data_dir)
        self._data: fmnist.FashionMNIST | None = None
        self._features: tuple[str, tuple] | None = None  # (feature key, features) of one bank, reused across rates
        # Memo-only mode (``lazylab ladder --report``): nothing is trained; a cell
        # missing from the memo is listed in ``missing`` and stands in as a placeholder.
        self.memo_only = False
        self.missing: list[str] = []
        self.backend = LocalBackend()  # where missing runs are computed (lazylab.backends)
        # Arms whose unit produced non-finite numbers (arm name -> one-line UnitFailure message):
        # their remaining runs are skipped, never stored, and the command exits 2 after the others.
        self.failures: dict[str, str] = {}
        self._stale_noted = False  # the memo's entries by other code are mentioned once

    @property
    def data(self) -> fmnist.FashionMNIST:
        if self._data is None:
            self._data = fmnist.load(self.data_dir, cache_dir=self.memo.directory, problems=self.memo.problems)
        return self._data

    def config(self, arm: Arm, width: int, seed: int, lr: float, **protocol) -> RunConfig:
        """The canonical run configuration for ``arm`` on this workspace's data."""
        return RunConfig(arm=arm.name, plugin=arm.plugin, width=width, seed=seed, lr=lr, data=self.fingerprint, **protocol)

    def run_cell(self, arm: Arm, cfg: RunConfig, reporter: Reporter = Reporter()) -> dict:
        """The record of one training run, from the memo or computed and stored."""
        return self.run_cells([(arm, cfg)], reporter)[0]

    def run_cells(self, cells: list[tuple[Arm, RunConfig]], reporter: Reporter = Reporter()) -> list[dict]:
        """Records of several runs, each ``(arm, cfg)``, in order: from the memo, or computed and stored.

        The missing runs are grouped per arm by ``batch_groups`` (the seeds of a cell,
        the rates of a bracket) and all groups, of every arm, go to ``self.backend`` at
        once (a concurrent backend keeps every worker busy); each record is stored, then
        reported, as its group finishes. A record has the same bits whatever its group
        (each member of a ``fit_batch`` program computes what it computes alone), so a
        resumed or recomputed run matches the first one.
        """
        todo: dict[str, tuple[Arm, list[RunConfig]]] = {}  # by arm name: that arm's missing runs
        found: dict[str, dict] = {}
        seen: set[str] = set()
        for arm, cfg in cells:
            key = cfg.key()
            if key in seen:  # one run asked for twice (a bracket run that is also a ladder cell)
                continue
            seen.add(key)
            record = self._memo_record(cfg)
            if record is not None:
                found[key] = record
                reporter.done(cfg, record, cached=True)
            elif self.memo_only:
                self.missing.append(key)
                found[key] = missing_record(cfg)
            else:
                todo.setdefault(arm.name, (arm, []))[1].append(cfg)
        from lazylab.vetting import mark

        for arm in {arm.name: arm for arm, _ in cells}.values():  # refused or announced before any run, memo or not
            self.vet(arm)
        groups = [(arm, group) for arm, cfgs in todo.values() for group in batch_groups(arm, cfgs)]
        if groups and not self._stale_noted:
            # Say once why runs a user thinks are stored are computed again.
            self._stale_noted = True
            from lazylab.runs import superseded_note

            for note in (self.memo.stale_note(), superseded_note(self.memo, list(todo.values()))):
                if note:
                    self.memo.problems.append(note)
        for group, records in self.backend.compute(self, groups, reporter, train_runs):
            for cfg, record in zip(group, records):
                if record.get("failed"):  # a unit failure is not a result: never stored
                    self.failures.setdefault(cfg.arm, record["failed"])
                    found[cfg.key()] = record
                    continue
                record = mark(record, todo[cfg.arm][0])  # a unit that failed its checks: said in the record
                self.memo.put_record(cfg.key(), record)
                found[cfg.key()] = record
                reporter.done(cfg, record, cached=False)
        return [found[cfg.key()] for _, cfg in cells]

    def vet(self, arm: Arm) -> None:
        """``lazylab.vetting.vet`` on the test images of this workspace's data (its training images if the
        test images cannot be read). Raises: as ``vet``."""
        from lazylab.vetting import check_images, vet

        vet(arm, lambda: check_images(self.data_dir, self.data.x_train))

    def _memo_record(self, cfg: RunConfig) -> dict | None:
        """The stored record of ``cfg``, or None (absent, corrupt, or written for another configuration)."""
        record = self.memo.get_record(cfg.key())
        if record is not None and (not isinstance(record, dict) or record.get("config") != json_config(cfg)):
            # A sealed entry written for another configuration (an older cache schema, a
            # hand-copied memo): never misread it, recompute and overwrite it.
            stored = record.get("config") if isinstance(record, dict) else None
            schema = stored.get("schema") if isinstance(stored, dict) else None
            code = stored.get("code") if isinstance(stored, dict) else None
            self.memo.problems.append(f"memo entry {cfg.key()} was written for another configuration "
                                      f"(cache schema {schema}, code {code}; expected {cfg.schema}, {cfg.code}); "
                                      "recomputing")
            record = None
        return record

    def bank_features(self, arm: Arm, cfg: RunConfig, model) -> tuple:
        """Train ``(train_size, m)`` and test ``(n_test, m)`` float32 features of a frozen bank, as jax arrays.

        Kept in memory for the next rate of a bracket; across processes, kept in the
        memo's feature store when ``lazylab.cache.worth_storing`` says loading them back
        beats recomputing them (the policy, measured in docs/performance.md). The entry's
        key holds everything that determines the features: unit, plugin, init, width,
        seed, fan-in, training-set size and data fingerprint. ``model.feat`` is the bank
        (unused when the features come from the store).
        """
        import jax

        from lazylab.arms import UnitFailure
        from lazylab.cache import worth_storing
        from lazylab.config import CACHE_SCHEMA, memo_key
        from lazylab.model import features

        key = memo_key("bankfeat", {"kind": "bank-features", "unit": arm.unit.name, "plugin": arm.plugin,
                                    "init": arm.init, "width": cfg.width, "seed": cfg.seed, "fan_in": cfg.fan_in,
                                    "train_size": cfg.train_size, "data": cfg.data, "schema": CACHE_SCHEMA})
        if self._features is None or self._features[0] != key:
            self._features = None  # free the old bank's features first
            d = self.data
            shapes = {"train": (cfg.train_size, cfg.width), "test": (len(d.y_test), cfg.width)}
            stored = self.memo.get_features(key)
            if stored is not None and {k: (a.shape, a.dtype) for k, a in stored.items()} != \
                    {k: (s, np.dtype(np.float32)) for k, s in shapes.items()}:
                self.memo.problems.append(f"feature entry {key} holds other shapes; recomputing")
                stored = None
            if stored is not None:
                # may_alias: on CPU jax adopts the freshly read (64-byte aligned) arrays instead of copying them.
                pair = (jax.device_put(stored.pop("train"), may_alias=True),
                        jax.device_put(stored.pop("test"), may_alias=True))
            else:
                t0 = time.perf_counter()
                pair = jax.block_until_ready((features(model.feat, d.x_train[: cfg.train_size]),
                                              features(model.feat, d.x_test)))
                for split, f in zip(("training", "test"), pair):  # where a unit's NaN appears (never stored)
                    if not bool(jax.numpy.isfinite(f).all()):
                        raise UnitFailure(arm, f"{arm.name} m={cfg.width} seed {cfg.seed}",
                                          f"non-finite features on the {split} images")
                # Compile time included: a recomputation in a later process pays it too.
                if worth_storing(time.perf_counter() - t0, sum(f.nbytes for f in pair), self.memo.feature_limit):
                    self.memo.put_features(key, {"train": pair[0], "test": pair[1]})
            self._features = (key, pair)
        return self._features[1]


def movement(W0: np.ndarray, W1: np.ndarray) -> dict:
    """Prototype movement (SPEC section 6).

    Args: ``W0``, ``W1``: prototypes ``(m, d)`` at initialisation and after training.
    Returns: ``w_move_rel = ||W1 - W0||_F / ||W0||_F`` and the median and max of the
    per-unit relative travel ``||w1_j - w0_j|| / ||w0_j||`` (dimensionless).
    """
    W0 = np.asarray(W0, np.float64)
    W1 = np.asarray(W1, np.float64)
    per_unit = np.linalg.norm(W1 - W0, axis=1) / np.maximum(np.linalg.norm(W0, axis=1), 1e-30)
    # Not np.linalg.norm of the matrix: its BLAS dot sums in an order that depends on the
    # BLAS thread count, so a Ray worker (one thread) and the driver would differ in the last bit.
    return {
        "w_move_rel": float(np.sqrt(np.sum(np.square(W1 - W0))) / np.sqrt(np.sum(np.square(W0)))),
        "unit_median": float(np.median(per_unit)),
        "unit_max": float(np.max(per_unit)),
    }


# Trained runs up to this width train in groups of at most BATCH_MEMBERS, one
# program per group (train.fit_batch): batching pays there on this 2-core CPU
# (bench/vmap_seeds.py, docs/performance.md); a wider step already keeps both
# cores busy. Heads on stored features train alone: their programs run 1.2-1.6x
# faster batched, but a ladder of them measured no faster (its 3-member programs
# compile longer). A member's bits are its run's alone, so a group's make-up
# never changes a record.
BATCH_MAX_WIDTH = 256
BATCH_MEMBERS = 3  # a trained arm's bracket grid, or a cell's seeds


def batched(arm: Arm, width: int) -> bool:
    """Whether runs of ``arm`` at ``width`` train in groups (``train_runs``)."""
    return arm.trained and width <= BATCH_MAX_WIDTH


def batch_groups(arm: Arm, cfgs: list[RunConfig]) -> list[list[RunConfig]]:
    """Split runs of ``arm`` into groups that train as one program (``train.fit_batch``).

    Runs group together when ``batched(arm, width)`` and they differ only in seed and
    rate; a group holds at most ``BATCH_MEMBERS`` runs; every other run is a group of
    its own. Order within and across groups follows ``cfgs``.
    """
    groups: dict[RunConfig, list[RunConfig]] = {}
    for cfg in cfgs:
        shape = dataclasses.replace(cfg, seed=0, lr=0.0) if batched(arm, cfg.width) else cfg
        groups.setdefault(shape, []).append(cfg)
    return [g[i : i + BATCH_MEMBERS] for g in groups.values() for i in range(0, len(g), BATCH_MEMBERS)]


def train_runs(ws: Workspace, arm: Arm, cfgs: list[RunConfig], on_epoch=None) -> list[dict]:
    """Train runs of ``arm`` that share a shape (one ``batch_groups`` group) per SPEC section 5.

    Frozen arms train only the head, on features computed once per bank (the same
    experiment as step-by-step training; see tests). Trained arms train every
    parameter. The runs train together as one program (``fit_batch``). A unit
    whose bank or features are not finite (``lazylab.arms.UnitFailure``) gets
    ``failed_record``s instead, and is recorded in ``ws.failures``.

    Args:
      ws: the workspace (data and bank features).
      arm: the arm every run belongs to.
      cfgs: runs differing only in seed and rate.
      on_epoch: called as ``on_epoch(cfg, epoch, test_acc)`` after each epoch of each run.
    Returns: one JSON-serialisable record per run, in order; ``seconds`` is the
      group's wall time divided among its runs (the one field that depends on the
      group: every other field is the run's alone, docs/reliability.md).
    """
    from flax import nnx

    from lazylab.arms import UnitFailure
    from lazylab.model import bank_scalars, build_model
    from lazylab.train import fit_batch

    # A Ray worker's workspace has no ``failures``: its failed records reach the driver's.
    failures = getattr(ws, "failures", {})

    def failed(exc: UnitFailure) -> list[dict]:
        failures.setdefault(arm.name, str(exc))
        return [failed_record(c, failures[arm.name]) for c in cfgs]

    t0 = time.perf_counter()
    first = cfgs[0]
    if arm.name in failures:  # the arm's unit already failed in this process: skip its remaining runs
        return [failed_record(c, failures[arm.name]) for c in cfgs]
    d = ws.data.subset(train_size=first.train_size)
    try:
        models = {c: build_model(arm, c.width, c.seed, d.x_train, c.fan_in) for c in cfgs}
    except UnitFailure as exc:
        return failed(exc)
    W0 = {c: np.array(model.feat.W[...]) for c, model in models.items()}
    scalars0 = {c: bank_scalars(model.feat) for c, model in models.items()}
    protocol = dict(lrs=[c.lr for c in cfgs], seeds=[c.seed for c in cfgs], epochs=first.epochs,
                    batch=first.batch, weight_decay=first.weight_decay,
                    on_epoch=(lambda i, e, a: on_epoch(cfgs[i], e, a)) if on_epoch else None)
    if arm.trained:
        results = fit_batch([models[c] for c in cfgs], d.x_train, d.y_train, d.x_test, d.y_test, **protocol)
    else:
        try:
            feats = [ws.bank_features(arm, c, models[c]) for c in cfgs]  # each run has its own bank
        except UnitFailure as exc:
            return failed(exc)
        results = fit_batch([models[c].head for c in cfgs], [f[0] for f in feats], d.y_train,
                            [f[1] for f in feats], d.y_test, **protocol)
        del feats
    seconds = round((time.perf_counter() - t0) / len(cfgs), 3)
    records = []
    for cfg, res in zip(cfgs, results):
        model, w0, s0 = models[cfg], W0[cfg], scalars0[cfg]
        nnx.update(model if arm.trained else model.head, res.trainable)
        records.append({
            "key": cfg.key(),
            "config": json_config(cfg),
            "best_acc": res.best_acc,
            "final_acc": res.final_acc,
            "best_epoch": (int(np.argmax(res.curve)) + 1) if res.best_acc is not None else None,
            "curve": res.curve,
            "train_loss": res.train_loss,
            "diverged": res.diverged,
            "scalars": {"start": s0, "end": None if res.diverged else bank_scalars(model.feat)},
            "movement": None if res.diverged else movement(w0, np.asarray(model.feat.W[...])),
            "seconds": seconds,
        })
    return records


def missing_record(cfg: RunConfig) -> dict:
    """The stand-in for a run not in the memo (memo-only mode): no accuracy, not diverged, ``missing`` set."""
    return {"key": cfg.key(), "config": json_config(cfg), "best_acc": None, "final_acc": None, "best_epoch": None,
            "curve": [], "train_loss": [], "diverged": None, "scalars": None, "movement": None, "seconds": 0.0,
            "missing": True}


def failed_record(cfg: RunConfig, message: str) -> dict:
    """The stand-in for a run whose unit failed (``UnitFailure``): no accuracy, ``failed`` holds the one-line reason."""
    return {**missing_record(cfg), "missing": False, "failed": message}


def json_config(cfg: RunConfig) -> dict:
    """The config as a plain dict (the exact inputs behind a record)."""
    return json.loads(cfg.canonical())
