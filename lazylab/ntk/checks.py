"""A pass/fail check with its measured value, shared by ``ntk audit`` and ``ntk scalar``."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class Check:
    """One check.

    Attributes:
      name: what is checked.
      value: the measured number (its meaning is in ``name``/``note``).
      tol: the threshold the value is compared with.
      passed: the comparison's outcome.
      expect: what the check must do: True for a real check (must pass),
        False for a negative control (must fail).
      note: the comparison in words (e.g. ``"<= 1e-06"``) or other detail.
    """

    name: str
    value: float
    tol: float
    passed: bool
    expect: bool = True
    note: str = ""

    @property
    def ok(self) -> bool:
        """The check behaved as required (a real check passed, a control failed)."""
        return self.passed == self.expect

    def to_json(self) -> dict:
        return {**asdict(self), "ok": self.ok}
