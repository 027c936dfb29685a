"""``lazylab new-unit NAME``: a plugin package that installs and passes lazylab's checks as written.

``write_unit_package(name, parent)`` writes ``parent/NAME/``: ``pyproject.toml`` (the entry point
``NAME = "lazylab_NAME:UNIT"`` in the group ``lazylab.arms``, the distribution ``lazylab-NAME``),
``lazylab_NAME/__init__.py`` (a working unit to edit: a smooth ReLU, ``softplus(beta w . x) / beta``,
prototypes drawn with fan-in d), ``tests/test_NAME.py`` (lazylab's conformance suite, one pytest item per check, through
``lazylab.testing.parametrize_with_checks``; and the arms the installed plugin gives) and a README
saying how to install, test and run it. ``pip install -e NAME && pytest NAME`` then passes as it is
(``tests/test_scaffold.py``), as simonw/llm's cookiecutter template starts a plugin.
"""

from __future__ import annotations

from pathlib import Path

from lazylab import __version__
from lazylab.arms import UNIT_NAME
from lazylab.errors import LazylabError

PYPROJECT = '''[build-system]
requires = ["setuptools>=77"]
build-backend = "setuptools.build_meta"

[project]
name = "lazylab-{name}"
version = "0.1.0"
description = "The {name} unit for lazylab."
readme = "README.md"
requires-python = ">=3.11"
dependencies = ["lazylab>={lazylab}"]

[project.optional-dependencies]
test = ["pytest>=8"]

# The whole integration: one entry point in lazylab's group; its name is the unit's.
[project.entry-points."lazylab.arms"]
{name} = "lazylab_{name}:UNIT"

[tool.setuptools]
packages = ["lazylab_{name}"]

[tool.pytest.ini_options]
testpaths = ["tests"]
'''

MODULE = '''"""The {name} unit for lazylab: phi_w(x) = softplus(beta w . x) / beta, a smooth ReLU (beta -> inf: ReLU).

Edit ``Bank`` (and ``UNIT``'s fields) to make it yours; ``pytest`` runs lazylab's conformance suite
on it, one item per check (``lazylab arms --check --list`` lists them). The contract is
``lazylab.arms.Unit``'s docstring; the tutorial is lazylab's docs/plugins.md.
"""

import jax
import jax.numpy as jnp
from flax import nnx

from lazylab.arms import CONTRACT_VERSION, Unit

# Sharpness: with fan-in d, w . x is small on Fashion-MNIST images (variance about ||x||^2 / d), where
# softplus(z) alone is nearly linear; beta = 8 makes it bend there as ReLU does.
BETA = 8.0


class Bank(nnx.Module):
    """m units with prototypes W (m, d): images (n, d) -> features (n, m), float32."""

    def __init__(self, W, x_ref=None):
        # The prototypes exactly as given, as an nnx.Param named W: lazylab measures their movement and
        # trains them in the -trained arm. Transform them in __call__, never here.
        self.W = nnx.Param(jnp.asarray(W, jnp.float32))

    def __call__(self, x):
        # HIGHEST: float32 products on every machine (a GPU would otherwise use TF32).
        return jax.nn.softplus(BETA * jnp.dot(x, self.W[...].T, precision=jax.lax.Precision.HIGHEST)) / BETA


UNIT = Unit(
    name="{name}",
    bank=Bank,
    inits=("random",),  # add "data" for prototypes that are training images (Nystrom)
    fan_in="d",  # lecun-normal draws with fan-in d: row norms about 1
    prefix_stable=True,  # unit j reads W[j] alone; the suite checks it
    contract=CONTRACT_VERSION,
    description="softplus(beta w . x) / beta, beta = 8",
)
'''

TESTS = '''"""lazylab's conformance suite on the {name} unit, one pytest item per check, and the arms it gives.

Needs the plugin installed (``pip install -e .``) and Fashion-MNIST (lazylab's ``lazylab data info``).
"""

import pytest

from lazylab.arms import registry, reset_registry
from lazylab.testing import parametrize_with_checks
from lazylab_{name} import UNIT


# A check your unit is known to fail goes in expected_failed_checks={{"<check id>": "why"}}.
@parametrize_with_checks([UNIT])
def test_lazylab_contract(unit, check):
    check(unit)


@pytest.fixture
def own_registry(monkeypatch):
    """lazylab's registry holding this plugin's unit alone (other installed plugins are never imported)."""
    monkeypatch.setenv("LAZYLAB_ARMS", "lazylab-{name}:{name}")
    reset_registry()
    yield registry()
    reset_registry()


def test_its_arms_come_from_this_plugin(own_registry):
    arms = {{name: own_registry.arm(name) for name in ("{name}-frozen", "{name}-trained")}}
    assert {{a.distribution for a in arms.values()}} == {{"lazylab-{name}"}}
    assert [a.trained for a in arms.values()] == [False, True] and arms["{name}-frozen"].unit is UNIT
'''

README = '''# lazylab-{name}

The `{name}` unit for lazylab: arms `{name}-frozen` and `{name}-trained`.
Written by `lazylab new-unit {name}`; `lazylab_{name}/__init__.py` is the unit to edit.

```
pip install -e {name}          # registers the entry point {name} = "lazylab_{name}:UNIT"
pytest {name}                  # lazylab's conformance suite, one item per check
lazylab arms --check           # the suite on every installed unit; its verdicts are kept
lazylab ladder --arms {name}-frozen,yat-frozen --widths 16,64 --seeds 0 --epochs 1
```

A check your unit is known to fail goes in `expected_failed_checks` in `tests/test_{name}.py`
(`lazylab arms --check --list` lists the check ids). Every edit of a `.py` file here changes the
plugin's source hash, so its runs are computed again (lazylab's docs/plugins.md).
'''


def write_unit_package(name: str, parent: str | Path = ".") -> list[Path]:
    """Write the plugin package of unit ``name`` in ``parent/name/`` (module docstring).

    Args:
      name: the unit's name: lowercase letters, digits and ``_``, starting with a letter
        (``lazylab.arms.UNIT_NAME``); it names the entry point, the module ``lazylab_<name>`` and
        the arms ``<name>-frozen``, ``<name>-trained``.
      parent: the folder the package folder is written in [default: the current folder].
    Returns: the files written, in the order above.
    Raises: LazylabError (one line) for a name that is not a unit name, one an installed distribution
      already registers (two registrations of a name load neither), or a ``parent/name`` that exists.
    """
    from lazylab.arms import registry

    if not isinstance(name, str) or not UNIT_NAME.match(name):
        raise LazylabError(f"unit name {name!r} must be lowercase letters, digits and '_', starting with a letter "
                           "(arm names are built from it: <name>-frozen)")
    if registry().installed(name):
        raise LazylabError(f"unit name {name!r} is already registered by {registry().identity(name)}; "
                           "a name registered twice loads neither: choose another")
    root = Path(parent).expanduser() / name
    if root.exists():
        raise LazylabError(f"{root} already exists: choose another name or --dir")
    files = {
        root / "pyproject.toml": PYPROJECT.format(name=name, lazylab=__version__),
        root / f"lazylab_{name}" / "__init__.py": MODULE.format(name=name),
        root / "tests" / f"test_{name}.py": TESTS.format(name=name),
        root / "README.md": README.format(name=name),
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return list(files)
