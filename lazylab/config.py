"""Run configurations: frozen dataclasses, canonical JSON and the memo key (SPEC section 8)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, is_dataclass

# Bump when the meaning or layout of stored records changes: old entries are
# then simply never looked up again.
CACHE_SCHEMA = 1


def canonical_json(payload) -> str:
    """Canonical JSON of a dict or a dataclass (its fields): sorted keys, no spaces, floats by ``repr``."""
    if is_dataclass(payload):
        payload = asdict(payload)
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)


def memo_key(prefix: str, payload) -> str:
    """Memo key: ``"<prefix>-"`` + the first 32 hex digits of SHA-256 of ``canonical_json(payload)``."""
    return f"{prefix}-" + hashlib.sha256(canonical_json(payload).encode()).hexdigest()[:32]


@dataclass(frozen=True)
class RunConfig:
    """Everything that determines one training run's result.

    Attributes:
      arm: arm name, e.g. ``"yat-frozen"``.
      plugin: ``"<distribution> <version>"`` providing the arm's unit.
      width: number of units ``m`` (>= 1).
      seed: integer seed for the bank, head and batch order.
      lr: constant AdamW learning rate.
      epochs, batch, train_size, weight_decay: SPEC section 5.
      fan_in: ``"unit"`` (each unit's own random-init convention) or ``"d"``
        (lecun-normal with fan-in d for every unit).
      data: Fashion-MNIST content fingerprint.
      schema: the cache schema version.
    """

    arm: str
    plugin: str
    width: int
    seed: int
    lr: float
    epochs: int = 12
    batch: int = 256
    train_size: int = 60000
    weight_decay: float = 1e-4
    fan_in: str = "unit"
    data: str = ""
    schema: int = CACHE_SCHEMA

    def canonical(self) -> str:
        """Canonical JSON: sorted keys, no spaces, floats by ``repr``."""
        return canonical_json(self)

    def key(self) -> str:
        """Memo key: ``"run-"`` + the first 32 hex digits of SHA-256 of the canonical JSON."""
        return memo_key("run", self)
