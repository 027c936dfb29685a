"""What the manifest of ``lazylab render`` records about each picture: the versions that drew it, the units
(plugins) loaded, and each file's SHA-256, size and frames.

Used by ``lazylab.render.report.Renderer`` (writing the manifest) and
``lazylab.render.html_parts`` (printing the versions under each picture).
"""

from __future__ import annotations

import hashlib
import json
import platform
from pathlib import Path

from lazylab.render.canvas import read_gif

VERSION_PACKAGES = ("lazylab", "jax", "jaxlib", "flax", "optax", "numpy", "matplotlib", "imageio", "pillow",
                    "click", "rich", "diskcache")


def versions() -> dict:
    """Python, platform, and the installed versions of lazylab and the libraries behind the pictures."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "platform": platform.platform()}
    for name in VERSION_PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


def plugins() -> list[dict]:
    """Every registered unit with its distribution and version (``lazylab arms``): ``status`` ``ok`` for the
    units this process imported, ``not used`` for those it did not need (nothing is imported here), the
    one-line reason for those that cannot load."""
    from lazylab.arms import registry

    reg = registry()
    rows = [{"unit": n, "distribution": d, "version": v, "status": "ok" if n in reg.units else "not used"}
            for n, (_, d, v) in sorted({**reg.entries, **reg.units}.items()) if n not in reg.errors]
    rows += [{"unit": e.unit, "distribution": e.distribution, "version": e.version, "status": e.message}
             for _, e in sorted(reg.errors.items())]
    return rows


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def file_facts(path: Path) -> dict:
    """``{"sha256", "bytes"}`` plus, for a GIF, ``frames``, ``size`` [w, h], ``loop``, ``same_size``;
    for a PNG, ``size``."""
    path = Path(path)
    facts = {"sha256": _sha256(path), "bytes": path.stat().st_size}
    if path.suffix == ".gif":
        g = read_gif(path)
        facts.update(frames=g["frames"], size=list(next(iter(g["sizes"]))), same_size=len(g["sizes"]) == 1,
                     loop=g["loop"])
    elif path.suffix == ".png":
        from PIL import Image

        with Image.open(path) as im:
            facts["size"] = list(im.size)
    return facts


def _jsonable(obj):
    """Plain JSON types (numpy scalars and arrays, tuples) for the manifest."""
    return json.loads(json.dumps(obj, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))
