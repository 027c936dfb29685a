"""Training per SPEC section 5.

Softmax cross-entropy, ``optax.adamw(lr, weight_decay=1e-4)`` at a constant
rate (Loshchilov & Hutter 2019), batch 256 with the last partial batch
dropped, a fresh permutation each epoch from ``numpy.random.default_rng(seed)``,
test accuracy after every epoch.

The fast path follows the flax NNX guidance: ``nnx.split`` once, then one
pure ``jax.jit`` program per epoch (a ``lax.scan`` over the epoch's batches)
over state pytrees, and ``nnx.merge`` inside. What trains is chosen by a
filter on the model's state, so a frozen bank can be trained step by step
(bank in the forward pass) or, equivalently, as a head on stored features.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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


@partial(jax.jit, static_argnums=(0, 1), donate_argnums=(2, 3))
def _epoch(graphdef, tx, trainable, opt_state, rest, x, y, order):
    def step(carry, idx):
        params, state = carry
        loss, grads = jax.value_and_grad(_loss, argnums=1)(graphdef, params, rest, x[idx], y[idx])
        updates, state = tx.update(grads, state, params)
        return (optax.apply_updates(params, updates), state), loss

    (trainable, opt_state), losses = jax.lax.scan(step, (trainable, opt_state), order)
    return trainable, opt_state, losses


@partial(jax.jit, static_argnums=(0,))
def _correct(graphdef, trainable, rest, x, y):
    logits = nnx.merge(graphdef, trainable, rest)(x)
    return jnp.sum(jnp.argmax(logits, axis=-1) == y)


def accuracy(graphdef, trainable, rest, x, y, chunk: int = 2500) -> float:
    """Test accuracy in percent of the merged model on ``x`` ``(n, d)``, ``y`` ``(n,)``."""
    correct = sum(int(_correct(graphdef, trainable, rest, x[i : i + chunk], y[i : i + chunk])) for i in range(0, len(x), chunk))
    return 100.0 * correct / len(x)


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
    """Train ``model`` in place of nothing: returns the final trainable state and curves.

    Args:
      model: an nnx module mapping ``(n, d_in)`` to logits ``(n, 10)``; it is not mutated.
      x_train, y_train: ``(n, d_in)`` float32 inputs and ``(n,)`` int labels.
      x_test, y_test: evaluation split (the protocol evaluates on the test set).
      lr, epochs, batch, seed, weight_decay: SPEC section 5.
      trainable_filter: nnx filter naming what trains (e.g. ``nnx.PathContains("head")``);
        everything else is held fixed bit for bit.
      on_epoch: called as ``on_epoch(epoch, test_acc)`` after each epoch.
      on_epoch_state: called as ``on_epoch_state(epoch, trainable)`` after each
        epoch (1-based) with the trainable ``nnx.State``; its buffers are donated to
        the next epoch, so copy what you keep (``jax.tree.map(np.array, trainable)``).
    Returns: FitResult; training stops at the first non-finite loss (diverged).
    Raises: ValueError if ``len(x_train) < batch``.
    """
    n = len(x_train)
    if n < batch:
        raise ValueError(f"training set of {n} images is smaller than one batch of {batch}")
    graphdef, trainable, rest = nnx.split(model, trainable_filter, ...)
    tx = optimizer(lr, weight_decay)
    opt_state = tx.init(trainable)
    x_train, y_train = jnp.asarray(x_train), jnp.asarray(y_train)
    x_test, y_test = jnp.asarray(x_test), jnp.asarray(y_test)
    orders = batch_orders(seed, n, batch, epochs)
    result = FitResult()
    for epoch in range(epochs):
        # Copy so donation never invalidates the caller's (the model's) arrays.
        if epoch == 0:
            trainable = jax.tree.map(jnp.copy, trainable)
        trainable, opt_state, losses = _epoch(graphdef, tx, trainable, opt_state, rest, x_train, y_train, jnp.asarray(orders[epoch]))
        losses = np.asarray(losses)
        bad = np.flatnonzero(~np.isfinite(losses))
        if bad.size:
            step = int(bad[0])
            result.diverged = {"epoch": epoch + 1, "step": epoch * len(losses) + step, "loss": str(float(losses[step]))}
            break
        if not all(bool(jnp.isfinite(leaf).all()) for leaf in jax.tree.leaves(trainable)):
            # Parameters overflowed although the loss stayed finite (e.g. a huge rate): a divergence too.
            step = epoch * len(losses) + len(losses) - 1
            result.diverged = {"epoch": epoch + 1, "step": step, "loss": str(float(losses[-1]))}
            break
        result.train_loss.append(float(losses.mean()))
        result.curve.append(accuracy(graphdef, trainable, rest, x_test, y_test))
        if on_epoch:
            on_epoch(epoch + 1, result.curve[-1])
        if on_epoch_state:
            on_epoch_state(epoch + 1, trainable)
    result.trainable = trainable
    return result
