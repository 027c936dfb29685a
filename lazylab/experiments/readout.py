"""The readout race (SPEC section 7, ``readout``): linear readouts on frozen banks of two widths.

For each width ``m`` (default 64 and 512) a frozen bank of the arm's units is
drawn by the arm's own initialisation (SPEC section 3, seed ``seed``), its
features are computed once on the first ``train_size`` training images and on
the whole test set, and a readout ``nnx.Linear(m, 10)`` (flax defaults, the
head key of ``lazylab.model.split_key(seed)``) is trained on them by Adam
(``optax.adam(lr)``, Kingma & Ba 2015) on the softmax cross-entropy,
**full batch** (every step sees all ``train_size`` features; deterministic,
so the curves are smooth). Test accuracy (%) on the full test set and the
predicted class of every test image are recorded at step 0 and every
``eval_every`` steps.

The default rate is 0.3, not the 1e-2 common for Adam: random-feature
activations are small (Yat features on Fashion-MNIST average about 0.016 at
m = 64 and 0.004 at m = 512), so the readout's weights must grow to O(10-100)
and Adam moves each weight by about ``lr`` per step. Measured on yat-frozen
(10,000 images, 300 steps): lr 1e-2 ends at 68.2% / 74.2% (m = 64 / 512) and
is still climbing; lr 0.3 ends at 76.3% / 83.5% with both curves flat over
the last fifth. 0.3 also lies inside SPEC section 5's frozen-arm grid.

Memo: the features of each bank (``readfeat-<sha256>``) and each width's
curve (``readout-<sha256>``), keyed by every field that determines them.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import numpy as np

from lazylab.arms import Arm
from lazylab.config import CACHE_SCHEMA
from lazylab.data import CLASS_NAMES
from lazylab.errors import LazylabError
from lazylab.config import canonical_json, memo_key
from lazylab.experiments.gram_config import Progress, require_frozen

DEFAULT_WIDTHS = (64, 512)
DEFAULT_TRAIN_SIZE = 10_000
DEFAULT_STEPS = 300
DEFAULT_LR = 0.3
DEFAULT_EVAL_EVERY = 5
N_SHOW = 12


@dataclass(frozen=True)
class FeatureConfig:
    """What determines a frozen bank's stored features (memo key ``readfeat-<sha256>``)."""

    arm: str
    plugin: str
    width: int
    seed: int
    train_size: int
    data: str
    schema: int = CACHE_SCHEMA

    def key(self) -> str:
        return memo_key("readfeat", self)


@dataclass(frozen=True)
class ReadoutConfig:
    """What determines one readout curve (memo key ``readout-<sha256>``).

    Attributes:
      arm, plugin: arm name and ``"<distribution> <version>"``.
      width: bank width ``m``; seed: bank and readout seed.
      lr: Adam rate; steps: optimisation steps; eval_every: steps between evaluations.
      train_size: first N training images; optimizer, batch: fixed ``"adam"``, ``"full"``.
      data: Fashion-MNIST fingerprint; schema: cache schema.
    """

    arm: str
    plugin: str
    width: int
    seed: int = 0
    lr: float = DEFAULT_LR
    steps: int = DEFAULT_STEPS
    eval_every: int = DEFAULT_EVAL_EVERY
    train_size: int = DEFAULT_TRAIN_SIZE
    optimizer: str = "adam"
    batch: str = "full"
    data: str = ""
    schema: int = CACHE_SCHEMA

    def canonical(self) -> str:
        return canonical_json(self)

    def key(self) -> str:
        return memo_key("readout", self)

    def features(self) -> FeatureConfig:
        return FeatureConfig(self.arm, self.plugin, self.width, self.seed, self.train_size, self.data, self.schema)


@dataclass
class ReadoutCurve:
    """One width's race: ``steps`` ``(T,)``, test accuracy ``acc`` ``(T,)`` in %,
    training loss ``loss`` ``(T,)`` (nats, at the evaluated parameters),
    predicted classes ``preds`` ``(T, n_test)`` uint8, and whether it came from the memo."""

    config: dict
    key: str
    steps: np.ndarray
    acc: np.ndarray
    loss: np.ndarray
    preds: np.ndarray
    cached: bool = False
    seconds: float = 0.0

    @property
    def width(self) -> int:
        return int(self.config["width"])

    @property
    def final_acc(self) -> float:
        return float(self.acc[-1])


@dataclass
class ReadoutResult:
    """Both curves plus the garments shown: ``show_index`` ``(12,)`` test indices,
    ``show_images`` ``(12, 784)``, ``show_labels`` ``(12,)``; ``computed`` lists
    what this call computed (``features m=..``, ``readout m=..``)."""

    curves: list[ReadoutCurve]
    show_index: np.ndarray
    show_images: np.ndarray
    show_labels: np.ndarray
    computed: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def cached(self) -> bool:
        return not self.computed

    @property
    def widest(self) -> ReadoutCurve:
        return max(self.curves, key=lambda c: c.width)

    def to_json(self) -> dict:
        return {
            "experiment": "readout",
            "curves": [
                {"key": c.key, "config": c.config, "final_acc": c.final_acc, "best_acc": float(c.acc.max()),
                 "steps": c.steps.tolist(), "test_acc": [float(a) for a in c.acc],
                 "train_loss": [float(v) for v in c.loss]}
                for c in self.curves
            ],
            "shown": {"test_index": self.show_index.tolist(), "labels": self.show_labels.tolist(),
                      "judged_by_width": self.widest.width,
                      "final_preds": self.widest.preds[-1, self.show_index].tolist()},
            "protocol": {"readout": "nnx.Linear(m, 10), flax defaults", "optimizer": "optax.adam, constant rate",
                         "batch": "full batch", "evaluation": "full test set"},
        }

    def rows(self) -> list[dict]:
        """Wide CSV rows: ``step`` then ``test_acc_m<width>`` (%) per width."""
        steps = self.curves[0].steps
        return [{"step": int(s), **{f"test_acc_m{c.width}": float(c.acc[i]) for c in self.curves}}
                for i, s in enumerate(steps)]


def readout_configs(ws, arm: Arm, widths=DEFAULT_WIDTHS, *, seed: int = 0, lr: float = DEFAULT_LR,
                    steps: int = DEFAULT_STEPS, eval_every: int = DEFAULT_EVAL_EVERY,
                    train_size: int = DEFAULT_TRAIN_SIZE) -> list[ReadoutConfig]:
    """Validated per-width configs on workspace ``ws``.

    Raises: LazylabError for a trained arm, no widths, a width < 1, duplicate
    widths, ``steps < 1``, ``eval_every < 1``, ``lr <= 0``, ``train_size``
    outside 1..60000, or a data-seeded width larger than ``train_size``.
    """
    require_frozen(arm, "readout")
    widths = tuple(int(w) for w in widths)
    if not widths or any(w < 1 for w in widths) or len(set(widths)) != len(widths):
        raise LazylabError(f"widths must be distinct integers >= 1, got {list(widths)}")
    if steps < 1 or eval_every < 1:
        raise LazylabError(f"steps and eval_every must be >= 1, got {steps} and {eval_every}")
    if not lr > 0:
        raise LazylabError(f"lr must be positive, got {lr}")
    n_train = len(ws.data.y_train)
    if not 1 <= train_size <= n_train:
        raise LazylabError(f"train_size must be between 1 and {n_train}, got {train_size}")
    if arm.init == "data" and max(widths) > train_size:
        raise LazylabError(f"width {max(widths)} exceeds the {train_size} training images available for data seeding")
    return [ReadoutConfig(arm=arm.name, plugin=arm.plugin, width=w, seed=seed, lr=float(lr), steps=steps,
                          eval_every=eval_every, train_size=train_size, data=ws.fingerprint) for w in widths]


def bank_features(ws, arm: Arm, fcfg: FeatureConfig) -> tuple[np.ndarray, np.ndarray, bool]:
    """Train ``(train_size, m)`` and test ``(n_test, m)`` float32 features of a frozen bank, memoized.

    The bank is ``lazylab.model.build_model(arm, m, seed, x_train[:train_size]).feat``:
    the ladder's bank for the same arm, width, seed and training subset.
    Returns ``(f_train, f_test, computed)``.
    """
    stored = ws.memo.get_arrays(fcfg.key())
    shapes = {"train": (fcfg.train_size, fcfg.width), "test": (len(ws.data.y_test), fcfg.width)}
    if stored is not None and all(stored[k].shape == s for k, s in shapes.items()):
        return stored["train"], stored["test"], False
    if stored is not None:
        ws.memo.reject(fcfg.key(), f"features of shapes {[stored[k].shape for k in shapes]}, not {list(shapes.values())}")
    from lazylab.model import build_model, features

    d = ws.data.subset(train_size=fcfg.train_size)
    bank = build_model(arm, fcfg.width, fcfg.seed, d.x_train).feat
    f_train = np.asarray(features(bank, d.x_train), np.float32)
    f_test = np.asarray(features(bank, d.x_test), np.float32)
    ws.memo.put_arrays(fcfg.key(), {"train": f_train, "test": f_test})
    return f_train, f_test, True


def train_readout(f_train, y_train, f_test, y_test, cfg: ReadoutConfig, tick: Progress | None = None) -> dict:
    """Full-batch Adam on a fresh ``nnx.Linear(m, 10)`` readout over fixed features.

    Args:
      f_train: ``(n, m)`` float32 features; y_train: ``(n,)`` int labels.
      f_test, y_test: the evaluation split.
      cfg: rate, steps, evaluation period, seed (head key ``split_key(seed)[1]``).
      tick: optional ``tick(stage, done, total)`` progress callback (steps).
    Returns: ``{"steps", "acc" (%), "loss" (nats), "preds" (T, n_test) uint8}`` with
    ``T = 1 + ceil(steps / eval_every)`` evaluation points, the first at step 0.
    """
    import jax
    import jax.numpy as jnp
    import optax
    from flax import nnx

    from lazylab.model import split_key
    from lazylab.network import linear_head

    graphdef, params = nnx.split(linear_head(cfg.width, split_key(cfg.seed)[1]))
    tx = optax.adam(cfg.lr)
    opt_state = tx.init(params)
    xtr, ytr = jnp.asarray(f_train), jnp.asarray(y_train)
    xte, yte = jnp.asarray(f_test), jnp.asarray(y_test)

    def loss_fn(p):
        logits = nnx.merge(graphdef, p)(xtr)
        return optax.softmax_cross_entropy_with_integer_labels(logits, ytr).mean()

    @jax.jit
    def evaluate(p):
        pred = jnp.argmax(nnx.merge(graphdef, p)(xte), axis=-1)
        return 100.0 * jnp.mean(pred == yte), pred.astype(jnp.uint8), loss_fn(p)

    @jax.jit
    def advance(p, s):
        def step(carry, _):
            p, s = carry
            grads = jax.grad(loss_fn)(p)
            updates, s = tx.update(grads, s, p)
            return (optax.apply_updates(p, updates), s), None

        (p, s), _ = jax.lax.scan(step, (p, s), None, length=cfg.eval_every)
        return p, s

    def record(p, done):
        acc, pred, loss = evaluate(p)
        steps.append(done)
        accs.append(float(acc))
        losses.append(float(loss))
        preds.append(np.asarray(pred))

    steps, accs, losses, preds = [], [], [], []
    record(params, 0)
    done = 0
    while done < cfg.steps:
        n = min(cfg.eval_every, cfg.steps - done)
        if n == cfg.eval_every:
            params, opt_state = advance(params, opt_state)
        else:  # a last partial block: plain steps
            for _ in range(n):
                grads = jax.grad(loss_fn)(params)
                updates, opt_state = tx.update(grads, opt_state, params)
                params = optax.apply_updates(params, updates)
        done += n
        record(params, done)
        if tick:
            tick(f"readout m={cfg.width}", done, cfg.steps)
    return {"steps": np.asarray(steps, np.int64), "acc": np.asarray(accs), "loss": np.asarray(losses),
            "preds": np.stack(preds).astype(np.uint8)}


def show_indices(n_test: int, seed: int, count: int = N_SHOW) -> np.ndarray:
    """``count`` distinct test indices drawn by ``numpy.random.default_rng(seed)``, ascending."""
    return np.sort(np.random.default_rng(seed).choice(n_test, size=count, replace=False)).astype(np.int64)


def evaluation_steps(cfg: ReadoutConfig) -> list[int]:
    """The steps at which ``train_readout`` evaluates: 0, every ``eval_every`` steps, and the last step."""
    return sorted({0, *range(cfg.eval_every, cfg.steps, cfg.eval_every), cfg.steps})


def _stored_problem(cfg: ReadoutConfig, stored: dict, n_test: int) -> str | None:
    """Why a stored readout curve (of its kind's schema, ``lazylab.schemas.entries``) is not ``cfg``'s (one line),
    or None: its evaluation steps, and a predicted class in 0..9 for each of the ``n_test`` test images at each."""
    if stored["steps"].tolist() != evaluation_steps(cfg):
        return "its evaluation steps are not the configuration's"
    preds = stored["preds"]
    if preds.shape[1] != n_test or (preds.size and int(preds.max()) >= len(CLASS_NAMES)):
        return "its predictions are not one class per test image"
    return None


def run_readout(ws, arm: Arm, configs: list[ReadoutConfig], progress: Progress | None = None,
                n_show: int = N_SHOW) -> ReadoutResult:
    """Train one readout per config (memoized features and curves) and pick the garments shown.

    Args:
      ws: a Workspace; arm: the frozen arm of every config; configs: from ``readout_configs``.
      progress: optional ``progress(stage, done, total)``.
      n_show: garments shown (drawn with ``default_rng(seed)`` from the test set).
    Returns: ReadoutResult, curves in the order of ``configs``.
    Raises: LazylabError for a trained arm or a config for another arm.
    """
    require_frozen(arm, "readout")
    t0 = time.perf_counter()
    tick = progress or (lambda *a: None)
    d = ws.data
    curves, computed = [], []
    for cfg in configs:
        if cfg.arm != arm.name or cfg.plugin != arm.plugin:
            raise LazylabError(f"config is for {cfg.arm} ({cfg.plugin}), not {arm.name} ({arm.plugin})")
        t1 = time.perf_counter()
        stored = ws.memo.get_arrays(cfg.key())
        why = None if stored is None else _stored_problem(cfg, stored, len(d.y_test))
        if why is not None:
            ws.memo.reject(cfg.key(), why)
            stored = None
        cached = stored is not None
        if not cached:
            tick(f"features m={cfg.width}", 0, 1)
            f_train, f_test, fresh = bank_features(ws, arm, cfg.features())
            if fresh:
                computed.append(f"features m={cfg.width}")
            y_train = d.y_train[: cfg.train_size]
            stored = train_readout(f_train, y_train, f_test, d.y_test, cfg, tick)
            ws.memo.put_arrays(cfg.key(), stored)
            computed.append(f"readout m={cfg.width}")
            del f_train, f_test
        curves.append(ReadoutCurve(config=json.loads(cfg.canonical()), key=cfg.key(), steps=stored["steps"],
                                   acc=stored["acc"], loss=stored["loss"], preds=stored["preds"], cached=cached,
                                   seconds=time.perf_counter() - t1))
    seed = configs[0].seed if configs else 0
    idx = show_indices(len(d.y_test), seed, n_show)
    return ReadoutResult(curves=curves, show_index=idx, show_images=np.asarray(d.x_test[idx]),
                         show_labels=np.asarray(d.y_test[idx]), computed=computed, seconds=time.perf_counter() - t0)


def class_name(c: int) -> str:
    """The Fashion-MNIST class name of index ``c``."""
    return CLASS_NAMES[int(c)]
