"""Experiments: config in, records out, no printing (DESIGN.md).

``Workspace`` holds what every experiment shares — the memo and a lazily
loaded dataset — and ``run_cell`` is the one way a training run is computed
or fetched from the memo.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from lazylab import data as fmnist
from lazylab.arms import Arm
from lazylab.cache import Memo
from lazylab.config import RunConfig


class Reporter:
    """Progress hooks an experiment calls; the CLI renders them. The default does nothing."""

    def plan(self, total: int) -> None: ...

    def start(self, cfg: RunConfig) -> None: ...

    def epoch(self, cfg: RunConfig, epoch: int, acc: float) -> None: ...

    def done(self, cfg: RunConfig, record: dict, cached: bool) -> None: ...


class Workspace:
    """The memo plus Fashion-MNIST, loaded only when something must be computed.

    Args:
      data_dir: explicit data directory (else ``LAZYLAB_DATA``, else the Debian package's).
      cache_dir: memo directory (else ``LAZYLAB_CACHE``, else ``./cache``).
    Raises: DataError if the data cannot be located; LazylabError if the memo cannot be opened.
    """

    def __init__(self, data_dir: str | Path | None = None, cache_dir: str | Path | None = None):
        self.memo = Memo(cache_dir)
        self.data_dir = fmnist.locate(data_dir)
        self.fingerprint = fmnist.fingerprint(self.data_dir, cache_dir=self.memo.directory)
        self._data: fmnist.FashionMNIST | None = None
        self._features: tuple[tuple, tuple] | None = None  # one bank's features, reused across rates
        # Memo-only mode (``lazylab ladder --report``): nothing is trained; a cell
        # missing from the memo is listed in ``missing`` and stands in as a placeholder.
        self.memo_only = False
        self.missing: list[str] = []

    @property
    def data(self) -> fmnist.FashionMNIST:
        if self._data is None:
            self._data = fmnist.load(self.data_dir, cache_dir=self.memo.directory)
        return self._data

    def config(self, arm: Arm, width: int, seed: int, lr: float, **protocol) -> RunConfig:
        """The canonical run configuration for ``arm`` on this workspace's data."""
        return RunConfig(arm=arm.name, plugin=arm.plugin, width=width, seed=seed, lr=lr, data=self.fingerprint, **protocol)

    def run_cell(self, arm: Arm, cfg: RunConfig, reporter: Reporter = Reporter()) -> dict:
        """The record of one training run, from the memo or computed and stored."""
        record = self.memo.get_record(cfg.key())
        if record is not None and (not isinstance(record, dict) or record.get("config") != json_config(cfg)):
            # A sealed entry written for another configuration (an older cache schema, a
            # hand-copied memo): never misread it, recompute and overwrite it.
            stored = record.get("config") if isinstance(record, dict) else None
            schema = stored.get("schema") if isinstance(stored, dict) else None
            self.memo.problems.append(f"memo entry {cfg.key()} was written for another configuration "
                                      f"(cache schema {schema}, expected {cfg.schema}); recomputing")
            record = None
        if record is not None:
            reporter.done(cfg, record, cached=True)
            return record
        if self.memo_only:
            self.missing.append(cfg.key())
            return missing_record(cfg)
        reporter.start(cfg)
        record = train_run(self, arm, cfg, lambda e, a: reporter.epoch(cfg, e, a))
        self.memo.put_record(cfg.key(), record)
        reporter.done(cfg, record, cached=False)
        return record

    def bank_features(self, arm: Arm, cfg: RunConfig, model) -> tuple:
        """Train and test features of a frozen bank, kept in memory for the next rate of a bracket."""
        from lazylab.model import features

        ident = (arm.unit.name, arm.init, arm.distribution, cfg.width, cfg.seed, cfg.fan_in, cfg.train_size)
        if self._features is None or self._features[0] != ident:
            self._features = None  # free the old bank's features first
            d = self.data
            self._features = (ident, (features(model.feat, d.x_train[: cfg.train_size]), features(model.feat, d.x_test)))
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
    return {
        "w_move_rel": float(np.linalg.norm(W1 - W0) / np.linalg.norm(W0)),
        "unit_median": float(np.median(per_unit)),
        "unit_max": float(np.max(per_unit)),
    }


def train_run(ws: Workspace, arm: Arm, cfg: RunConfig, on_epoch=None) -> dict:
    """Train one arm per SPEC section 5 and return its JSON-serialisable record.

    Frozen arms train only the head, on features computed once from the bank
    (the same experiment as step-by-step training; see tests). Trained arms
    train every parameter.
    """
    from flax import nnx

    from lazylab.model import bank_scalars, build_model
    from lazylab.train import fit

    t0 = time.perf_counter()
    d = ws.data.subset(train_size=cfg.train_size)
    model = build_model(arm, cfg.width, cfg.seed, d.x_train, cfg.fan_in)
    W0 = np.array(model.feat.W[...])
    scalars0 = bank_scalars(model.feat)
    protocol = dict(lr=cfg.lr, epochs=cfg.epochs, batch=cfg.batch, seed=cfg.seed, weight_decay=cfg.weight_decay, on_epoch=on_epoch)
    if arm.trained:
        res = fit(model, d.x_train, d.y_train, d.x_test, d.y_test, **protocol)
        nnx.update(model, res.trainable)
    else:
        f_train, f_test = ws.bank_features(arm, cfg, model)
        res = fit(model.head, f_train, d.y_train, f_test, d.y_test, **protocol)
        nnx.update(model.head, res.trainable)
    record = {
        "key": cfg.key(),
        "config": json_config(cfg),
        "best_acc": res.best_acc,
        "final_acc": res.final_acc,
        "best_epoch": (int(np.argmax(res.curve)) + 1) if res.best_acc is not None else None,
        "curve": res.curve,
        "train_loss": res.train_loss,
        "diverged": res.diverged,
        "scalars": {"start": scalars0, "end": None if res.diverged else bank_scalars(model.feat)},
        "movement": None if res.diverged else movement(W0, np.asarray(model.feat.W[...])),
        "seconds": round(time.perf_counter() - t0, 3),
    }
    return record


def missing_record(cfg: RunConfig) -> dict:
    """The stand-in for a run not in the memo (memo-only mode): no accuracy, not diverged, ``missing`` set."""
    return {"key": cfg.key(), "config": json_config(cfg), "best_acc": None, "final_acc": None, "best_epoch": None,
            "curve": [], "train_loss": [], "diverged": None, "scalars": None, "movement": None, "seconds": 0.0,
            "missing": True}


def json_config(cfg: RunConfig) -> dict:
    """The config as a plain dict (the exact inputs behind a record)."""
    return json.loads(cfg.canonical())
