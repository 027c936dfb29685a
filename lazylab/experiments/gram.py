"""Monte Carlo crystallization of the random-feature kernel (SPEC section 7, ``gram``).

A frozen bank of ``m`` units maps images ``x`` to features ``Phi`` ``(n, m)``.
Its Gram matrix ``K = Phi Phi^T / m`` is a Monte Carlo estimate of the kernel
``k(x, y) = E_w[phi_w(x) phi_w(y)]`` over the bank's per-unit distribution
(Rahimi & Recht 2007, "Random features for large-scale kernel machines",
NeurIPS), so the entries converge at the Monte Carlo rate ``m^(-1/2)``. The
experiment grows one bank from 1 to ``max_units`` units on 30 test images
(10 T-shirt/top, 10 Trouser, 10 Sneaker by default), normalises the Gram to
``K_ij / sqrt(K_ii K_jj)`` at every width, and measures

* the block contrast: mean of the within-class off-diagonal entries minus the
  mean of the cross-class entries of the normalised Gram;
* the Frobenius distance of the normalised Gram to that of a much wider
  reference bank, and the least-squares slope of log distance on log width
  over the widths ``>= fit_min`` (default 10; below it the normalised Gram of
  a handful of units is far from the asymptotic regime, e.g. exactly all-ones
  for one positive unit);
* the same for the raw estimator: ``||K_m - K_ref||_F / ||K_ref||_F``. ``K_m``
  is an average of ``m`` i.i.d. terms, so ``E||K_m - K||_F^2 = tr Var / m``
  exactly, at every ``m``; the normalised Gram is a smooth function of ``K_m``
  and reaches ``m^(-1/2)`` only asymptotically (delta method). On yat-frozen,
  over 40 seeds, the ensemble slope over widths 10..2000 is -0.51 for the raw
  ``K`` and -0.46 for the normalised ``G`` (the self-normalisation damps the
  error of small banks); one bank's slope scatters by about 0.07-0.1 around
  these (docs/gram_readout.md).

I.i.d. units at a fixed scale
-----------------------------
The random ("lecun") init of SPEC section 3 draws rows of norm about
``sqrt(d / m)``: its per-unit distribution depends on the bank width ``m``.
A "bank grown from 1 to 2,000 units" is meant as a Monte Carlo average over
i.i.d. units, so the growing bank is drawn **once** at width ``max_units``
(the bank ``lazylab.model.build_model(arm, max_units, seed, x_train)`` builds)
and frame ``k`` uses its first ``m_k`` units: every frame's units share the scale of a
``max_units``-wide init. The reference bank uses the **same** per-unit
distribution: it is the concatenation of independent ``max_units``-wide
inits (seeds ``(seed + 1) * 4096 + j``, never the growing bank's seed),
``ref_units`` units in all (default ``max(32 * max_units, 50000)`` rounded up
to whole chunks, at most 4096 chunks), not one wider init (whose rows would be smaller). For
data-seeded (Nystrom) arms the per-unit distribution is "a training image
drawn uniformly", so the reference is its exact expectation: every one of
the training images once.

Layer scalars (0-d parameters such as Yat's ``b`` and ``eps`` or the Gaussian
``sigma`` from the median heuristic) are those of the ``max_units`` bank and
are shared by every growing and reference unit, so the units are i.i.d. given
them. Features of a prefix bank are the prefix columns of the full bank's
features where each feature column depends only on its own prototype row and
the layer scalars (every random-feature unit; declared by ``prefix_stable`` or
checked at one frame width); for any other unit each frame's bank is built
from its own prototypes (``frame_features``).

The configuration and its checks are in ``lazylab.experiments.gram_config``,
the pure measures (normalised Gram, block contrast, log-log slope, frame
widths) in ``lazylab.experiments.gram_measures``; both are importable from
here too.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import numpy as np

from lazylab.arms import Arm
from lazylab.config import memo_key
from lazylab.data import CLASS_NAMES
from lazylab.errors import LazylabError
# The inputs and the pure measures have their own modules (gram_config, gram_measures); the names
# callers take from here stay importable from here.
from lazylab.experiments.gram_config import (  # noqa: F401 (re-exported)
    DATA_REF_CHUNK,
    REF_SEED_STRIDE,
    GramConfig,
    Progress,
    _FeaturesKey,
    _ReferenceKey,
    _RepeatKey,
    default_ref_units,
    gram_config,
    parse_classes,
    require_frozen,
    select_images,
)
from lazylab.experiments.gram_measures import (  # noqa: F401 (re-exported)
    DEFAULT_FIT_MIN,
    block_contrast,
    log_widths,
    loglog_slope,
    normalise_gram,
    normalised_gram,
)

# ------------------------------------------------------- bank evaluation
def make_bank(arm: Arm, seed: int, x_train: np.ndarray, *, width: int | None = None, W: np.ndarray | None = None):
    """A frozen bank module built as ``lazylab.model.build_model`` builds it for ``seed``.

    Args:
      arm: the arm; seed: its bank seed (the prototype draw and, for units
        with ``takes_key``, the bank's other randomness via ``fold_in(bank_key, 1)``).
      x_train: ``(n, d)`` training images (the data init's pool; ``x_train[:512]`` is ``x_ref``).
      width: draw ``width`` prototypes by the arm's init (``init_prototypes``); or
      W: explicit prototypes ``(m, d)``.
    Returns: the ``nnx.Module`` mapping ``(n, d) -> (n, m)``.
    Raises: LazylabError if the unit breaks the plugin contract or the width is impossible.
    """
    from lazylab.model import N_REF, build_model, split_key

    if W is None:
        return build_model(arm, int(width), seed, x_train).feat
    import jax

    x_ref = np.asarray(x_train[:N_REF], np.float32)
    unit = arm.unit
    if hasattr(unit, "make_bank"):
        return unit.make_bank(np.asarray(W, np.float32), x_ref, key=jax.random.fold_in(split_key(seed)[0], 1))
    return unit.bank(np.asarray(W, np.float32), x_ref)


class BankFeatures:
    """Features of banks that share one template bank's layer scalars, compiled once per bank shape.

    Args:
      template: the growing bank (an ``nnx.Module``); its 0-d parameters (layer
        scalars) are imposed on every bank evaluated.
    ``__call__(feat, x)``: features ``(n, m')`` float64 of bank ``feat`` (same
    module type as the template) on images ``x`` ``(n, d)``.
    """

    def __init__(self, template):
        import jax
        from flax import nnx

        from lazylab.network import apply_bank

        _, self._template = nnx.split(template)
        self._apply = jax.jit(lambda graphdef, state, x: apply_bank(nnx.merge(graphdef, state), x), static_argnums=0)

    def __call__(self, feat, x: np.ndarray) -> np.ndarray:
        import jax
        from flax import nnx

        graphdef, state = nnx.split(feat)
        state = jax.tree.map(lambda own, tpl: tpl if np.ndim(tpl) == 0 else own, state, self._template)
        return np.asarray(self._apply(graphdef, state, np.asarray(x, np.float32)), np.float64)


# ----------------------------------------------------------------- result
@dataclass
class GramResult:
    """What ``run_gram`` measured.

    Attributes:
      config: the GramConfig as a dict; key: its memo key.
      widths: int ``(F,)`` bank widths, one per frame.
      grams: float32 ``(F, n, n)`` normalised Gram per width.
      reference: float64 ``(n, n)`` normalised Gram of the reference bank.
      contrast: ``(F,)`` block contrast per width; reference_contrast: the reference's.
      distance: ``(F,)`` Frobenius distance ``||G_m - G_ref||_F`` per width.
      fit: ``loglog_slope`` of distance on width (widths >= fit_min).
      raw_distance: ``(F,)`` relative distance of the raw estimator,
        ``||K_m - K_ref||_F / ||K_ref||_F`` with ``K = Phi Phi^T / m``.
      raw_fit: ``loglog_slope`` of raw_distance on width.
      ensemble: with ``repeats > 1``, ``{"distance", "raw_distance"}`` (root mean
        square over the banks, ``(F,)`` each) and ``{"fit", "raw_fit"}``; else None.
      labels: int ``(n,)`` class of each image; image_index: ``(n,)`` test-set indices.
      images: float32 ``(n, 784)`` the images (for display).
      scalars: the bank's layer scalars.
      cached: True if the whole result came from the memo; computed: what was
      computed this call ("features", "reference", "grams"); seconds: wall time.
    """

    config: dict
    key: str
    widths: np.ndarray
    grams: np.ndarray
    reference: np.ndarray
    contrast: np.ndarray
    reference_contrast: float
    distance: np.ndarray
    fit: dict
    raw_distance: np.ndarray
    raw_fit: dict
    ensemble: dict | None
    labels: np.ndarray
    image_index: np.ndarray
    images: np.ndarray
    scalars: dict = field(default_factory=dict)
    cached: bool = False
    computed: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def class_names(self) -> list[str]:
        return [CLASS_NAMES[c] for c in self.config["classes"]]

    def to_json(self) -> dict:
        """JSON summary: config, per-width contrast and distance, fit, reference contrast."""
        return {
            "experiment": "gram",
            "key": self.key,
            "config": self.config,
            "classes": {str(c): CLASS_NAMES[c] for c in self.config["classes"]},
            "image_index": self.image_index.tolist(),
            "widths": self.widths.tolist(),
            "block_contrast": [float(c) for c in self.contrast],
            "distance_to_reference": [float(d) for d in self.distance],
            "reference_contrast": self.reference_contrast,
            "fit": self.fit,
            "raw_relative_distance": [float(d) for d in self.raw_distance],
            "raw_fit": self.raw_fit,
            "ensemble": None if self.ensemble is None else {
                "repeats": self.config["repeats"],
                "seeds": [self.config["seed"] + r for r in range(self.config["repeats"])],
                "rms_distance": [float(v) for v in self.ensemble["distance"]],
                "rms_raw_relative_distance": [float(v) for v in self.ensemble["raw_distance"]],
                "fit": self.ensemble["fit"], "raw_fit": self.ensemble["raw_fit"]},
            "scalars": self.scalars,
            "protocol": {
                "gram": "K = Phi Phi^T / m, normalised K_ij / sqrt(K_ii K_jj)",
                "contrast": "mean within-class off-diagonal minus mean cross-class entry",
                "distance": "Frobenius norm of G_m - G_ref (normalised Grams)",
                "raw_distance": "||K_m - K_ref||_F / ||K_ref||_F (unnormalised K = Phi Phi^T / m)",
                "units": "prefixes of one max_units-wide init; reference drawn at the same per-unit scale",
            },
        }

    def rows(self) -> list[dict]:
        """One CSV row per width: width, block contrast, distance to reference, raw relative distance
        (and, with repeats, their root-mean-square over the banks)."""
        rows = [{"width": int(w), "block_contrast": float(c), "distance_to_reference": float(d),
                 "raw_relative_distance": float(r)}
                for w, c, d, r in zip(self.widths, self.contrast, self.distance, self.raw_distance)]
        if self.ensemble is not None:
            for row, d, r in zip(rows, self.ensemble["distance"], self.ensemble["raw_distance"]):
                row.update(rms_distance_to_reference=float(d), rms_raw_relative_distance=float(r))
        return rows


def _stored_problem(cfg: GramConfig, arrays: dict, record: dict, widths: np.ndarray, labels: np.ndarray,
                    index: np.ndarray) -> str | None:
    """Why a stored study (arrays and summary, each of its kind's schema: ``lazylab.schemas.entries``) is not the
    one ``cfg`` computes (one line), or None: its widths, images and labels must be ``cfg``'s, and it holds the
    ensemble (RMS) distances and fits exactly when ``cfg.repeats > 1``."""
    for name, want in (("widths", widths), ("labels", labels), ("image_index", index)):
        if not np.array_equal(arrays[name], want):
            return f"its {name} are not the configuration's"
    ensemble = cfg.repeats > 1
    if (record["ensemble"] is not None) != ensemble or ({"ens_distance", "ens_raw_distance"} <= set(arrays)) != ensemble:
        return "its ensemble distances do not match the configuration's repeats"
    return None


def _result_from_arrays(cfg: GramConfig, arrays: dict, record: dict, images: np.ndarray) -> GramResult:
    return GramResult(
        config=json.loads(cfg.canonical()), key=cfg.key(), widths=arrays["widths"], grams=arrays["grams"],
        reference=arrays["reference"], contrast=arrays["contrast"], reference_contrast=record["reference_contrast"],
        distance=arrays["distance"], fit=record["fit"], raw_distance=arrays["raw_distance"], raw_fit=record["raw_fit"],
        ensemble=None if record.get("ensemble") is None else {
            **record["ensemble"], "distance": arrays["ens_distance"], "raw_distance": arrays["ens_raw_distance"]},
        labels=arrays["labels"], image_index=arrays["image_index"],
        images=images, scalars=record.get("scalars", {}),
    )


# ------------------------------------------------------------- experiment
def run_gram(ws, arm: Arm, cfg: GramConfig, progress: Progress | None = None) -> GramResult:
    """Grow a frozen bank, measure its normalised Gram per width (memoized at three levels).

    Args:
      ws: a Workspace (memo + data).
      arm: a frozen arm (built-in or plugin) matching ``cfg.arm``.
      cfg: from ``gram_config``.
      progress: optional ``progress(stage, done, total)`` callback.
    Returns: GramResult (``cached`` True when nothing was recomputed).
    Raises: LazylabError for a trained arm or an arm that does not match the config.
    Memo entries: features of the growing bank on the images, the reference
    Gram, and the whole result; each keyed by the config fields it depends on.
    """
    require_frozen(arm, "gram")
    if arm.name != cfg.arm or arm.plugin != cfg.plugin:
        raise LazylabError(f"config is for {cfg.arm} ({cfg.plugin}), not {arm.name} ({arm.plugin})")
    t0 = time.perf_counter()
    tick = progress or (lambda *a: None)
    d = ws.data
    index = select_images(d.y_test, cfg.classes, cfg.per_class)
    x = np.asarray(d.x_test[index], np.float32)
    memo = ws.memo

    widths = log_widths(cfg.max_units, cfg.frames)
    labels = np.repeat(np.asarray(cfg.classes), cfg.per_class)
    arrays, record = memo.get_arrays(cfg.key()), memo.get_record(cfg.key() + "-summary")
    if arrays is not None and record is not None:
        why = _stored_problem(cfg, arrays, record, widths, labels, index)
        if why is None:
            res = _result_from_arrays(cfg, arrays, record, x)
            res.cached, res.seconds = True, time.perf_counter() - t0
            return res
        memo.reject(cfg.key(), why)  # the study is computed again, and both entries overwritten

    computed: list[str] = []
    base = dict(arm=cfg.arm, plugin=cfg.plugin, max_units=cfg.max_units, seed=cfg.seed, classes=cfg.classes,
                per_class=cfg.per_class, data=cfg.data, schema=cfg.schema)
    fkey = memo_key("gramfeat", _FeaturesKey(kind="gram-features", **base))
    rkey = memo_key("gramref", _ReferenceKey(kind="gram-reference-kernel", ref_units=cfg.ref_units, **base))
    bank = make_bank(arm, cfg.seed, d.x_train, width=cfg.max_units)
    evaluator = BankFeatures(bank)
    scalars = bank.scalars() if hasattr(bank, "scalars") else {}

    def bank_features(key: str, r: int) -> np.ndarray:
        stored = memo.get_arrays(key)
        if stored is not None and stored["phi"].shape == (len(x), cfg.max_units):
            return stored["phi"].astype(np.float64)
        if stored is not None:
            memo.reject(key, f"features of shape {stored['phi'].shape}, not {(len(x), cfg.max_units)}")
        tick("features", r, cfg.repeats)
        feat = bank if r == 0 else make_bank(arm, cfg.seed + r, d.x_train, width=cfg.max_units)
        phi = evaluator(feat, x)  # the base bank's layer scalars, as in the reference
        memo.put_arrays(key, {"phi": phi.astype(np.float32)})
        if "features" not in computed:
            computed.append("features")
        return phi

    phis = [bank_features(fkey, 0)]
    phis += [bank_features(memo_key("gramfeat", _RepeatKey(kind="gram-features-repeat", repeat=r, **base)), r)
             for r in range(1, cfg.repeats)]
    tick("features", cfg.repeats, cfg.repeats)

    stored = memo.get_arrays(rkey)
    if stored is not None and stored["kernel"].shape != (len(x), len(x)):
        memo.reject(rkey, f"a reference kernel of shape {stored['kernel'].shape}, not {(len(x), len(x))}")
        stored = None
    if stored is None:
        kernel = _reference_kernel(arm, cfg, evaluator, x, d.x_train, tick)
        memo.put_arrays(rkey, {"kernel": kernel})
        computed.append("reference")
    else:
        kernel = stored["kernel"]
    reference = normalise_gram(kernel)

    frames = [frame_features(arm, cfg.seed + r, p, evaluator, x, d.x_train, widths) for r, p in enumerate(phis)]
    grams = np.stack([normalised_gram(f) for f in frames[0]])
    contrast = np.array([block_contrast(G, labels) for G in grams])
    dists = np.array([[np.linalg.norm(normalised_gram(f) - reference) for f in fs] for fs in frames])
    raws = np.array([[np.linalg.norm(f @ f.T / f.shape[1] - kernel) for f in fs] for fs in frames])
    raws /= np.linalg.norm(kernel)
    distance, raw_distance = dists[0], raws[0]
    computed.append("grams")
    arrays = {"widths": widths, "grams": grams.astype(np.float32), "reference": reference, "contrast": contrast,
              "distance": distance, "raw_distance": raw_distance, "labels": labels, "image_index": index}
    record = {"fit": loglog_slope(widths, distance, cfg.fit_min), "raw_fit": loglog_slope(widths, raw_distance, cfg.fit_min),
              "reference_contrast": block_contrast(reference, labels), "scalars": scalars, "ensemble": None}
    if cfg.repeats > 1:
        arrays["ens_distance"] = np.sqrt((dists**2).mean(axis=0))
        arrays["ens_raw_distance"] = np.sqrt((raws**2).mean(axis=0))
        record["ensemble"] = {"fit": loglog_slope(widths, arrays["ens_distance"], cfg.fit_min),
                              "raw_fit": loglog_slope(widths, arrays["ens_raw_distance"], cfg.fit_min)}
    memo.put_arrays(cfg.key(), arrays)
    memo.put_record(cfg.key() + "-summary", record)
    res = _result_from_arrays(cfg, arrays, record, x)
    res.computed, res.seconds = computed, time.perf_counter() - t0
    return res


def frame_features(arm: Arm, seed: int, phi: np.ndarray, evaluator: BankFeatures, x: np.ndarray,
                   x_train: np.ndarray, widths: np.ndarray) -> list[np.ndarray]:
    """Each frame's features ``(n, m)``, for ``m`` in ``widths``, of the bank grown from seed ``seed``.

    The first ``m`` columns of the full bank's features ``phi`` ``(n, max_units)`` where that is
    the bank of the first ``m`` prototypes: for a unit that declares ``prefix_stable``, and for one
    whose prefix matches its sub-bank at the middle frame width once ``evaluator`` imposes the full
    bank's layer scalars, as it does on every bank of the movie (the Gaussian unit: only its
    median-heuristic sigma reads all of ``W``). For any other unit (one that normalises across its
    units, say) every frame is the bank of its first ``m`` prototypes, built and evaluated.
    Cost: one small compiled program per frame width for such units, one for the check.
    """
    prefixes = [phi[:, :m] for m in widths]
    if arm.unit.prefix_stable:
        return prefixes
    W = np.asarray(make_bank(arm, seed, x_train, width=phi.shape[1]).W[...])
    sub_bank = lambda m: evaluator(make_bank(arm, seed, x_train, W=W[:m]), x)
    mid = len(widths) // 2
    if np.allclose(sub_bank(int(widths[mid])), prefixes[mid], rtol=1e-5, atol=1e-6):
        return prefixes
    return [phi if m == len(W) else sub_bank(int(m)) for m in widths]


def _reference_kernel(arm: Arm, cfg: GramConfig, evaluator: BankFeatures, x: np.ndarray,
                      x_train: np.ndarray, tick: Progress) -> np.ndarray:
    """Raw Gram ``K_ref = Phi Phi^T / ref_units`` ``(n, n)`` of the reference bank, accumulated chunk by chunk in float64.

    Random inits: ``ref_units / max_units`` independent ``max_units``-wide banks
    (seeds ``(seed + 1) * 4096 + j``). Data init: every training image once,
    in chunks of 4096 (the last one padded to the same shape and the padding
    dropped, so one compilation serves all chunks).
    """
    K = np.zeros((len(x), len(x)))
    stride = (cfg.seed + 1) * REF_SEED_STRIDE
    if arm.init == "data":
        starts = list(range(0, len(x_train), DATA_REF_CHUNK))
        for j, s in enumerate(starts):
            tick("reference", j, len(starts))
            Wc = np.asarray(x_train[s : s + DATA_REF_CHUNK], np.float32)
            keep = len(Wc)
            # Padding the last chunk (one compiled shape) keeps its features' columns where units are
            # independent given the layer scalars (what the growing frames assume too: frame_features).
            if keep < DATA_REF_CHUNK and len(x_train) >= DATA_REF_CHUNK:
                Wc = np.concatenate([Wc, np.asarray(x_train[: DATA_REF_CHUNK - keep], np.float32)])
            phi = evaluator(make_bank(arm, stride + j, x_train, W=Wc), x)[:, :keep]
            K += phi @ phi.T
        tick("reference", len(starts), len(starts))
        n_units = len(x_train)
    else:
        from lazylab.model import init_prototypes

        chunks = cfg.ref_units // cfg.max_units
        for j in range(chunks):
            tick("reference", j, chunks)
            # build_model's draw and bank for seed stride + j, without its per-bank contract check
            # (the growing bank of the same unit passed it).
            Wc = init_prototypes(arm, cfg.max_units, stride + j, x_train)
            phi = evaluator(make_bank(arm, stride + j, x_train, W=Wc), x)
            K += phi @ phi.T
        tick("reference", chunks, chunks)
        n_units = chunks * cfg.max_units
    return K / n_units
