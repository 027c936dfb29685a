"""Training per SPEC section 5.

Softmax cross-entropy, ``optax.adamw(lr, weight_decay=1e-4)`` at a constant
rate (Loshchilov & Hutter 2019), batch 256 with the last partial batch
dropped, a fresh permutation each epoch from ``numpy.random.default_rng(seed)``,
test accuracy after every epoch.

The fast path follows the flax NNX guidance: ``nnx.split`` once, then one
pure ``jax.jit`` program per epoch (a ``lax.scan`` over the epoch's batches)
over state pytrees, and ``nnx.merge`` inside; ``fit_batch`` runs several runs
of one shape as one such program, their steps side by side, and ``fit`` is its
one-run case. What trains is chosen by a filter on the model's state, so a
frozen bank can be trained step by step (bank in the forward pass) or,
equivalently, as a head on stored features.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import math
from functools import lru_cache, partial
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx


@dataclass
class FitResult:
    """Outcome of one training run.

    Attributes:
      curve: test accuracy (%) after each completed epoch.
      train_loss: mean training loss per completed epoch.
      diverged: ``None``, or ``{"epoch", "step", "loss"}`` of the first
        non-finite training loss (or the end of the epoch whose parameters overflowed) (1-based epoch, 0-based global step; the loss
        as text, ``"nan"`` or ``"inf"``, since strict JSON has no such numbers).
      trainable: the final trainable state (an ``nnx.State``).
    """

    curve: list[float] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    diverged: dict | None = None
    trainable: object = None

    @property
    def best_acc(self) -> float | None:
        """Highest per-epoch test accuracy (%): selects on the test set (SPEC section 5)."""
        return max(self.curve) if self.curve and self.diverged is None else None

    @property
    def final_acc(self) -> float | None:
        """Test accuracy (%) after the last epoch."""
        return self.curve[-1] if self.curve and self.diverged is None else None


@lru_cache(maxsize=None)
def optimizer(lr: float, weight_decay: float) -> optax.GradientTransformation:
    """AdamW with the rate held in the optimiser state.

    Cached: ``tx`` is a static argument of the jitted epoch, and a freshly built
    transformation (new function objects) would miss jax's compile cache on
    every run; the same (rate, decay) now reuses one compiled program.
    """
    return optax.inject_hyperparams(optax.adamw)(learning_rate=lr, weight_decay=weight_decay)


def batch_orders(seed: int, n: int, batch: int, epochs: int) -> np.ndarray:
    """Index batches ``(epochs, n // batch, batch)``: one fresh permutation per epoch, partial batch dropped."""
    rng = np.random.default_rng(seed)
    steps = n // batch
    return np.stack([rng.permutation(n)[: steps * batch].reshape(steps, batch) for _ in range(epochs)])


def _loss(graphdef, trainable, rest, xb, yb):
    logits = nnx.merge(graphdef, trainable, rest)(xb)
    return optax.softmax_cross_entropy_with_integer_labels(logits, yb).mean()


def _step(graphdef, tx, params, state, rest, x, y, idx):
    """One member's AdamW step on the batch ``idx`` ``(batch,)``: ``(params, state, loss)``."""
    loss, grads = jax.value_and_grad(_loss, argnums=1)(graphdef, params, rest, x[idx], y[idx])
    updates, state = tx.update(grads, state, params)
    return optax.apply_updates(params, updates), state, loss


def _unstack(tree, members: int) -> list:
    """The ``members`` trees along a stacked tree's leading axis (inside jit: slices, no dispatch)."""
    return [jax.tree.map(lambda a: a[i], tree) for i in range(members)]


def _member_inputs(x, members: int) -> list:
    """Each member's inputs: its own array when ``x`` is a tuple of them, else ``x`` itself, shared."""
    return list(x) if isinstance(x, tuple) else [x] * members


@partial(jax.jit, static_argnums=(0, 1), donate_argnums=(2, 3))
def _epoch(graphdef, tx, trainable, opt_state, rest, x, y, order):
    """Every member's epoch in one program: a ``lax.scan`` over the batches whose step holds
    each member's step side by side; ``order`` is ``(members, steps, batch)``, ``x`` is one
    array shared by every member or a tuple of one array per member.

    Side by side rather than ``jax.vmap``: vmap turns each product into one batched
    product, which XLA's CPU backend ran 2-4x slower per member than the plain ones
    (profiles in docs/performance.md), while independent members' ops run
    concurrently on the cores and compute exactly what each member computes alone.
    """
    S = order.shape[0]
    rests = _unstack(rest, S)
    xs = _member_inputs(x, S)

    def step(carry, idx):  # idx: (members, batch)
        out = [_step(graphdef, tx, p, s, r, xx, y, i) for (p, s), r, xx, i in zip(carry, rests, xs, idx)]
        return tuple((p, s) for p, s, _ in out), jnp.stack([loss for _, _, loss in out])

    carry = tuple(zip(_unstack(trainable, S), _unstack(opt_state, S)))
    carry, losses = jax.lax.scan(step, carry, jnp.swapaxes(order, 0, 1))
    return _stack([p for p, _ in carry]), _stack([s for _, s in carry]), losses.T


@partial(jax.jit, static_argnums=0)
def _correct(graphdef, trainable, rest, x, y):
    """``(members,)`` correct predictions of each member on ``x``, members side by side (as ``_epoch``)."""
    S = jax.tree.leaves(trainable)[0].shape[0]
    xs = _member_inputs(x, S)
    count = lambda p, r, xx: jnp.sum(jnp.argmax(nnx.merge(graphdef, p, r)(xx), axis=-1) == y)
    return jnp.stack([count(p, r, xx) for p, r, xx in zip(_unstack(trainable, S), _unstack(rest, S), xs)])


def _accuracies(graphdef, trainable, rest, x, y, chunk: int = 2500) -> np.ndarray:
    """Test accuracy (%) of every member, ``(members,)``, evaluated in chunks of images."""
    n = y.shape[0]
    take = (lambda i: tuple(a[i : i + chunk] for a in x)) if isinstance(x, tuple) else (lambda i: x[i : i + chunk])
    correct = sum(np.asarray(_correct(graphdef, trainable, rest, take(i), y[i : i + chunk])) for i in range(0, n, chunk))
    return 100.0 * correct / n


@jax.jit
def _finite_members(trainable) -> jax.Array:
    """``(S,)`` bools: whether every parameter of member ``i`` is finite."""
    leaves = jax.tree.leaves(trainable)
    return jnp.stack([jnp.isfinite(leaf.reshape(leaf.shape[0], -1)).all(axis=1) for leaf in leaves]).all(axis=0)


def _stack(trees):
    return jax.tree.map(lambda *leaves: jnp.stack(leaves), *trees)


def _member(tree, i: int):
    return jax.tree.map(lambda a: a[i], tree)


def _members(models, trainable_filter, weight_decay: float, n: int, batch: int, who: str):
    """``(graphdef, trainable, rest, tx, opt_state)`` of members trained side by side: each model split by
    ``trainable_filter``, the parts stacked on a leading axis (stacking copies, so donation never invalidates the
    models' own arrays), AdamW with its rate in the optimiser state (one compiled program serves every rate).
    Raises: ValueError if ``n < batch`` or the models do not share one graph (``who`` names the caller)."""
    if n < batch:
        raise ValueError(f"training set of {n} images is smaller than one batch of {batch}")
    splits = [nnx.split(model, trainable_filter, ...) for model in models]
    graphdef = splits[0][0]
    if any(g != graphdef for g, _, _ in splits):
        raise ValueError(f"{who} members must share one model structure (one arm and width)")
    trainable, rest = _stack([t for _, t, _ in splits]), _stack([r for _, _, r in splits])
    tx = optimizer(1.0, weight_decay)
    return graphdef, trainable, rest, tx, jax.vmap(tx.init)(trainable)


def fit_batch(
    models: list[nnx.Module],
    x_train,
    y_train,
    x_test,
    y_test,
    *,
    lrs: list[float],
    seeds: list[int],
    epochs: int,
    batch: int,
    weight_decay: float = 1e-4,
    trainable_filter=nnx.Param,
    on_epoch: Callable[[int, int, float], None] | None = None,
    on_epoch_state: Callable[[int, int, object], None] | None = None,
) -> list[FitResult]:
    """Train several runs of one shape as one compiled program (SPEC section 5 for each).

    Member ``i`` is ``models[i]`` trained at rate ``lrs[i]`` with the batch order of
    ``seeds[i]``; members share labels, protocol and model structure (one arm and
    width). Parameters, AdamW states (the rate lives in the state,
    ``optax.inject_hyperparams``) and batch orders are stacked on a leading axis
    and every epoch runs as one ``lax.scan`` whose step holds every member's step
    side by side (``_epoch``), so the seeds of a cell or the rates of a bracket
    share one dispatch per epoch and run concurrently on the cores.

    A member computes exactly what it computes alone: its results (accuracy
    curves, losses, parameters) equal its one-at-a-time run's (``fit``) bit for
    bit, whatever its position or the other members (tested). A member whose
    loss turns non-finite is recorded as diverged at that epoch and ignored
    thereafter; the others go on.

    Args:
      models: S nnx modules mapping ``(n, d_in)`` to logits ``(n, 10)``, one graph; not mutated.
      x_train: float32 inputs ``(n, d_in)`` shared by every member (a trained bank's
        images), or a list of S such arrays, one per member (each frozen bank's features).
      x_test: likewise ``(n_test, d_in)`` or a list of S.
      y_train, y_test: int labels ``(n,)`` and ``(n_test,)``.
      lrs, seeds: S rates and S batch-order seeds.
      epochs, batch, weight_decay: SPEC section 5.
      trainable_filter: nnx filter naming what trains; the rest is held fixed bit for bit.
      on_epoch: called as ``on_epoch(member, epoch, test_acc)`` after each epoch (1-based).
      on_epoch_state: called as ``on_epoch_state(member, epoch, trainable)`` with the
        member's trainable ``nnx.State`` (a copy it may keep).
    Returns: one FitResult per member, in order.
    Raises: ValueError if ``n < batch``, if there is not one rate, seed (and
      input, when not shared) per model, or if the models do not share one graph.
    """
    S = len(models)
    per_member = lambda x: isinstance(x, (list, tuple))
    if not S or not len(lrs) == len(seeds) == S or any(per_member(x) and len(x) != S for x in (x_train, x_test)):
        raise ValueError(f"fit_batch needs one rate, seed (and input, if not shared) per model, got {S} models, "
                         f"{len(lrs)} rates, {len(seeds)} seeds")
    n = len(y_train)
    graphdef, trainable, rest, tx, opt_state = _members(models, trainable_filter, weight_decay, n, batch, "fit_batch")
    opt_state.hyperparams["learning_rate"] = jnp.asarray(lrs, jnp.float32)
    # Per-member inputs stay separate arrays: stacking them would copy every one.
    x_train, x_test = (tuple(map(jnp.asarray, x)) if per_member(x) else jnp.asarray(x) for x in (x_train, x_test))
    y_train, y_test = jnp.asarray(y_train), jnp.asarray(y_test)
    orders = np.stack([batch_orders(seed, n, batch, epochs) for seed in seeds], axis=1)  # (epochs, S, steps, batch)
    results = [FitResult() for _ in range(S)]
    for epoch in range(epochs):
        trainable, opt_state, losses = _epoch(graphdef, tx, trainable, opt_state, rest, x_train, y_train, jnp.asarray(orders[epoch]))
        losses = np.asarray(losses)  # (S, steps)
        live = [i for i in range(S) if results[i].diverged is None]
        # One pass over the stacked parameters: which members are still all finite.
        finite = np.asarray(_finite_members(trainable))
        for i in live:
            bad = np.flatnonzero(~np.isfinite(losses[i]))
            if bad.size:
                step = int(bad[0])
                results[i].diverged = {"epoch": epoch + 1, "step": epoch * losses.shape[1] + step, "loss": str(float(losses[i, step]))}
            elif not finite[i]:
                # Parameters overflowed although the loss stayed finite (e.g. a huge rate): a divergence too.
                results[i].diverged = {"epoch": epoch + 1, "step": (epoch + 1) * losses.shape[1] - 1,
                                       "loss": str(float(losses[i, -1]))}
        live = [i for i in live if results[i].diverged is None]
        if not live:
            break
        accs = _accuracies(graphdef, trainable, rest, x_test, y_test)
        for i in live:
            results[i].train_loss.append(float(losses[i].mean()))
            results[i].curve.append(float(accs[i]))
            if on_epoch:
                on_epoch(i, epoch + 1, results[i].curve[-1])
            if on_epoch_state:
                on_epoch_state(i, epoch + 1, _member(trainable, i))
    for i, result in enumerate(results):
        result.trainable = _member(trainable, i)
    return results


def accuracy(graphdef, trainable, rest, x, y, chunk: int = 2500) -> float:
    """Test accuracy in percent of the merged model on ``x`` ``(n, d)``, ``y`` ``(n,)``."""
    return float(_accuracies(graphdef, _stack([trainable]), _stack([rest]), jnp.asarray(x), jnp.asarray(y), chunk)[0])


def fit(
    model: nnx.Module,
    x_train,
    y_train,
    x_test,
    y_test,
    *,
    lr: float,
    epochs: int,
    batch: int,
    seed: int,
    weight_decay: float = 1e-4,
    trainable_filter=nnx.Param,
    on_epoch: Callable[[int, float], None] | None = None,
    on_epoch_state: Callable[[int, object], None] | None = None,
) -> FitResult:
    """Train one run: ``fit_batch`` with a single member.

    Args:
      model: an nnx module mapping ``(n, d_in)`` to logits ``(n, 10)``; it is not mutated.
      x_train, y_train: ``(n, d_in)`` float32 inputs and ``(n,)`` int labels.
      x_test, y_test: evaluation split (the protocol evaluates on the test set).
      lr, epochs, batch, seed, weight_decay: SPEC section 5.
      trainable_filter: nnx filter naming what trains (e.g. ``nnx.PathContains("head")``).
      on_epoch: called as ``on_epoch(epoch, test_acc)`` after each epoch.
      on_epoch_state: called as ``on_epoch_state(epoch, trainable)`` after each epoch
        (1-based) with the trainable ``nnx.State``.
    Returns: FitResult; training stops at the first non-finite loss (diverged).
    Raises: ValueError if ``len(x_train) < batch``.
    """
    return fit_batch(
        [model], x_train, y_train, x_test, y_test, lrs=[lr], seeds=[seed], epochs=epochs, batch=batch,
        weight_decay=weight_decay, trainable_filter=trainable_filter,
        on_epoch=(lambda _, e, a: on_epoch(e, a)) if on_epoch else None,
        on_epoch_state=(lambda _, e, t: on_epoch_state(e, t)) if on_epoch_state else None,
    )[0]


# ------------------------------------------------------------------ annealed training, chosen on held-out images
def cosine_factor(epoch: int, horizon: int) -> float:
    """The learning-rate multiplier of 0-based ``epoch`` under cosine annealing over ``horizon`` epochs.

    ``0.5 (1 + cos(pi epoch / horizon))``: 1 in the first epoch, falling to about ``(pi / 2 horizon)^2`` in the
    last. Loshchilov & Hutter (2017), "SGDR", eq. 5 with one cycle (``eta_min = 0``), stepped once per epoch as
    PyTorch's ``CosineAnnealingLR`` is when called per epoch.
    """
    return 0.5 * (1.0 + math.cos(math.pi * epoch / horizon))


@dataclass
class EvalSet:
    """Images a run is scored on after its epochs: ``x`` ``(n, d_in)``, ``y`` ``(n,)``; ``masks`` ``(S, n)`` bools of the
    images each member scores (None: all); ``every_epoch``: after every epoch, else only after a member's last."""

    x: object
    y: object
    masks: np.ndarray | None = None
    every_epoch: bool = True


@dataclass
class AnnealedResult:
    """One member of ``fit_annealed``.

    Attributes:
      curves: ``{eval name: [accuracy % per epoch scored]}`` (an ``every_epoch=False`` set holds one value).
      train_loss: mean training loss per completed epoch (nats).
      diverged: as ``FitResult.diverged``.
      epochs: epochs trained (up to the stop).
      stop: ``"patience"`` (the monitored curve did not improve for ``patience`` epochs), ``"epochs"`` (the
        member's own epoch count reached), ``"budget"`` (the schedule's horizon reached) or ``"diverged"``.
    """

    curves: dict = field(default_factory=dict)
    train_loss: list[float] = field(default_factory=list)
    diverged: dict | None = None
    epochs: int = 0
    stop: str = ""


@partial(jax.jit, static_argnums=0)
def _right(graphdef, trainable, rest, x, y):
    """``(members, n)`` bools: each member's correct predictions on ``x`` (members side by side, as ``_epoch``)."""
    S = jax.tree.leaves(trainable)[0].shape[0]
    xs = _member_inputs(x, S)
    right = lambda p, r, xx: jnp.argmax(nnx.merge(graphdef, p, r)(xx), axis=-1) == y
    return jnp.stack([right(p, r, xx) for p, r, xx in zip(_unstack(trainable, S), _unstack(rest, S), xs)])


def _scored(graphdef, trainable, rest, ev: EvalSet, chunk: int = 2500) -> np.ndarray:
    """Accuracy (%) of every member on ``ev``'s images, each over its own mask, ``(members,)``."""
    n = len(ev.y)
    right = np.concatenate([np.asarray(_right(graphdef, trainable, rest, ev.x[i : i + chunk], ev.y[i : i + chunk]))
                            for i in range(0, n, chunk)], axis=1)
    masks = np.ones_like(right) if ev.masks is None else np.asarray(ev.masks, bool)
    return 100.0 * (right & masks).sum(axis=1) / masks.sum(axis=1)


def fit_annealed(
    models: list[nnx.Module],
    x_train,
    y_train,
    evals: dict[str, EvalSet],
    *,
    lrs: list[float],
    seeds: list[int],
    horizon: int,
    batch: int,
    epochs: list[int] | None = None,
    monitor: str | None = None,
    patience: int | None = None,
    weight_decay: float = 1e-4,
    trainable_filter=nnx.Param,
    on_epoch: Callable[[int, int, float], None] | None = None,
) -> list[AnnealedResult]:
    """Train several runs of one shape as one program (as ``fit_batch``), each at its peak rate times the
    per-epoch cosine multiplier (``cosine_factor``) over ``horizon`` epochs, scoring them on ``evals``.

    AdamW (Loshchilov & Hutter 2019) with the SPEC's batch and batch order; the rate lives in the optimiser
    state (``optax.inject_hyperparams``), so each epoch's rate is set between epochs without recompiling.
    Member ``i`` stops after ``epochs[i]`` epochs (default ``horizon``), or, with ``monitor`` and
    ``patience``, once its accuracy on ``evals[monitor]`` has not improved (strictly) for ``patience``
    epochs (early stopping, Prechelt 1998); a stopped member's steps go on in the shared program but
    nothing of them is kept. Members compute exactly what they compute alone (tested, as ``fit_batch``).

    Args:
      models: S nnx modules mapping ``(n, d_in)`` to logits ``(n, 10)``, one graph; not mutated.
      x_train, y_train: ``(n, d_in)`` float32 images shared by every member and ``(n,)`` labels.
      evals: named ``EvalSet`` s (e.g. ``"held_out"`` every epoch, ``"test"``).
      lrs, seeds: S peak rates and S batch-order seeds.
      horizon: the cosine schedule's length in epochs, and the most any member trains.
      batch, weight_decay: SPEC section 5.
      epochs: S epoch counts (each at most ``horizon``).
      monitor, patience: early stopping on ``evals[monitor]`` (both or neither).
      on_epoch: called as ``on_epoch(member, epoch, accuracy on monitor)`` after each of its epochs.
    Returns: one ``AnnealedResult`` per member, in order.
    Raises: ValueError for ``n < batch``, mismatched lengths, an epoch count outside ``1..horizon``, or
      ``monitor`` without ``patience`` (or an unknown ``monitor``).
    """
    S = len(models)
    epochs = [horizon] * S if epochs is None else [int(e) for e in epochs]
    if not S or not len(lrs) == len(seeds) == len(epochs) == S:
        raise ValueError(f"fit_annealed needs one rate, seed and epoch count per model, got {S} models, "
                         f"{len(lrs)} rates, {len(seeds)} seeds, {len(epochs)} epoch counts")
    if any(not 1 <= e <= horizon for e in epochs):
        raise ValueError(f"epoch counts must lie in 1..{horizon}, got {epochs}")
    if (monitor is None) != (patience is None) or (monitor is not None and monitor not in evals):
        raise ValueError(f"early stopping needs a monitor among {sorted(evals)} and a patience, got "
                         f"{monitor!r} and {patience!r}")
    n = len(y_train)
    graphdef, trainable, rest, tx, opt_state = _members(models, trainable_filter, weight_decay, n, batch,
                                                        "fit_annealed")
    peak = np.asarray(lrs, np.float64)
    x_train, y_train = jnp.asarray(x_train), jnp.asarray(y_train)
    evals = {name: EvalSet(jnp.asarray(ev.x), jnp.asarray(ev.y), ev.masks, ev.every_epoch) for name, ev in evals.items()}
    last = max(epochs)
    orders = np.stack([batch_orders(seed, n, batch, last) for seed in seeds], axis=1)  # (epochs, S, steps, batch)
    results = [AnnealedResult(curves={name: [] for name in evals}) for _ in range(S)]
    for epoch in range(last):
        live = [i for i in range(S) if not results[i].stop]
        if not live:
            break
        opt_state.hyperparams["learning_rate"] = jnp.asarray(peak * cosine_factor(epoch, horizon), jnp.float32)
        trainable, opt_state, losses = _epoch(graphdef, tx, trainable, opt_state, rest, x_train, y_train,
                                              jnp.asarray(orders[epoch]))
        losses = np.asarray(losses)
        finite = np.asarray(_finite_members(trainable))
        for i in live:
            bad = np.flatnonzero(~np.isfinite(losses[i]))
            if bad.size or not finite[i]:
                step = int(bad[0]) if bad.size else losses.shape[1] - 1
                results[i].diverged = {"epoch": epoch + 1, "step": epoch * losses.shape[1] + step,
                                       "loss": str(float(losses[i, step]))}
                results[i].stop = "diverged"
        live = [i for i in live if not results[i].stop]
        ending = {i for i in live if epoch + 1 == epochs[i]}
        for name, ev in evals.items():
            if ev.every_epoch or ending:
                accs = _scored(graphdef, trainable, rest, ev)
                for i in (live if ev.every_epoch else ending):
                    results[i].curves[name].append(float(accs[i]))
        for i in live:
            r = results[i]
            r.train_loss.append(float(losses[i].mean()))
            r.epochs = epoch + 1
            if on_epoch:
                on_epoch(i, epoch + 1, r.curves[monitor][-1] if monitor else float("nan"))
            if i in ending:
                r.stop = "budget" if epochs[i] == horizon else "epochs"
            elif monitor and epoch + 1 - (int(np.argmax(r.curves[monitor])) + 1) >= patience:
                r.stop = "patience"
    return results
