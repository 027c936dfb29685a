"""The memo's results as plain rows (``lazylab runs``, ``lazylab.api.runs``).

Every result the memo holds — training runs (ladder cells and rate-bracket runs), convex
readouts, trajectories, redundancy measurements, Gram and readout studies, the NTK
results — becomes one ``Run``: its kind, the arm, width, seed, learning rate, epochs and
training-set size it was computed with (where the kind has them), its accuracies, the
seconds it took, the code identity that computed it, its memo key and when it was stored.

What the memo keeps and how it is read: every entry of the main store is keyed
``<prefix>-<32 hex digits>`` (``lazylab.config.memo_key``), optionally followed by a part
name (``-summary``, ``-checks``, ``-snapshots``, ...). The prefix says the kind
(``KIND_OF``); one entry per result is read (the JSON record, or the arrays for a readout
curve, which has no record). Entries that are parts of another result (a trajectory's
snapshots, an NTK kernel's arrays, the trained parameters behind an NTK result) and stored
features (``gramfeat``, ``gramref``, ``readfeat``, and the whole feature store) are not
results and are not listed. The code identity is the entry's diskcache tag
(``Memo.entries``), the stored time the store's own write time.

Nothing is recomputed or written; a corrupt entry reads as missing (``Memo.get_record``
removes it and says so in ``problems``), as everywhere else.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path

from lazylab.cache import Memo, default_dir, legacy_note
from lazylab.locations import check_memo_dir
from lazylab.config import code_identity
from lazylab.errors import LazylabError
from lazylab.schemas.entries import KEY

# Prefix (and part) of the one entry read per result -> its kind, in the order rows are sorted.
KIND_OF = {
    ("run", None): "run",
    ("convex", None): "convex",
    ("convex-lambda", None): "convex-lambda",
    ("convex-refine", None): "convex-refine",
    ("optimum-run", None): "optimum-run",
    ("optimum-fit", None): "optimum-fit",
    ("traj", None): "trajectory",
    ("redundancy", None): "redundancy",
    ("gram", "summary"): "gram",
    ("readout", None): "readout",
    ("ntkarm", None): "ntk-arm",
    ("ntklab", "summary"): "ntk-lab",
    ("ntksweep", None): "ntk-sweep",
    ("ntkscalar", "checks"): "ntk-scalar",
    ("ntkaudit", None): "ntk-audit",
}
KINDS = tuple(KIND_OF.values())
FIELDS = ("kind", "arm", "width", "seed", "lr", "epochs", "train_size", "best_acc", "final_acc", "seconds",
          "code", "plugin", "provenance", "checks", "key", "stored", "detail")
# What ``Run.provenance`` says of a row whose unit is not the installed one.
NOT_INSTALLED, STALE_SOURCE, OTHER_VERSION = "not installed", "stale source", "other version"


@dataclass
class Run:
    """One stored result, flattened.

    Attributes:
      kind: one of ``KINDS``: ``run`` (a training run: ladder cell or rate-bracket run),
        ``convex`` (the convex readout of a frozen bank), ``convex-lambda`` (an arm's choice of the
        convex readout's penalty), ``convex-refine`` (that choice refined on a half-decade grid),
        ``optimum-run`` (a trained arm's annealed selection run, scored on held-out images), ``optimum-fit``
        (its refit on every training image at the chosen rate and epoch), ``trajectory``, ``redundancy``,
        ``gram``, ``readout``, ``ntk-arm``, ``ntk-lab``, ``ntk-sweep``, ``ntk-scalar``, ``ntk-audit``.
      arm: arm name (``yat-frozen``), None for kinds without one (redundancy measures a bank:
        see ``detail``; gram and readout entries do not store their configuration).
      width: units m; seed; lr: the constant AdamW rate (None for a convex readout);
        epochs; train_size: training images used. None where the kind has no such field.
      best_acc, final_acc: test accuracy in percent: the best over epochs and the last epoch's
        (``run``, ``trajectory``; a readout curve's best and last evaluation); a convex readout's
        one test accuracy in both; an NTK arm's network: best epoch and after training. None
        for kinds without an accuracy, or a diverged run.
      seconds: wall time the result took to compute (None when not recorded).
      code: the code identity that computed it (``lazylab.config.code_identity``); None for
        entries older than code identities.
      plugin: the identity of the plugin that provided the arm's unit,
        ``"<distribution> <version>+src.<hash>"`` (``lazylab.arms.Arm.plugin``); None where the kind
        stores none (gram, readout, redundancy, the NTK studies).
      provenance: ``""`` when that plugin is the one installed (or the row names none);
        ``"not installed"`` (no installed arm of that name), ``"stale source"`` (the installed
        distribution and version have other source files: an edit in place) or ``"other version"``
        (another distribution or version is installed). Such rows are never reused, and listed
        only when asked for (``list_runs(include_stale=True)``).
      checks: the conformance checks (``lazylab.testing``) its unit failed when it was computed, one
        line each (empty: it passed them, or the kind records none); such a result may not be
        reproducible.
      key: the memo key (for a result stored in parts, the key of the result, without the part).
      stored: when it was written (a timezone-aware ``datetime`` in UTC), or None; ISO 8601 in JSON
        and CSV (``2026-12-03T10:15:00+00:00``).
      detail: one line of what the kind adds (``diverged at epoch 3``, the unstable reason, a
        convex readout's lambda, a redundancy's bank and participation ratio, ...).
      config: the stored configuration (empty when the entry has none); in JSON, not in CSV.
    """

    kind: str
    arm: str | None = None
    width: int | None = None
    seed: int | None = None
    lr: float | None = None
    epochs: int | None = None
    train_size: int | None = None
    best_acc: float | None = None
    final_acc: float | None = None
    seconds: float | None = None
    code: str | None = None
    plugin: str | None = None
    provenance: str = ""
    checks: list[str] = field(default_factory=list)
    key: str = ""
    stored: datetime | None = None
    detail: str = ""
    config: dict = field(default_factory=dict, repr=False)

    def row(self) -> dict:
        """The ``FIELDS`` as a flat dict (one CSV row): ``stored`` in ISO 8601, ``checks`` joined by ``"; "``."""
        return {k: "; ".join(self.checks) if k == "checks" else _iso(self.stored) if k == "stored" else getattr(self, k)
                for k in FIELDS}

    def to_json(self) -> dict:
        """Every field, ``config`` included (JSON-ready: ``stored`` in ISO 8601)."""
        return {**asdict(self), "stored": _iso(self.stored)}

    @classmethod
    def from_json(cls, doc: dict) -> "Run":
        """The ``Run`` whose ``to_json()`` is ``doc`` (``lazylab runs --json`` rows). Raises: LazylabError
        (one line) for a row that is not one."""
        names = {f.name for f in fields(cls)}
        if not isinstance(doc, dict) or doc.get("kind") not in KINDS or not set(doc) <= names:
            raise LazylabError(f"not a lazylab.runs.Run row: {str(doc)[:80]}")
        try:
            stored = doc.get("stored")
            return cls(**{**doc, "stored": None if stored is None else datetime.fromisoformat(stored),
                          "checks": list(doc.get("checks") or []), "config": dict(doc.get("config") or {})})
        except (TypeError, ValueError) as exc:
            raise LazylabError(f"not a lazylab.runs.Run row ({type(exc).__name__}: {str(exc)[:80]})") from None


def _iso(when: datetime | None) -> str | None:
    return None if when is None else when.isoformat(timespec="seconds")


@dataclass
class RunListing:
    """What ``list_runs`` found.

    Attributes:
      runs: the rows, sorted by kind (``KINDS`` order), arm, width, seed, rate, epochs, key.
      directory: the memo read.
      entries: entries in the memo's main store (results, their parts and stored features).
      other_code: results matching the filters that were computed by another code identity
        and are not in ``runs`` (0 when ``any_code`` was given: they are in ``runs``).
      stale: results matching the filters whose plugin is not the installed one (``Run.provenance``)
        and are not in ``runs`` (0 with ``include_stale``).
      problems: one line per corrupt entry met (it was removed, as every memo read does).
    """

    runs: list[Run]
    directory: Path
    entries: int = 0
    other_code: int = 0
    stale: int = 0
    problems: list[str] = field(default_factory=list)


def _num(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def _text_num(v) -> float | None:
    """A finite number written as text (a record's ``repr`` key), else None."""
    try:
        return _num(float(v))
    except (TypeError, ValueError):
        return None


def _int(v) -> int | None:
    return int(v) if isinstance(v, int) and not isinstance(v, bool) else None


def _best(values) -> float | None:
    vals = [x for x in (_num(v) for v in values or []) if x is not None]
    return max(vals) if vals else None


def _last(values) -> float | None:
    return _num(values[-1]) if values else None


def _checks(items) -> str:
    items = [c for c in items or [] if isinstance(c, dict)]
    return f"{sum(bool(c.get('ok')) for c in items)}/{len(items)} checks as expected"


def _from_config(run: Run, cfg) -> None:
    """Arm, width, seed, lr, epochs and train size from a stored configuration dict."""
    if not isinstance(cfg, dict):
        return
    run.config = cfg
    run.arm = cfg.get("arm") if isinstance(cfg.get("arm"), str) else None
    run.width, run.seed = _int(cfg.get("width")), _int(cfg.get("seed"))
    run.lr = _num(cfg.get("lr"))
    run.epochs, run.train_size = _int(cfg.get("epochs")), _int(cfg.get("train_size"))


def run_from_record(rec: dict, kind: str = "run", key: str | None = None) -> Run:
    """A ``Run`` of ``kind`` from its memo record (a JSON dict; a readout's arrays); ``key`` defaults to
    the record's own, the code identity to the one in its configuration."""
    run = Run(kind=kind, key=key if key is not None else rec.get("key", ""))
    _fill(run, rec)
    run.code = run.config.get("code") if isinstance(run.config.get("code"), str) else None
    run.plugin = _plugin_of(run.config)
    return run


def _failed_checks(rec: dict) -> list[str]:
    from lazylab.vetting import CHECKS_FAILED

    found = rec.get(CHECKS_FAILED)
    return [c for c in found if isinstance(c, str)] if isinstance(found, list) else []


def _fill(run: Run, rec: dict) -> None:
    """Fill ``run`` (kind and key set) from its record (JSON dict; a readout's arrays)."""
    from lazylab.analysis import unstable_reason

    kind = run.kind
    run.seconds = _num(rec.get("seconds"))
    run.checks = _failed_checks(rec)
    if kind == "run":
        _from_config(run, rec.get("config"))
        run.best_acc, run.final_acc = _num(rec.get("best_acc")), _num(rec.get("final_acc"))
        div = rec.get("diverged")
        if isinstance(div, dict):
            run.detail = f"diverged at epoch {div.get('epoch')}"
        else:
            why = unstable_reason(rec)
            run.detail = f"unstable: {why}" if why else ""
    elif kind == "convex":
        _from_config(run, rec.get("config"))
        run.best_acc = run.final_acc = _num(rec.get("test_acc"))
        lam = _num(rec.get("lambda"))
        run.detail = (f"lambda {lam:g}" if lam is not None else "") + \
            (f", {rec['iterations']} iterations" if _int(rec.get("iterations")) is not None else "") + \
            ("" if rec.get("converged", True) else ", not converged")
    elif kind == "convex-lambda":
        _from_config(run, rec.get("config"))
        sel = rec.get("selection") if isinstance(rec.get("selection"), dict) else {}
        path = sorted(sel.items(), key=lambda kv: -(_text_num(kv[0]) or 0.0))  # the walk's order: largest lambda first
        run.detail = f"lambda {rec.get('lambda')} chosen on held-out images: " + \
            ", ".join(f"{k} {v:.2f} %" for k, v in path)
    elif kind == "convex-refine":
        _from_config(run, rec.get("config"))
        sel = rec.get("selection") if isinstance(rec.get("selection"), dict) else {}
        run.detail = f"lambda {rec.get('coarse')} refined to {rec.get('lambda')} on held-out images" + \
            "".join(f", {k} {v:.2f} %" for k, v in sorted(sel.items(), key=lambda kv: -(_text_num(kv[0]) or 0.0))
                    if _num(v) is not None)
    elif kind == "optimum-run":
        _from_config(run, rec.get("config"))
        run.epochs = _int(rec.get("epochs"))
        best = _num(rec.get("held_out_best"))
        epoch, stop = _int(rec.get("best_epoch")), rec.get("stop")
        run.detail = (f"held-out best {best:.2f} % at epoch {'-' if epoch is None else epoch}" if best is not None
                      else "no held-out best") + f", stopped by {stop if isinstance(stop, str) else '-'}"
    elif kind == "optimum-fit":
        _from_config(run, rec.get("config"))
        run.best_acc = run.final_acc = _num(rec.get("test_acc"))
        run.detail = "refit" + (f" at rate {run.lr:g}" if run.lr is not None else "") + \
            (f" for {run.epochs} epochs" if run.epochs is not None else "")
    elif kind == "trajectory":
        _from_config(run, rec.get("config"))
        acc = rec.get("accuracy") or []
        run.best_acc, run.final_acc = _best(acc[1:]), _last(acc[1:])  # accuracy[0] is the untrained start
        move = _last(rec.get("w_move_rel"))
        run.detail = f"{rec.get('snapshot_units')} prototypes tracked" + \
            (f", w_move_rel {move:.3g} at the end" if move is not None else "")
    elif kind == "redundancy":
        cfg = rec.get("config") if isinstance(rec.get("config"), dict) else {}
        run.config = cfg
        run.width, run.seed, run.train_size = _int(cfg.get("width")), _int(cfg.get("seed")), _int(cfg.get("train_size"))
        pr, corr = _num(rec.get("participation_ratio")), _num(rec.get("mean_abs_corr"))
        run.detail = (f"bank {rec.get('bank')}, n {cfg.get('n')}, fan-in {cfg.get('fan_in')}, sample {cfg.get('sample')}"
                      + (f": participation ratio {pr:.1f}" if pr is not None else "")
                      + (f", mean |corr| {corr:.3f}" if corr is not None else ""))
    elif kind == "gram":
        slope = _num((rec.get("fit") or {}).get("slope"))
        run.detail = f"distance slope {slope:.3f}" if slope is not None else "distance slope not fitted"
    elif kind == "readout":
        import numpy as np

        # Computed in float32 (stored widened to float64): shown at float32's shortest decimal, 76.37 not
        # 76.3699951171875.
        acc, steps = [float(str(np.float32(a))) for a in rec.get("acc", [])], list(rec.get("steps", []))
        run.best_acc, run.final_acc = _best(acc), _last(acc)
        run.detail = f"{len(acc)} evaluations" + (f" up to step {int(steps[-1])}" if len(steps) else "")
    elif kind == "ntk-arm":
        _from_config(run, rec.get("config", {}).get("run") if isinstance(rec.get("config"), dict) else None)
        run.config = rec.get("config") or {}
        run.final_acc = _num(rec.get("acc_net"))
        best = _best((rec.get("training") or {}).get("net_curve"))
        run.best_acc = run.final_acc if best is None else best
        lin, drift = _num(rec.get("acc_lin")), _num(rec.get("drift"))
        run.detail = (f"linearized {lin:.2f} %" if lin is not None else "linearized -") + \
            (f", kernel drift {drift:.3g}" if drift is not None else "") + f", {rec.get('probe')} probe images"
    elif kind == "ntk-lab":
        gap = _num(rec.get("start_gap"))
        run.detail = f"{rec.get('n_params')} parameters" + (f", start gap {gap:.3g}" if gap is not None else "")
    elif kind == "ntk-sweep":
        run.config = rec.get("config") if isinstance(rec.get("config"), dict) else {}
        run.detail = f"widths {','.join(map(str, rec.get('widths') or []))}; seeds {','.join(map(str, rec.get('seeds') or []))}"
    elif kind == "ntk-scalar":
        w0 = _num(rec.get("w0"))
        run.detail = (f"w0 {w0:g}, " if w0 is not None else "") + _checks(rec.get("checks"))
    elif kind == "ntk-audit":
        run.detail = _checks(rec.get("checks"))


def _plugin_of(config: dict) -> str | None:
    """The plugin identity in a stored configuration (an NTK arm's is in its ``run`` part)."""
    for cfg in (config, config.get("run") if isinstance(config.get("run"), dict) else {}):
        if isinstance(cfg.get("plugin"), str) and cfg["plugin"]:
            return cfg["plugin"]
    return None


def installed_identities() -> dict[str, str]:
    """``{unit name: plugin identity}`` of every registered unit (``Registry.identity``: metadata and
    source files, nothing imported)."""
    from lazylab.arms import registry

    reg = registry()
    return {u: reg.identity(u) for u in sorted(set(reg.entries) | set(reg.units))}


def provenance(arm: str | None, plugin: str | None, installed: dict[str, str]) -> str:
    """What a row computed by ``plugin`` for ``arm`` is to the installed units (``Run.provenance``);
    ``installed`` as ``installed_identities`` returns it."""
    from lazylab.arms.loading import unit_of

    if not arm or not plugin:
        return ""
    now = installed.get(unit_of(arm))
    if now is None:
        return NOT_INSTALLED
    if now == plugin:
        return ""
    release = lambda identity: identity.split("+src.", 1)[0]
    return STALE_SOURCE if release(now) == release(plugin) else OTHER_VERSION


def _check_filters(arms, widths, seeds, kinds) -> None:
    """One-line LazylabError for a filter value of the wrong type or out of range, or an unknown kind."""
    for k in kinds or ():
        if k not in KINDS:
            raise LazylabError(f"unknown kind {k!r}; kinds: {', '.join(KINDS)}")
    for name, values, low in (("width", widths, 1), ("seed", seeds, 0)):
        for v in values or ():
            if not isinstance(v, int) or isinstance(v, bool) or v < low:
                raise LazylabError(f"{name} {v!r} is not an integer >= {low}")
    for a in arms or ():
        if not isinstance(a, str) or not a.strip():
            raise LazylabError(f"arm {a!r} is not an arm name")


def _unknown_arms(asked, seen: set[str]) -> list[str]:
    """The asked arms that are neither in the memo's rows nor installed (the unit of each such arm is imported)."""
    from lazylab.arms import registry

    def installed(name: str) -> bool:
        try:
            registry().arm(name)
        except LazylabError:
            return False
        return True

    return [a for a in asked if a not in seen and not installed(a)]


def list_runs(cache_dir: str | Path | None = None, *, memo: Memo | None = None, arms=None, widths=None, seeds=None,
              kinds=None, any_code: bool = False, include_stale: bool = False) -> RunListing:
    """Every result in the memo as a ``Run``, filtered; nothing is computed.

    Args:
      cache_dir: the memo folder [default: ``lazylab.cache.default_dir()``: ``$LAZYLAB_CACHE``,
        else ``$XDG_CACHE_HOME/lazylab/memo`` or ``~/.cache/lazylab/memo``]. A folder without a
        memo lists nothing (it is not created).
      memo: an open ``Memo`` to read instead (``cache_dir`` is then ignored).
      arms, widths, seeds, kinds: keep only rows whose field is one of these (None: any). A row
        without the field (a redundancy has no arm, a gram entry no width) never matches a filter
        on it.
      any_code: also list results computed by other code identities (never reused by this
        lazylab; ``lazylab cache prune`` removes them) [default: the current one's only].
      include_stale: also list results whose plugin is not the installed one (``Run.provenance``:
        stale source, other version, not installed), never reused [default: the installed plugins' only].
    Returns: RunListing (rows sorted by kind, arm, width, seed).
    Raises: LazylabError (one line) for an unknown kind, a width below 1, a negative seed, an arm
      that is neither in the memo nor installed, or a memo that cannot be read.
    """
    _check_filters(arms, widths, seeds, kinds)
    if memo is None:
        directory = check_memo_dir(Path(cache_dir).expanduser() if cache_dir else default_dir())
        note = None if cache_dir or os.environ.get("LAZYLAB_CACHE") else legacy_note(directory)
        if not (directory / "cache.db").is_file():
            listing = RunListing(runs=[], directory=directory, problems=[note] if note else [])
            if arms:
                bad = _unknown_arms(list(arms), set())
                if bad:
                    raise LazylabError(f"unknown arm {bad[0]!r}: not installed (lazylab arms lists them), "
                                       f"and the memo at {directory} is empty")
            return listing
        memo = Memo(directory, feature_limit=0)
        try:
            listing = list_runs(memo=memo, arms=arms, widths=widths, seeds=seeds, kinds=kinds, any_code=any_code,
                                include_stale=include_stale)
        finally:
            memo.close()
        listing.problems[:0] = [note] if note else []
        return listing
    current = code_identity()
    entries = memo.entries()
    installed = installed_identities()
    rows, other, stale, seen_arms = [], 0, 0, set()
    for key, tag, stored in entries:
        m = KEY.fullmatch(key)
        kind = KIND_OF.get((m["prefix"], m["part"])) if m else None
        if kind is None or (kinds and kind not in kinds):
            continue
        rec = memo.get_arrays(key) if kind == "readout" else memo.get_record(key)
        if not isinstance(rec, dict):
            continue
        run = Run(kind=kind, key=f"{m['prefix']}-{m['digest']}", code=tag)
        try:
            _fill(run, rec)
        except (TypeError, ValueError, AttributeError, KeyError, IndexError):  # another code's layout
            run.detail = "record in an unknown layout"
        if run.code is None and isinstance(run.config.get("code"), str):
            run.code = run.config["code"]
        run.plugin = _plugin_of(run.config)
        # A redundancy row measures a bank, not an arm: its unit is the one behind the bank's frozen arm.
        bank_arm = f"{rec['bank']}-frozen" if kind == "redundancy" and isinstance(rec.get("bank"), str) else None
        run.provenance = provenance(run.arm or bank_arm, run.plugin, installed)
        if stored is not None:
            run.stored = datetime.fromtimestamp(stored, timezone.utc).replace(microsecond=0)  # as JSON keeps it
        if run.arm:
            seen_arms.add(run.arm)
        if (arms and run.arm not in arms) or (widths and run.width not in widths) or (seeds and run.seed not in seeds):
            continue
        if tag != current and not any_code:
            other += 1
            continue
        if run.provenance and not include_stale:
            stale += 1
            continue
        rows.append(run)
    if arms:
        bad = _unknown_arms(list(arms), seen_arms)
        if bad:
            held = ", ".join(sorted(seen_arms)) or "none"
            raise LazylabError(f"unknown arm {bad[0]!r}: not installed and not in the memo at {memo.directory} "
                               f"(its arms: {held})")
    rows.sort(key=sort_key)
    return RunListing(runs=rows, directory=memo.directory, entries=len(entries), other_code=other, stale=stale,
                      problems=list(memo.problems))


def superseded_note(memo: Memo, todo) -> str | None:
    """One line saying why runs about to be computed seem to be in the memo: it holds the same
    configurations computed by another plugin identity of their arm (an edited, upgraded or other
    plugin), never reused. ``todo``: ``[(lazylab.arms.Arm, [RunConfig, ...]), ...]``, the runs the
    command computes; each is counted once, under the identity that computed its older copy.
    None when the memo holds none of them.
    """
    import json

    from lazylab.arms.loading import unit_of

    def same(config: dict) -> str:  # a configuration, whatever plugin identity computed it
        return json.dumps({k: v for k, v in config.items() if k != "plugin"}, sort_keys=True)

    arms = {arm.name: arm for arm, _ in todo}
    wanted = {same(json.loads(cfg.canonical())) for _, cfgs in todo for cfg in cfgs}
    if not wanted:
        return None
    by: dict[tuple[str, str], set[str]] = {}
    for r in list_runs(memo=memo, arms=list(arms), kinds=["run"], include_stale=True).runs:
        if r.plugin and r.plugin != arms[r.arm].plugin and same(r.config) in wanted:
            by.setdefault((r.arm, r.plugin), set()).add(same(r.config))
    if not by:
        return None
    identities = {unit_of(a.name): a.plugin for a in arms.values()}
    what = "; ".join(f"{len(configs)} of {arm} by {plugin} ({provenance(arm, plugin, identities)}; "
                     f"installed: {arms[arm].plugin})" for (arm, plugin), configs in sorted(by.items()))
    return f"note: the memo holds results computed by another plugin, never reused, so these are computed again: {what}"


def stale_source_entries(memo: Memo) -> list[str]:
    """Keys of the main store's entries that hold results of plugin sources edited since
    (``Run.provenance`` ``stale source``: the installed distribution and version, other source files),
    each result with its parts; only the current code's (other code's are ``Memo.prune``'s). Such
    results are reused only if the edit is reverted."""
    stale = {r.key for r in list_runs(memo=memo, include_stale=True).runs if r.provenance == STALE_SOURCE}
    found = [(k, KEY.fullmatch(k)) for k, _, _ in memo.entries()]
    return [k for k, m in found if m and f"{m['prefix']}-{m['digest']}" in stale]


def sort_key(run: Run) -> tuple:
    """Kind (``KINDS`` order), arm, width, seed, lr, epochs, key; a missing field sorts last."""
    def k(v):
        return (v is None, v if v is not None else 0)

    return (KINDS.index(run.kind), k(run.arm), k(run.width), k(run.seed), k(run.lr), k(run.epochs), run.key)
