"""Run configurations: frozen dataclasses, canonical JSON and the memo key (SPEC section 8)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, is_dataclass

from lazylab import __version__

# Bump when the meaning or layout of stored records changes: old entries are
# then simply never looked up again. 2: records carry the code identity, no batch_size.
CACHE_SCHEMA = 2

# Bump with any change that alters the bits of a result (training, units, features,
# initialisation, data preparation): records computed by other numerics are then never
# served. tests/test_memo.py::test_numerics_version_pins_the_bits_of_a_reference_run
# fails until this is bumped and the test's pinned digest updated.
NUMERICS_VERSION = 1

# The code identity: what computed a memo entry. It is in every memo key (``memo_key``),
# in every run's config (``RunConfig.code``) and in every entry's diskcache tag
# (``lazylab cache info`` counts entries per identity, ``lazylab cache prune`` drops the others).
CODE = f"lazylab {__version__} numerics {NUMERICS_VERSION}"


def code_identity() -> str:
    """The current code identity, ``"lazylab <version> numerics <NUMERICS_VERSION>"`` (read at call time)."""
    return CODE


def canonical_json(payload) -> str:
    """Canonical JSON of a dict or a dataclass (its fields): sorted keys, no spaces, floats by ``repr``."""
    if is_dataclass(payload):
        payload = asdict(payload)
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)


def memo_key(prefix: str, payload) -> str:
    """Memo key: ``"<prefix>-"`` + the first 32 hex digits of SHA-256 of the code identity and ``canonical_json(payload)``.

    The code identity (``code_identity()``) is part of every key, so an entry computed by
    other numerics or another lazylab version is never looked up.
    """
    text = code_identity() + "\n" + canonical_json(payload)
    return f"{prefix}-" + hashlib.sha256(text.encode()).hexdigest()[:32]


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
      code: the code identity that computes the run (``code_identity()``, e.g.
        ``"lazylab 0.2.0 numerics 1"``); records keep it, so a record says what computed it.
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
    code: str = field(default_factory=code_identity)

    def canonical(self) -> str:
        """Canonical JSON: sorted keys, no spaces, floats by ``repr``."""
        return canonical_json(self)

    def key(self) -> str:
        """Memo key: ``"run-"`` + the first 32 hex digits of SHA-256 of the canonical JSON."""
        return memo_key("run", self)
