"""``ntk`` — lazy versus rich, measured (SPEC section 7, ``ntk``): config in, records out, no printing.

The science lives in ``lazylab.ntk``: the 1-D lab (``lazylab.ntk.lab``), its
audit (``lazylab.ntk.audit``), the exact scalar model (``lazylab.ntk.scalar``)
and the empirical NTK of Fashion-MNIST models (``lazylab.ntk.kernels``). This
module adds the arm experiment, which needs the data and the memo.

Arm experiment (item 3). For an arm at width ``m``:

1. build the model (``lazylab.model.build_model``) and train it with
   ``lazylab.train.fit`` (SPEC section 5: AdamW, batch 256, per-epoch
   permutations) — all parameters for a trained arm, the head for a frozen one;
2. train its linearization at the initial parameters,
   ``f_lin(x; theta) = f(x; theta0) + J0(x) (theta - theta0)`` (a ``jax.jvp``),
   with the same optimiser, rate, weight decay, batches and epochs; weight
   decay acts on ``theta`` itself, exactly as for the network;
3. on the first ``probe`` test images, the empirical NTK (``lazylab.ntk.kernels``,
   class-resolved ``(N, 10, N, 10)``) at ``theta0`` and at ``theta_T``: relative
   drift of the full kernel and of its class trace, symmetry and PSD;
4. disagreement on the probe after training: RMS of ``f_T - f_lin,T`` over
   logits, the same relative to how far the network's logits moved
   (``||f_T - f_lin,T|| / ||f_T - f_0||``), and the argmax agreement (%);
   test accuracy (%) of both on the full test set;
5. movement: ``||theta_T - theta0|| / ||theta0||`` over the trained parameters
   for both models, and the prototypes' ``w_move_rel`` (SPEC section 6).

Trained parameters and the record are memoized under keys hashed from the
run configuration (``RunConfig``) plus the probe size and NTK method.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from lazylab.config import memo_key
from lazylab.errors import LazylabError
from lazylab.ntk.audit import run_audit  # noqa: F401  (re-exported)
from lazylab.ntk.lab import LabConfig, run_lab, sweep  # noqa: F401
from lazylab.ntk.scalar import run_scalar  # noqa: F401

NTK_SCHEMA = 1
MAX_PROBE = 1024  # the (N*10)^2 float64 kernel is 800 MB at N = 1024


def default_lr(arm) -> float:
    """The middle of the arm's bracketing grid (SPEC section 5): 1e-2 for trained arms, 1e-1 for frozen ones."""
    grid = arm.unit.grid(arm.trained)
    return float(grid[(len(grid) - 1) // 2])


def trainable_filter(arm):
    """Everything for a trained arm, the head for a frozen one (SPEC section 4)."""
    return nnx.Param if arm.trained else nnx.PathContains("head")


def _leaf_name(path) -> str:
    return "/".join(str(getattr(k, "key", getattr(k, "name", getattr(k, "idx", k)))) for k in path)


def _flat(state) -> dict[str, np.ndarray]:
    """``{"feat/W": array, ...}`` of a state pytree (the memo's npz layout)."""
    return {_leaf_name(p): np.asarray(v) for p, v in jax.tree_util.tree_flatten_with_path(state)[0]}


def _restore(state, arrays: dict[str, np.ndarray]):
    """``state`` with its leaves replaced by the stored arrays (same names and shapes required)."""
    flat, treedef = jax.tree_util.tree_flatten_with_path(state)
    leaves = []
    for p, v in flat:
        a = arrays.get(_leaf_name(p))
        if a is None or a.shape != np.shape(v):
            raise KeyError(_leaf_name(p))
        leaves.append(jnp.asarray(a, dtype=v.dtype))
    return jax.tree_util.tree_unflatten(treedef, leaves)


def _norm(state) -> float:
    return float(np.sqrt(sum(float(jnp.sum(jnp.square(l.astype(jnp.float32)))) for l in jax.tree.leaves(state))))


def _diff_norm(a, b) -> float:
    return _norm(jax.tree.map(jnp.subtract, a, b))


# --------------------------------------------------------- linearized training
def _lin_apply(graphdef, params, p0, rest, x):
    """``f(x; p0) + J0 (params - p0)`` by one forward-mode pass."""
    dp = jax.tree.map(jnp.subtract, params, p0)
    y0, dy = jax.jvp(lambda p: nnx.merge(graphdef, p, rest)(x), (p0,), (dp,))
    return y0 + dy


@partial(jax.jit, static_argnums=(0, 1), donate_argnums=(2, 3))
def _lin_epoch(graphdef, tx, params, opt_state, p0, rest, x, y, order):
    def loss_fn(p, xb, yb):
        return optax.softmax_cross_entropy_with_integer_labels(_lin_apply(graphdef, p, p0, rest, xb), yb).mean()

    def step(carry, idx):
        p, s = carry
        loss, g = jax.value_and_grad(loss_fn)(p, x[idx], y[idx])
        updates, s = tx.update(g, s, p)
        return (optax.apply_updates(p, updates), s), loss

    (params, opt_state), losses = jax.lax.scan(step, (params, opt_state), order)
    return params, opt_state, losses


@partial(jax.jit, static_argnums=0)
def _lin_logits(graphdef, params, p0, rest, x):
    return _lin_apply(graphdef, params, p0, rest, x)


def lin_logits(graphdef, params, p0, rest, x, chunk: int = 2500) -> np.ndarray:
    """Linearized logits ``(n, C)`` in chunks."""
    return np.concatenate([np.asarray(_lin_logits(graphdef, params, p0, rest, jnp.asarray(x[i : i + chunk])))
                           for i in range(0, len(x), chunk)])


def fit_linearized(model, x_train, y_train, *, lr, epochs, batch, seed, weight_decay, trainable=nnx.Param,
                   on_epoch: Callable[[int, float], None] | None = None):
    """Train the linearization of ``model`` at its current parameters with the SPEC section 5 protocol.

    Returns ``(params, train_loss per epoch, diverged or None)``; ``params`` is the trained
    ``nnx.State`` of the ``trainable`` parameters (the expansion point is ``model``'s own).
    """
    from lazylab.train import batch_orders, optimizer

    graphdef, p0, rest = nnx.split(model, trainable, ...)
    tx = optimizer(lr, weight_decay)
    params = jax.tree.map(jnp.copy, p0)
    opt_state = tx.init(params)
    x, y = jnp.asarray(x_train), jnp.asarray(y_train)
    orders = batch_orders(seed, len(x_train), batch, epochs)
    curve = []
    for e in range(epochs):
        params, opt_state, losses = _lin_epoch(graphdef, tx, params, opt_state, p0, rest, x, y, jnp.asarray(orders[e]))
        losses = np.asarray(losses)
        if not np.all(np.isfinite(losses)):
            return params, curve, {"epoch": e + 1, "step": int(e * len(losses) + np.flatnonzero(~np.isfinite(losses))[0])}
        curve.append(float(losses.mean()))
        if on_epoch:
            on_epoch(e + 1, curve[-1])
    return params, curve, None


# --------------------------------------------------------- the arm experiment
def arm_key(ws, arm, width: int, *, probe: int, seed: int, lr: float | None, epochs: int, train_size: int,
            method: str) -> tuple[str, dict, object]:
    """The memo key of ``run_arm``'s record for these options, the configuration it hashes
    (``{"run": the training run's config as JSON, "ntk_schema"}``) and the run's ``RunConfig``
    (``lr`` None is ``default_lr(arm)``)."""
    from lazylab.experiments import json_config

    cfg = ws.config(arm, width, seed, default_lr(arm) if lr is None else float(lr), epochs=epochs,
                    train_size=train_size)
    base = {"run": json_config(cfg), "ntk_schema": NTK_SCHEMA}
    return memo_key("ntkarm", {**base, "probe": probe, "method": method}), base, cfg


def run_arm(ws, arm, width: int, *, probe: int = 256, seed: int = 0, lr: float | None = None, epochs: int = 3,
            train_size: int = 60000, method: str = "auto", limit_bytes: int | None = None,
            progress: Callable[[str], None] | None = None) -> tuple[dict, dict]:
    """NTK diagnostics of ``arm`` at ``width`` on Fashion-MNIST (see module docstring).

    Args:
      ws: a ``Workspace`` (data and memo).
      arm: an ``Arm``; width: ``m >= 1``; probe: ``1 <= N <= MAX_PROBE`` first test images.
      seed, lr (default ``default_lr(arm)``), epochs, train_size: the training protocol.
      method: ``lazylab.ntk.kernels.METHODS``; limit_bytes: their memory limit.
      progress: called with a short status line at each stage.
    Returns: ``(record, arrays)``: the JSON record, and ``{"K0_trace", "KT_trace"}`` ``(N, N)`` float64
    with the probe's ``labels`` ``(N,)``.
    Raises: LazylabError for a bad argument or a diverged run.
    """
    from lazylab.experiments import movement
    from lazylab.model import build_model
    from lazylab.ntk import kernels
    from lazylab.train import accuracy, fit

    say = progress or (lambda s: None)
    if width < 1:
        raise LazylabError(f"width must be at least 1, got {width}")
    if not 1 <= probe <= MAX_PROBE:
        raise LazylabError(f"probe must be between 1 and {MAX_PROBE}, got {probe}")
    if method not in kernels.METHODS:
        raise LazylabError(f"unknown NTK method {method!r}")
    limit = kernels.JACOBIAN_LIMIT_BYTES if limit_bytes is None else int(limit_bytes)
    rec_key, base, cfg = arm_key(ws, arm, width, probe=probe, seed=seed, lr=lr, epochs=epochs,
                                 train_size=train_size, method=method)
    lr = cfg.lr
    record = ws.memo.get_record(rec_key)
    arrays = ws.memo.get_arrays(rec_key + "-k")
    if record is not None and arrays is not None:
        if record["config"]["run"] == base["run"] and record["probe"] == probe and len(arrays["labels"]) == probe:
            record["cached"] = True
            return record, arrays
        ws.memo.reject(rec_key, "its training run or probe is not the configuration's")

    t0 = time.perf_counter()
    d = ws.data.subset(train_size=train_size)
    if len(d.x_train) < 256:
        raise LazylabError(f"train size {len(d.x_train)} is below one batch of 256")
    model = build_model(arm, width, seed, d.x_train, cfg.fan_in)
    filt = trainable_filter(arm)
    graphdef, p0, rest = nnx.split(model, filt, ...)
    W0 = np.array(model.feat.W[...])
    protocol = dict(lr=lr, epochs=epochs, batch=cfg.batch, seed=seed, weight_decay=cfg.weight_decay)

    train_key = memo_key("ntkarm-train", base)
    stored = ws.memo.get_arrays(train_key + "-p")
    stored_rec = ws.memo.get_record(train_key)
    if stored is not None and stored_rec is not None:
        try:
            pT = _restore(p0, {k[4:]: v for k, v in stored.items() if k.startswith("net/")})
            pL = _restore(p0, {k[4:]: v for k, v in stored.items() if k.startswith("lin/")})
            train_info = stored_rec
            say("trained parameters from the memo")
        except KeyError as exc:
            ws.memo.reject(train_key + "-p", f"parameter {exc.args[0]!r} is missing or of another shape")
            stored = None
    if stored is None or stored_rec is None:
        say(f"training {arm.name} m={width} ({epochs} epochs, lr {lr:g})")
        res = fit(model, d.x_train, d.y_train, d.x_test, d.y_test, trainable_filter=filt,
                  on_epoch=lambda e, a: say(f"network epoch {e}/{epochs}: test {a:.2f}%"), **protocol)
        if res.diverged:
            raise LazylabError(f"{arm.name} m={width} diverged at lr {lr:g} (epoch {res.diverged['epoch']}); try a smaller --lr")
        pT = res.trainable
        say("training the linearization")
        pL, lin_loss, lin_div = fit_linearized(model, d.x_train, d.y_train, trainable=filt,
                                               on_epoch=lambda e, l: say(f"linearization epoch {e}/{epochs}: loss {l:.4f}"),
                                               **protocol)
        if lin_div:
            raise LazylabError(f"the linearization of {arm.name} m={width} diverged at lr {lr:g}; try a smaller --lr")
        train_info = {"net_curve": res.curve, "net_train_loss": res.train_loss, "lin_train_loss": lin_loss,
                      "seconds": round(time.perf_counter() - t0, 3)}
        ws.memo.put_arrays(train_key + "-p", {**{"net/" + k: v for k, v in _flat(pT).items()},
                                       **{"lin/" + k: v for k, v in _flat(pL).items()}})
        ws.memo.put_record(train_key, train_info)

    model_T = nnx.merge(graphdef, pT, rest)
    say("test accuracy of both models")
    acc_net = accuracy(graphdef, pT, rest, jnp.asarray(d.x_test), jnp.asarray(d.y_test))
    lin_test = lin_logits(graphdef, pL, p0, rest, d.x_test)
    acc_lin = float(100.0 * np.mean(np.argmax(lin_test, 1) == d.y_test))

    xp = np.asarray(d.x_test[:probe], np.float32)
    say(f"empirical NTK at init on {probe} probe images")
    try:
        K0 = kernels.empirical_ntk(model, xp, filt, method, limit)
        say(f"empirical NTK after training ({K0.method}, {K0.seconds:.1f} s at init)")
        KT = kernels.empirical_ntk(model_T, xp, filt, method, limit)
    except kernels.NTKTooLarge as exc:
        raise LazylabError(f"--method {method}: {exc}; raise --memory-mib or use --method auto") from None
    except ValueError as exc:  # structured asked for a model that does not qualify
        raise LazylabError(f"--method {method}: {exc}") from None

    f0 = np.asarray(model(jnp.asarray(xp)), np.float64)
    fT = np.asarray(model_T(jnp.asarray(xp)), np.float64)
    fL = lin_logits(graphdef, pL, p0, rest, xp).astype(np.float64)
    diff = fT - fL
    sym0, symT = kernels.symmetry_psd(K0.matrix()), kernels.symmetry_psd(KT.matrix())
    n0 = _norm(p0)
    record = {
        "config": {**base, "probe": probe, "method": method, "limit_bytes": limit},
        "arm": arm.name, "width": width, "seed": seed, "lr": lr, "epochs": epochs, "train_size": len(d.x_train),
        "probe": probe,
        "ntk": {"method": K0.method, "notes": K0.notes, "n_params": K0.n_params, "jacobian_mib": K0.jacobian_bytes / 2**20,
                "work_mib": K0.work_bytes / 2**20, "seconds": [round(K0.seconds, 3), round(KT.seconds, 3)],
                "convention": "Theta[i,c,j,c'] over the trained parameters, (N,10,N,10); drift on the (10N x 10N) matrix"},
        "drift": kernels.relative_drift(KT.kernel, K0.kernel),
        "drift_trace": kernels.relative_drift(KT.trace(), K0.trace()),
        "kernel_init": {"fro": float(np.linalg.norm(K0.kernel)), **sym0},
        "kernel_final": {"fro": float(np.linalg.norm(KT.kernel)), **symT},
        "disagreement_rms": float(np.sqrt(np.mean(diff**2))),
        "disagreement_rel": float(np.linalg.norm(diff) / max(np.linalg.norm(fT - f0), 1e-300)),
        "argmax_agreement": float(100.0 * np.mean(np.argmax(fT, 1) == np.argmax(fL, 1))),
        "logit_move_rms": float(np.sqrt(np.mean((fT - f0) ** 2))),
        "acc_net": float(acc_net), "acc_lin": acc_lin,
        "move_net": _diff_norm(pT, p0) / n0, "move_lin": _diff_norm(pL, p0) / n0,
        "prototypes": movement(W0, np.asarray(model_T.feat.W[...])),
        "training": train_info,
        "seconds": round(time.perf_counter() - t0, 3),
        "cached": False,
    }
    arrays = {"K0_trace": K0.trace(), "KT_trace": KT.trace(), "labels": np.asarray(d.y_test[:probe])}
    ws.memo.put_record(rec_key, record)
    ws.memo.put_arrays(rec_key + "-k", arrays)
    return record, arrays
