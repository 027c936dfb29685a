"""Tangent kernels, measured (SPEC section 7, ``ntk``).

* ``lab`` — the 1-D two-layer tanh network and its first-order Taylor model,
  trained by full-batch gradient descent from one initialization; NTK drift,
  movement, disagreement, and a width sweep (numpy float64, analytic Jacobian).
* ``audit`` — the SPEC's checks of the lab, each with its measured value.
* ``scalar`` — the exact factorized model ``f = a b x`` in closed form against
  a small-step RK4 integration, two negative controls, the two-mode decay.
* ``kernels`` — empirical NTKs of lazylab models with jax alone (full
  Jacobian, chunked rows, or the bank + head structured contraction).
* ``checks`` — the pass/fail record the audit and the scalar model report.
* ``price`` — what an empirical NTK costs, for ``lazylab ntk arm --dry-run``.

The Fashion-MNIST arm experiment, which needs the data and the memo, is
``lazylab.experiments.ntk.run_arm``. Nothing here imports neural-tangents
(it does not import on current JAX), and nothing flips jax's global x64 flag:
the lab and the scalar model are numpy float64, the arm kernels float32
summed in float64.
"""
