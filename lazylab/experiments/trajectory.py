"""Prototype trajectories (SPEC section 7, ``trajectory``): watch trained prototypes travel.

Each trained arm is trained once per SPEC section 5 (default m = 64, 24
epochs, the full training set) and, at initialisation and after every epoch,
the experiment records

* the first ``snapshots`` prototypes ``w_t`` (float32, exactly as trained),
* the per-unit relative travel ``||w_t - w_0|| / ||w_0||`` over *all* ``m``
  units, summarised by its median and maximum, and the whole-bank
  ``||W_t - W_0||_F / ||W_0||_F`` (SPEC section 6, "Movement"),
* the test accuracy (%) — at epoch 0 that of the untrained model (chance
  level, about 10 %) — and the learned layer scalars (e.g. Yat's ``b``,
  ``eps``; the Gaussian's ``sigma``).

The learning rate is the ladder's bracketed rate unless one is given: each
arm runs its grid at m = 256, seed 0, 12 epochs (SPEC section 5) and keeps the
rate with the highest ``best_acc``. Those bracket runs are ordinary memoized
runs with the ladder's configs, so a ladder that already bracketed the arm
costs nothing here, and vice versa.

Every trajectory is memoized (SPEC section 8): the JSON record under
``TrajectoryConfig.key()`` and the snapshots as ``.npz`` under
``TrajectoryConfig.arrays_key()``. No printing here (DESIGN.md).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from lazylab.arms import Arm
from lazylab.config import RunConfig, canonical_json, memo_key
from lazylab.errors import LazylabError
from lazylab.experiments import Reporter, Workspace, json_config, movement

DEFAULT_ARMS = ("yat-trained", "yat-data-trained", "gaussian-trained")
DEFAULT_WIDTH = 64
DEFAULT_EPOCHS = 24
DEFAULT_SNAPSHOTS = 16
# The ladder's bracket (SPEC section 5): m = 256, seed 0, 12 epochs.
BRACKET_WIDTH = 256
BRACKET_SEED = 0
BRACKET_EPOCHS = 12
# Bump when the layout or meaning of a stored trajectory changes.
TRAJECTORY_SCHEMA = 1


@dataclass(frozen=True)
class TrajectoryConfig:
    """Everything that determines one trajectory: the run's config plus the snapshot count.

    Attributes:
      run: the training run (arm, plugin, width, seed, lr, epochs, batch,
        train_size, weight_decay, fan_in, data fingerprint, cache schema).
      snapshots: how many prototypes (the first ones, rows ``0..snapshots-1``)
        are kept at every epoch.
      schema: the trajectory record layout version.
    """

    run: RunConfig
    snapshots: int
    schema: int = TRAJECTORY_SCHEMA

    def canonical(self) -> str:
        """Canonical JSON: sorted keys, no spaces (as ``RunConfig.canonical``)."""
        return canonical_json({"kind": "trajectory", **asdict(self)})

    def key(self) -> str:
        """Memo key of the JSON record: ``"traj-"`` + 32 hex digits of SHA-256 of the canonical JSON."""
        return memo_key("traj", {"kind": "trajectory", **asdict(self)})

    def arrays_key(self) -> str:
        """Memo key of the snapshots ``.npz``."""
        return self.key() + "-snapshots"


@dataclass(frozen=True)
class TrajectoryPlan:
    """What to run. ``lr=None`` uses each arm's bracketed rate (see module docstring)."""

    arms: tuple[Arm, ...]
    width: int = DEFAULT_WIDTH
    epochs: int = DEFAULT_EPOCHS
    snapshots: int = DEFAULT_SNAPSHOTS
    seed: int = 0
    lr: float | None = None
    train_size: int = 60000
    batch: int = 256
    fan_in: str = "unit"

    def protocol(self) -> dict:
        return dict(epochs=self.epochs, batch=self.batch, train_size=self.train_size, fan_in=self.fan_in)

    def bracket_protocol(self) -> dict:
        return dict(epochs=BRACKET_EPOCHS, batch=self.batch, train_size=self.train_size, fan_in=self.fan_in)

    def n_runs(self) -> int:
        """Trajectories plus bracket runs (an upper bound: memo hits still count one each)."""
        bracket = 0 if self.lr is not None else sum(len(a.unit.grid(True)) for a in self.arms)
        return len(self.arms) + bracket


@dataclass
class ArmTrajectory:
    """One arm's trajectory.

    Attributes:
      arm, plugin, init: the arm, its ``"<distribution> <version>"``, ``"random"``/``"data"``.
      lr: the rate used; ``rate_source`` is ``"given"`` or ``"bracket"``.
      bracket: ``{repr(lr): best_acc %}`` of the bracket runs (empty if the rate was given).
      record: the stored JSON record (see ``trajectory_run``).
      snapshots: float32 ``(epochs_done + 1, snapshots, d)``; index 0 is the initialisation.
      images: whether the prototypes can be drawn as square images.
      cached: True if the record came from the memo.
    """

    arm: str
    plugin: str
    init: str
    lr: float
    rate_source: str
    bracket: dict
    record: dict
    snapshots: np.ndarray = field(repr=False)
    images: bool
    cached: bool

    def final(self) -> dict:
        """Last completed epoch: median/max travel, accuracy (%) and scalars."""
        r = self.record
        return {
            "epoch": r["epochs"][-1],
            "travel_median": r["travel_median"][-1],
            "travel_max": r["travel_max"][-1],
            "w_move_rel": r["w_move_rel"][-1],
            "accuracy": r["accuracy"][-1],
            "best_acc": max(r["accuracy"][1:]) if len(r["accuracy"]) > 1 else None,
            "scalars": r["scalars"][-1],
        }


@dataclass
class TrajectoryResult:
    plan: dict
    arms: list[ArmTrajectory]
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        """Everything but the snapshot arrays (they live in the memo under ``snapshots_key``)."""
        return {
            "plan": self.plan,
            "notes": self.notes,
            "arms": [
                {"arm": a.arm, "plugin": a.plugin, "init": a.init, "lr": a.lr, "rate_source": a.rate_source,
                 "bracket": a.bracket, "images": a.images, "cached": a.cached, "final": a.final(), "record": a.record}
                for a in self.arms
            ],
        }


def prototypes_are_images(arm: Arm, d: int) -> bool:
    """Whether the arm's prototypes can be shown as ``sqrt(d) x sqrt(d)`` images."""
    side = math.isqrt(d)
    return bool(arm.unit.prototypes_are_images) and side * side == d


def validate(plan: TrajectoryPlan) -> None:
    """Raise LazylabError (one line) for a plan that cannot produce trajectories."""
    if not plan.arms:
        raise LazylabError("trajectory needs at least one trained arm")
    frozen = [a.name for a in plan.arms if not a.trained]
    if frozen:
        hint = ", ".join(n.removesuffix("-frozen") + "-trained" for n in frozen)
        raise LazylabError(
            f"trajectory needs trained arms; {', '.join(frozen)} {'is' if len(frozen) == 1 else 'are'} frozen "
            f"(the prototypes never move) - try {hint}"
        )
    if len({a.name for a in plan.arms}) != len(plan.arms):
        raise LazylabError("trajectory: an arm is named twice in --arms")
    if plan.snapshots > plan.width:
        raise LazylabError(f"--snapshots {plan.snapshots} exceeds the width {plan.width}")
    widest = max(plan.width, BRACKET_WIDTH if plan.lr is None else 0)
    seeded = [a.name for a in plan.arms if a.init == "data"]
    if seeded and widest > plan.train_size:
        raise LazylabError(f"{seeded[0]}: width {widest} exceeds the {plan.train_size} training images available "
                           "for data seeding (lower --width or raise --train-size)")


def bracket_rate(ws: Workspace, arm: Arm, plan: TrajectoryPlan, reporter: Reporter = Reporter()) -> tuple[float | None, dict]:
    """The ladder's rate for ``arm``: its grid at m = 256, seed 0, 12 epochs, best ``best_acc``.

    Returns: ``(rate or None if every rate diverged, {repr(lr): best_acc})``.
    """
    from lazylab.experiments.ladder import choose_rate

    grid = arm.unit.grid(True)
    records = ws.run_cells([(arm, ws.config(arm, BRACKET_WIDTH, BRACKET_SEED, lr, **plan.bracket_protocol())) for lr in grid],
                           reporter)
    scores = {lr: r["best_acc"] for lr, r in zip(grid, records)}
    return choose_rate(scores), {repr(lr): acc for lr, acc in scores.items()}


def trajectory_run(ws: Workspace, arm: Arm, tcfg: TrajectoryConfig, on_epoch=None) -> tuple[dict, np.ndarray]:
    """Train ``arm`` per ``tcfg.run`` and record its trajectory.

    Returns ``(record, snapshots)``:
      record (JSON): ``epochs`` [0..E], ``travel_median``/``travel_max`` (per-unit
        ``||w_t - w_0|| / ||w_0||`` over all m units), ``w_move_rel``
        (``||W_t - W_0||_F / ||W_0||_F``), ``accuracy`` (test %, index 0 = the
        untrained model), ``scalars`` (one dict per epoch), ``train_loss``
        (epochs 1..E), ``diverged`` (None or where training stopped), ``seconds``.
        Lists stop at the last finite epoch if the run diverged.
      snapshots: float32 ``(E + 1, tcfg.snapshots, d)``; ``snapshots[0]`` is the
        initialisation, bit for bit.
    """
    import jax
    from flax import nnx

    from lazylab.model import bank_scalars, build_model
    from lazylab.train import accuracy, fit

    cfg = tcfg.run
    t0 = time.perf_counter()
    d = ws.data.subset(train_size=cfg.train_size)
    model = build_model(arm, cfg.width, cfg.seed, d.x_train, cfg.fan_in)
    W0 = np.array(model.feat.W[...], dtype=np.float32)
    n_snap = tcfg.snapshots
    graphdef, trainable, rest = nnx.split(model, nnx.Param, ...)
    acc0 = accuracy(graphdef, trainable, rest, jax.numpy.asarray(d.x_test), jax.numpy.asarray(d.y_test))
    snaps = [W0[:n_snap].copy()]
    stats = [movement(W0, W0)]
    scalars = [bank_scalars(model.feat)]
    probe = nnx.clone(model)  # receives host copies of each epoch's state

    def on_state(epoch: int, state) -> None:
        nnx.update(probe, jax.tree.map(np.array, state))
        W = np.asarray(probe.feat.W[...], dtype=np.float32)
        snaps.append(W[:n_snap].copy())
        stats.append(movement(W0, W))
        scalars.append(bank_scalars(probe.feat))

    res = fit(model, d.x_train, d.y_train, d.x_test, d.y_test, lr=cfg.lr, epochs=cfg.epochs, batch=cfg.batch,
              seed=cfg.seed, weight_decay=cfg.weight_decay, on_epoch=on_epoch, on_epoch_state=on_state)
    done = len(res.curve)
    record = {
        "key": tcfg.key(),
        "snapshots_key": tcfg.arrays_key(),
        "config": json_config(cfg),
        "snapshot_units": n_snap,
        "epochs": list(range(done + 1)),
        "travel_median": [s["unit_median"] for s in stats],
        "travel_max": [s["unit_max"] for s in stats],
        "w_move_rel": [s["w_move_rel"] for s in stats],
        "accuracy": [acc0, *res.curve],
        "scalars": scalars,
        "train_loss": res.train_loss,
        "diverged": res.diverged,
        "seconds": round(time.perf_counter() - t0, 3),
    }
    return record, np.stack(snaps).astype(np.float32)


def load_or_run(ws: Workspace, arm: Arm, tcfg: TrajectoryConfig, reporter: Reporter = Reporter()) -> tuple[dict, np.ndarray, bool]:
    """The trajectory from the memo (record and snapshots both present and consistent) or computed and stored.

    Returns ``(record, snapshots, cached)``.
    """
    return load_or_run_many(ws, [(arm, tcfg)], reporter)[0]


def _memo_trajectory(ws: Workspace, tcfg: TrajectoryConfig) -> tuple[dict, np.ndarray] | None:
    """The stored record and snapshots of ``tcfg``, or None unless both are present and consistent: one
    snapshot of ``tcfg.snapshots`` prototypes of the images' size per epoch of the record. An inconsistent
    pair is rejected (one line, ``Memo.reject``) and computed again."""
    record = ws.memo.get_record(tcfg.key())
    if record is not None:
        arrays = ws.memo.get_arrays(tcfg.arrays_key())
        if arrays is None:
            return None
        snaps = arrays["snapshots"]
        want = (len(record["epochs"]), tcfg.snapshots, ws.data.x_train.shape[1])
        if snaps.shape == want and record["snapshot_units"] == tcfg.snapshots:
            return record, snaps
        ws.memo.reject(tcfg.key(), f"its snapshots have shape {snaps.shape}, not {want}")
    return None


def load_or_run_many(ws: Workspace, items: list[tuple[Arm, TrajectoryConfig]],
                     reporter: Reporter = Reporter()) -> list[tuple[dict, np.ndarray, bool]]:
    """``load_or_run`` for several trajectories: the missing ones are computed by ``ws.backend``.

    On the Ray backend each trajectory is one task and they run at once; either way only
    this process writes the memo, storing each trajectory as it arrives.
    Returns ``(record, snapshots, cached)`` per item, in order.
    """
    out: list = [None] * len(items)
    missing = []
    for i, (arm, tcfg) in enumerate(items):
        stored = _memo_trajectory(ws, tcfg)
        if stored is not None:
            reporter.done(tcfg.run, stored[0], cached=True)
            out[i] = (*stored, True)
        else:
            missing.append(i)
    for j, record, snaps in ws.backend.trajectories(ws, [items[i] for i in missing], reporter, trajectory_run):
        tcfg = items[missing[j]][1]
        # Arrays first: a record in the memo then always has its snapshots stored.
        ws.memo.put_arrays(tcfg.arrays_key(), {"snapshots": snaps})
        ws.memo.put_record(tcfg.key(), record)
        reporter.done(tcfg.run, record, cached=False)
        out[missing[j]] = (record, snaps, False)
    return out


def _unit_fails(ws: Workspace, arm: Arm, tcfg: TrajectoryConfig) -> bool:
    """Whether ``arm``'s bank for a trajectory not in the memo fails ``lazylab.model.check_finite``
    (recorded in ``ws.failures``): one failing arm must not stop the others."""
    from lazylab.arms import UnitFailure
    from lazylab.model import build_model

    if _memo_trajectory(ws, tcfg) is not None:
        return False
    cfg = tcfg.run
    try:
        build_model(arm, cfg.width, cfg.seed, ws.data.x_train[: cfg.train_size], cfg.fan_in)
    except UnitFailure as exc:
        ws.failures.setdefault(arm.name, str(exc))
        return True
    return False


def run_trajectory(ws: Workspace, plan: TrajectoryPlan, reporter: Reporter = Reporter()) -> TrajectoryResult:
    """Trajectories of every arm in ``plan`` (bracketing each rate first unless ``plan.lr``), memoized.

    Raises: LazylabError for a frozen arm, a repeated arm, or more snapshots than units.
    """
    validate(plan)
    reporter.plan(plan.n_runs())
    todo, notes_of = [], {arm.name: [] for arm in plan.arms}  # notes kept in arm order
    for arm in plan.arms:
        if plan.lr is None:
            lr, bracket = bracket_rate(ws, arm, plan, reporter)
            if arm.name in ws.failures:
                continue  # its unit failed (lazylab.arms.UnitFailure): the CLI names it and exits 2
            if lr is None:
                notes_of[arm.name].append(f"{arm.name}: every rate of its grid diverged in bracketing; skipped (pass --lr)")
                continue
            source = "bracket"
        else:
            lr, bracket, source = plan.lr, {}, "given"
        todo.append((arm, lr, bracket, source,
                     TrajectoryConfig(ws.config(arm, plan.width, plan.seed, lr, **plan.protocol()), plan.snapshots)))
    todo = [t for t in todo if not _unit_fails(ws, t[0], t[-1])]
    # Every arm's trajectory at once: on the Ray backend they run in parallel.
    done = load_or_run_many(ws, [(arm, tcfg) for arm, *_, tcfg in todo], reporter)
    arms = []
    for (arm, lr, bracket, source, tcfg), (record, snaps, cached) in zip(todo, done):
        notes = notes_of[arm.name]
        images = prototypes_are_images(arm, snaps.shape[-1])
        if not images:
            notes.append(f"{arm.name}: its prototypes are not images ({arm.plugin}); curves only, no prototype picture")
        if record["diverged"]:
            dv = record["diverged"]
            notes.append(f"{arm.name}: diverged at epoch {dv['epoch']} (loss {dv['loss']}); curves stop at epoch {dv['epoch'] - 1}")
        arms.append(ArmTrajectory(arm.name, arm.plugin, arm.init, lr, source, bracket, record, snaps, images, cached))
    notes = [note for arm in plan.arms for note in notes_of[arm.name]]
    plan_json = {
        "arms": [a.name for a in plan.arms], "width": plan.width, "seed": plan.seed, "snapshots": plan.snapshots,
        "lr": plan.lr, "data": ws.fingerprint, **plan.protocol(),
        "bracket": None if plan.lr is not None else {"width": BRACKET_WIDTH, "seed": BRACKET_SEED, "epochs": BRACKET_EPOCHS},
    }
    return TrajectoryResult(plan=plan_json, arms=arms, notes=notes)
