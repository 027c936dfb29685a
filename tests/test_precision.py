"""Every product in the units, heads, training and NTK code names its precision (issue 51).

jax's default precision lets Ampere/Hopper GPUs compute float32 products in TF32 (about three
significant digits), so a GPU run would silently differ from the CPU's. Each ``dot_general`` (and
convolution) in the programs lazylab compiles must therefore carry ``Precision.HIGHEST``
(``lazylab.network.PRECISION``): named in lazylab's own code (the head, the NTK contractions), and set
around every bank's call (``lazylab.network.apply_bank``) for the units, whatever their code names.
These tests trace the programs (``jax.make_jaxpr``) and walk every equation, sub-programs (``jit``,
``scan``, ``custom_jvp``, gradients) included. Synthetic inputs: only the programs' structure is read,
nothing is computed.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.extend.core import jaxprs_in_params

from lazylab.arms import get_arm
from lazylab.network import Model

PRODUCTS = ("dot_general", "conv_general_dilated")
HIGHEST = jax.lax.Precision.HIGHEST
D, M, N = 784, 8, 16  # image size, units, images


def products(jaxpr) -> list:
    """Every product equation of ``jaxpr`` (a Jaxpr or ClosedJaxpr) and of every program inside it."""
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    found = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in PRODUCTS:
            found.append(eqn)
        for sub in jaxprs_in_params(eqn.params):
            found += products(sub)
    return found


def imprecise(jaxpr) -> list[str]:
    """``"<primitive> at <file:line (function)>"`` for each product of ``jaxpr`` not at float32 HIGHEST."""
    from jax._src import source_info_util

    bad = []
    for eqn in products(jaxpr):
        precision = eqn.params.get("precision")
        pair = precision if isinstance(precision, tuple) else (precision, precision)
        if any(p != HIGHEST for p in pair):
            bad.append(f"{eqn.primitive.name} at {source_info_util.summarize(eqn.source_info)} (precision={precision})")
    return bad


def model_of(name: str, seed: int = 0) -> Model:
    """A small ``Model`` of arm ``name``'s unit (m = 8), built without the conformance suite."""
    arm = get_arm(name)
    rng = np.random.default_rng(seed)
    x_ref = rng.random((N, D), np.float32)
    W = x_ref[:M] if arm.init == "data" else rng.standard_normal((M, D)).astype(np.float32) / np.sqrt(M)
    bank_key, head_key = jax.random.split(jax.random.key(seed))
    return Model(arm.unit.make_bank(W, x_ref, key=jax.random.fold_in(bank_key, 1)), M, head_key)


ARMS = ("yat-trained", "yat-data-trained", "relu-trained", "gaussian-trained", "rff-trained")


def images(n: int = N) -> jax.Array:
    return jnp.asarray(np.random.default_rng(1).random((n, D), np.float32))


def test_the_walk_finds_a_product_at_default_precision_inside_a_jitted_scan():
    @jax.jit
    def loop(x, w):
        return jax.lax.scan(lambda c, _: (c @ w, None), x, None, length=2)[0]

    x = jnp.ones((2, 2))
    found = imprecise(jax.make_jaxpr(loop)(x, x))
    assert len(found) == 1 and found[0].startswith("dot_general at ") and "precision=None" in found[0]
    assert imprecise(jax.make_jaxpr(lambda a: jnp.matmul(a, a, precision=HIGHEST))(x)) == []


class PlainBank(nnx.Module):
    """A unit whose product names no precision (as the built-in ReLU bank, or a third-party unit, may)."""

    def __init__(self):
        self.W = nnx.Param(jnp.ones((M, D), jnp.float32))

    def __call__(self, x):
        return x @ self.W[...].T


def test_a_bank_that_names_no_precision_runs_at_highest_through_apply_bank():
    from lazylab.network import apply_bank

    bank, x = PlainBank(), images()
    assert len(imprecise(jax.make_jaxpr(bank)(x))) == 1  # on its own: jax's default precision
    assert imprecise(jax.make_jaxpr(lambda x: apply_bank(bank, x))(x)) == []
    graphdef, params = nnx.split(bank)
    grad = jax.make_jaxpr(jax.grad(lambda p: jnp.sum(apply_bank(nnx.merge(graphdef, p), x) ** 2)))(params)
    assert len(products(grad)) == 2 and imprecise(grad) == []


@pytest.mark.parametrize("name", ARMS)
def test_every_units_features_logits_and_gradients_name_their_precision(name):
    from lazylab.model import _apply_bank

    model = model_of(name)
    x = images()
    graphdef, state = nnx.split(model.feat)
    assert products(jax.make_jaxpr(_apply_bank, static_argnums=0)(graphdef, state, x))
    assert imprecise(jax.make_jaxpr(_apply_bank, static_argnums=0)(graphdef, state, x)) == []
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    loss = lambda p: jnp.sum(nnx.merge(graphdef, p, rest)(x) ** 2)
    assert imprecise(jax.make_jaxpr(jax.grad(loss))(params)) == []


@pytest.mark.parametrize("trained", [True, False])
def test_the_training_epoch_and_the_accuracy_name_their_precision(trained):
    from lazylab import train

    model = model_of("yat-trained")
    net = model if trained else model.head  # a frozen arm trains its head on stored features
    x = images(512) if trained else jnp.ones((512, M), jnp.float32)
    graphdef, params, rest = nnx.split(net, nnx.Param, ...)
    stack = lambda t: jax.tree.map(lambda a: a[None], t)
    tx = train.optimizer(1.0, 1e-4)
    opt_state = jax.vmap(tx.init)(stack(params))
    y = jnp.zeros((512,), jnp.int32)
    order = jnp.zeros((1, 2, 256), jnp.int32)
    epoch = jax.make_jaxpr(train._epoch, static_argnums=(0, 1))(graphdef, tx, stack(params), opt_state, stack(rest),
                                                               x, y, order)
    # forward and the parameters' gradient; a trained bank adds the gradient through the head into it
    assert len(products(epoch)) >= (3 if trained else 2)
    assert imprecise(epoch) == []
    correct = jax.make_jaxpr(train._correct, static_argnums=0)(graphdef, stack(params), stack(rest), x, y)
    assert imprecise(correct) == []


def test_the_readout_head_names_its_precision():
    from lazylab.network import linear_head

    graphdef, params = nnx.split(linear_head(M, jax.random.key(0)))
    loss = lambda p: jnp.sum(nnx.merge(graphdef, p)(jnp.ones((4, M))) ** 2)
    assert len(products(jax.make_jaxpr(jax.value_and_grad(loss))(params))) >= 2
    assert imprecise(jax.make_jaxpr(jax.value_and_grad(loss))(params)) == []


@pytest.mark.parametrize("name", ["yat-trained", "gaussian-trained", "relu-trained"])
def test_the_ntk_contractions_and_the_linearization_name_their_precision(name):
    from lazylab import train
    from lazylab.experiments import ntk as arm_ntk
    from lazylab.ntk import kernels

    model = model_of(name)
    x = images(4)
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    programs = {}
    programs["per-example Jacobian"] = jax.make_jaxpr(kernels._per_example_jac, static_argnums=0)(
        graphdef, params, rest, x)
    J = kernels._per_example_jac(graphdef, params, rest, x)
    programs["Jacobian contraction"] = jax.make_jaxpr(kernels._contract)(J, J)
    plan = kernels.structured_plan(model, nnx.Param, np.asarray(x))
    assert not isinstance(plan, str), plan
    gd, pu, sh, rest_f = kernels._feat_split(model.feat, plan.per_unit, plan.shared)
    H = model.head.kernel[...]
    programs["unit gradients"] = jax.make_jaxpr(kernels._unit_grads, static_argnums=0)(gd, pu, sh, rest_f, x)
    G = kernels._unit_grads(gd, pu, sh, rest_f, x)
    programs["unit block"] = jax.make_jaxpr(kernels._unit_block)(G, G, H[:, :, None] * H[:, None, :])
    if plan.shared:
        programs["shared columns"] = jax.make_jaxpr(kernels._shared_cols, static_argnums=0)(gd, pu, sh, rest_f, x, H)
    tx = train.optimizer(0.01, 1e-4)
    y, order = jnp.zeros((4,), jnp.int32), jnp.zeros((1, 4), jnp.int32)
    programs["linearized epoch"] = jax.make_jaxpr(arm_ntk._lin_epoch, static_argnums=(0, 1))(
        graphdef, tx, params, tx.init(params), params, rest, x, y, order)
    programs["linearized logits"] = jax.make_jaxpr(arm_ntk._lin_logits, static_argnums=0)(
        graphdef, params, params, rest, x)
    for what, jaxpr in programs.items():
        assert products(jaxpr), what
        assert imprecise(jaxpr) == [], what

