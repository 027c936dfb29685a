"""The exact scalar factorized model (SPEC section 7, ``ntk`` item 2).

``f = a b x`` with ``x = y = 1``, loss ``(ab - 1)^2 / 2``, balanced start
``a0 = b0 = sqrt(w0)``, ``w = ab = a^2``. Gradient flow keeps ``a = b`` and
gives the logistic equation ``dw/dt = 2 w (1 - w)`` (Saxe, McClelland &
Ganguli 2014, "Exact solutions to the nonlinear dynamics of learning in deep
linear neural networks", eq. 7 in one dimension)::

    w(t)      = 1 / (1 + (1/w0 - 1) e^(-2t))               network output
    K(t)      = ||df/dtheta||^2 = a^2 + b^2 = 2 w(t)          its tangent kernel
    f_lin(t)  = 1 - (1 - w0) e^(-2 w0 t)                    linearization at theta0 (kernel frozen at 2 w0)
    |theta(t) - theta0|     = sqrt(2) |sqrt(w(t)) - sqrt(w0)|
    |theta_lin(t) - theta0| = sqrt(2) |1 - w0| / (2 sqrt(w0)) (1 - e^(-2 w0 t))

All of it is checked against a fixed-step fourth-order Runge-Kutta
integration of the two parameter flows (float64, step ``dt``), which never
uses the closed forms. Two negative controls must fail their checks: a
linear model started at a mismatched offset ``f_lin(0) = f(0) + offset``, and
the "linearization" with the kernel frozen at its final value ``2 w(T)``
(a different model). Finally the two-mode residual decay ``dr/dt = -K r``
with ``K`` of eigenvalues 1 and 0.01 (rotated off the axes): each mode decays
as ``e^(-lambda t)``, the slow one a hundred times slower.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from lazylab.ntk.checks import Check

DEFAULT_TIMES = (0.0, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0)
TOL = 1e-6  # absolute agreement required between closed forms and the integrator
TWO_MODE_EIGS = (1.0, 0.01)
TWO_MODE_ANGLE = math.pi / 6  # rotation of K's eigenbasis away from the axes


# ------------------------------------------------------------- closed forms
def w_closed(t, w0: float):
    """Network output ``w(t) = 1 / (1 + (1/w0 - 1) e^(-2t))``."""
    t = np.asarray(t, np.float64)
    return 1.0 / (1.0 + (1.0 / w0 - 1.0) * np.exp(-2.0 * t))


def f_lin_closed(t, w0: float):
    """Linearized output ``1 - (1 - w0) e^(-2 w0 t)``."""
    t = np.asarray(t, np.float64)
    return 1.0 - (1.0 - w0) * np.exp(-2.0 * w0 * t)


def kernel_closed(t, w0: float):
    """Tangent kernel of the network ``2 w(t)``."""
    return 2.0 * w_closed(t, w0)


def dist_net_closed(t, w0: float):
    """``||theta(t) - theta0|| = sqrt(2) |sqrt(w(t)) - sqrt(w0)|``."""
    return math.sqrt(2.0) * np.abs(np.sqrt(w_closed(t, w0)) - math.sqrt(w0))


def dist_lin_closed(t, w0: float):
    """``||theta_lin(t) - theta0|| = sqrt(2) |1 - w0| / (2 sqrt(w0)) (1 - e^(-2 w0 t))``."""
    t = np.asarray(t, np.float64)
    return math.sqrt(2.0) * abs(1.0 - w0) / (2.0 * math.sqrt(w0)) * (1.0 - np.exp(-2.0 * w0 * t))


def frozen_final_closed(t, w0: float, t_end: float):
    """Negative control: kernel frozen at its *final* value ``2 w(t_end)``: ``1 - (1 - w0) e^(-2 w(t_end) t)``."""
    t = np.asarray(t, np.float64)
    return 1.0 - (1.0 - w0) * np.exp(-kernel_closed(t_end, w0) * t)


def two_mode_closed(t, r0_modes=(1.0, 1.0), eigs=TWO_MODE_EIGS):
    """Residual in K's eigenbasis: ``r_k(t) = r_k(0) e^(-lambda_k t)``, shape ``(len(t), 2)``."""
    t = np.asarray(t, np.float64)[:, None]
    return np.asarray(r0_modes, np.float64) * np.exp(-np.asarray(eigs, np.float64) * t)


def two_mode_matrix(eigs=TWO_MODE_EIGS, angle=TWO_MODE_ANGLE) -> tuple[np.ndarray, np.ndarray]:
    """``K = R diag(eigs) R^T`` and ``R`` (columns are the eigenvectors)."""
    c, s = math.cos(angle), math.sin(angle)
    R = np.array([[c, -s], [s, c]])
    return R @ np.diag(eigs) @ R.T, R


# ------------------------------------------------------------- integration
def _rk4(rhs, state: tuple, t_from: float, t_to: float, dt: float) -> tuple:
    """Fixed-step classical RK4 for a 2-D state, from ``t_from`` to ``t_to`` in
    ``ceil((t_to - t_from) / dt)`` equal steps (pure Python floats, float64)."""
    n = math.ceil((t_to - t_from) / dt - 1e-9)
    if n <= 0:
        return state
    h = (t_to - t_from) / n
    h2, h6 = 0.5 * h, h / 6.0
    x, y = state
    for _ in range(n):
        p1, q1 = rhs((x, y))
        p2, q2 = rhs((x + h2 * p1, y + h2 * q1))
        p3, q3 = rhs((x + h2 * p2, y + h2 * q2))
        p4, q4 = rhs((x + h * p3, y + h * q3))
        x += h6 * (p1 + 2.0 * p2 + 2.0 * p3 + p4)
        y += h6 * (q1 + 2.0 * q2 + 2.0 * q3 + q4)
    return (x, y)


def integrate(rhs, state0: tuple, times, dt: float) -> np.ndarray:
    """States at each of the sorted ``times`` (the first must be >= 0), ``(len(times), len(state0))``."""
    out, s, t = [], tuple(float(v) for v in state0), 0.0
    for tt in times:
        s = _rk4(rhs, s, t, float(tt), dt)
        t = float(tt)
        out.append(s)
    return np.array(out, np.float64)


def net_rhs(s):
    """Gradient flow of ``(ab - 1)^2 / 2`` in ``(a, b)``."""
    a, b = s
    r = a * b - 1.0
    return (-r * b, -r * a)


def lin_rhs_factory(w0: float, offset: float = 0.0):
    """Gradient flow of the linearization at ``a0 = b0 = sqrt(w0)``: ``f_lin = w0 + offset + J0 . (theta - theta0)``, ``J0 = (b0, a0)``."""
    a0 = b0 = math.sqrt(w0)

    def rhs(s):
        a, b = s
        r = w0 + offset + b0 * (a - a0) + a0 * (b - b0) - 1.0
        return (-r * b0, -r * a0)

    return rhs


def two_mode_rhs_factory(K: np.ndarray):
    k11, k12, k21, k22 = (float(v) for v in K.ravel())
    return lambda s: (-(k11 * s[0] + k12 * s[1]), -(k21 * s[0] + k22 * s[1]))


# ------------------------------------------------------------- the experiment
@dataclass
class ScalarResult:
    """Closed forms vs integration at ``times``; ``table`` columns are the CSV's."""

    w0: float
    dt: float
    offset: float
    times: np.ndarray
    table: dict[str, np.ndarray]
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def csv(self) -> str:
        """The table as CSV text (full float64 precision, ``repr`` digits)."""
        cols = list(self.table)
        lines = [",".join(cols)]
        for i in range(len(self.times)):
            lines.append(",".join(repr(float(self.table[c][i])) for c in cols))
        return "\n".join(lines) + "\n"


W0_RANGE = (1e-4, 10.0)


def setting_problem(w0: float, times, offset: float) -> str | None:
    """Why a setting cannot show what the experiment shows (the CLI refuses it), or None.

    The controls can only fail their checks if something moves inside the
    window: ``w0`` in ``[1e-4, 10]`` and at least 0.01 from the target 1, a last
    time of at least 1, and an offset between 1e-5 and 1 in size. Outside
    ``w0 <= 10`` the network flow is stiff for the default RK4 step.
    """
    if not (W0_RANGE[0] <= w0 <= W0_RANGE[1]):
        return f"w0 must be between {W0_RANGE[0]:g} and {W0_RANGE[1]:g}, got {w0:g}"
    if abs(1.0 - w0) < 0.01:
        return f"w0 = {w0:g} is within 0.01 of the target 1: too little moves for the controls to differ"
    if float(times[-1]) < 1.0:
        return "the last time must be at least 1 for the models to separate"
    if not (1e-5 <= abs(offset) <= 1.0):
        return f"offset must be between 1e-5 and 1 in size, got {offset:g}"
    return None


def run_scalar(w0: float = 0.01, times=DEFAULT_TIMES, dt: float = 1e-3, offset: float = 1e-3, tol: float = TOL) -> ScalarResult:
    """Closed forms, their integration, the two negative controls and the two-mode decay.

    Args:
      w0: initial output ``w0 = a0 b0 > 0`` (balanced ``a0 = b0 = sqrt(w0)``).
      times: sorted, distinct, non-negative report times.
      dt: largest RK4 step (> 0).
      offset: the first control's mismatch ``f_lin(0) - f(0)`` (non-zero).
      tol: absolute agreement required (default 1e-6).
    Raises: ValueError for a bad argument.
    """
    if not (math.isfinite(w0) and w0 > 0):
        raise ValueError(f"w0 must be a finite number > 0, got {w0}")
    times = np.asarray(times, np.float64)
    if times.ndim != 1 or times.size == 0 or not np.all(np.isfinite(times)) or np.any(times < 0) or np.any(np.diff(times) <= 0):
        raise ValueError("times must be distinct, increasing, finite and >= 0")
    if not (math.isfinite(dt) and dt > 0):
        raise ValueError(f"dt must be a finite number > 0, got {dt}")
    if not (math.isfinite(offset) and offset != 0):
        raise ValueError(f"offset must be finite and non-zero, got {offset}")
    a0 = math.sqrt(w0)
    t_end = float(times[-1])

    net = integrate(net_rhs, (a0, a0), times, dt)
    lin = integrate(lin_rhs_factory(w0), (a0, a0), times, dt)
    ctl = integrate(lin_rhs_factory(w0, offset), (a0, a0), times, dt)
    K2, R = two_mode_matrix()
    r0 = R @ np.ones(2)  # unit amplitude in each mode
    two = integrate(two_mode_rhs_factory(K2), tuple(r0), times, dt) @ R  # back into the eigenbasis

    def outputs(net, lin, ctl):
        """The network's, the linearization's and the offset control's outputs at their states ``(n, 2)``."""
        return (net[:, 0] * net[:, 1], w0 + a0 * (lin[:, 0] - a0) + a0 * (lin[:, 1] - a0),
                w0 + offset + a0 * (ctl[:, 0] - a0) + a0 * (ctl[:, 1] - a0))

    f_net, f_lin, f_ctl = outputs(net, lin, ctl)
    # The matched-start checks read the flows at t = 0 (their common initial state), whatever times are reported.
    start = np.array([[a0, a0]])
    f_net0, f_lin0, f_ctl0 = (float(f[0]) for f in outputs(start, start, start))
    th0 = np.array([a0, a0])
    modes = two_mode_closed(times)
    table = {
        "t": times,
        "f_net_closed": w_closed(times, w0),
        "f_net_int": f_net,
        "f_lin_closed": f_lin_closed(times, w0),
        "f_lin_int": f_lin,
        "resid_net_int": f_net - 1.0,
        "resid_lin_int": f_lin - 1.0,
        "kernel_net_closed": kernel_closed(times, w0),
        "kernel_net_int": net[:, 0] ** 2 + net[:, 1] ** 2,
        "kernel_lin": np.full_like(times, 2.0 * w0),
        "dist_net_closed": dist_net_closed(times, w0),
        "dist_net_int": np.linalg.norm(net - th0, axis=1),
        "dist_lin_closed": dist_lin_closed(times, w0),
        "dist_lin_int": np.linalg.norm(lin - th0, axis=1),
        "ctrl_offset_f_int": f_ctl,
        "ctrl_frozen_final_f": frozen_final_closed(times, w0, t_end),
        "mode1_closed": modes[:, 0],
        "mode1_int": two[:, 0],
        "mode2_closed": modes[:, 1],
        "mode2_int": two[:, 1],
    }

    def maxabs(a, b):
        return float(np.max(np.abs(np.asarray(table[a]) - np.asarray(table[b]))))

    def check(name, value, expect=True, note="", tol_=tol):
        note = (note + "; " if note else "") + f"pass if <= {tol_:g}"
        return Check(name, value, tol_, bool(value <= tol_), expect, note)

    checks = [
        check("network w(t): closed form vs integration", maxabs("f_net_closed", "f_net_int")),
        check("linearization f_lin(t): closed form vs integration", maxabs("f_lin_closed", "f_lin_int")),
        check("tangent kernel 2w(t): closed form vs integration", maxabs("kernel_net_closed", "kernel_net_int")),
        check("parameter distance (network): closed vs integration", maxabs("dist_net_closed", "dist_net_int")),
        check("parameter distance (linear): closed vs integration", maxabs("dist_lin_closed", "dist_lin_int")),
        check("balance a = b kept by the flow", float(np.max(np.abs(net[:, 0] - net[:, 1])))),
        check("matched start |f_lin(0) - f(0)|", abs(f_lin0 - f_net0), tol_=1e-12),
        check("two-mode decay (eigenvalues 1, 0.01): closed vs integration",
              float(max(np.max(np.abs(modes[:, 0] - two[:, 0])), np.max(np.abs(modes[:, 1] - two[:, 1]))))),
        check("control 1, offset start: matched start |f_lin(0) - f(0)|", abs(f_ctl0 - f_net0),
              expect=False, note=f"started {offset:g} off; must fail", tol_=1e-12),
        check("control 1, offset start: vs closed-form f_lin", float(np.max(np.abs(f_ctl - table["f_lin_closed"]))),
              expect=False, note="must fail"),
        check("control 2, kernel frozen at 2w(T): vs integrated linearization",
              float(np.max(np.abs(table["ctrl_frozen_final_f"] - f_lin))), expect=False, note="a different model; must fail"),
        check("control 2, kernel frozen at 2w(T): vs integrated network",
              float(np.max(np.abs(table["ctrl_frozen_final_f"] - f_net))), expect=False, note="must fail"),
    ]
    return ScalarResult(w0=w0, dt=dt, offset=offset, times=times, table=table, checks=checks)
