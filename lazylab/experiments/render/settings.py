"""The settings of every picture ``lazylab render`` draws, and the ``--json`` files that set them (``render --from``).

Each part has its subcommand's defaults (``lazylab gram``, ``readout``,
``trajectory``, ``ntk``, ``ladder``), so ``render`` and the subcommands share
memo entries; the two choices that differ (the trajectory rate, which ladder)
are described in ``lazylab.experiments.render``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from lazylab.errors import LazylabError
from lazylab.ntk.lab import LabConfig
from lazylab.schemas import MAX_FILE_BYTES

FIXED_TRAJECTORY_LR = 0.03  # what bracketing chose for yat-trained, yat-data-trained, gaussian-trained (docs/trajectory.md)
NTK_MEMO_SCHEMA = 1  # bump when the stored layout of the lab, sweep, scalar or audit results changes
SWEEP_WIDTHS = (8, 16, 32, 64, 128, 256, 512, 1024)  # docs/ntk.md's sweep
SWEEP_LR = 0.05  # the CLI's sweep default (lazylab ntk lab --widths)
SWEEP_SEEDS = (0, 1, 2, 3, 4)
LADDER_CHOICES = ("auto", "quick", "paper")


# ------------------------------------------------------------------ settings
@dataclass(frozen=True)
class GramSettings:
    """``lazylab gram``'s defaults (docs/gram_readout.md)."""

    arm: str = "yat-frozen"
    max_units: int = 2000
    frames: int = 40
    classes: tuple[int, ...] = (0, 1, 7)
    per_class: int = 10
    seed: int = 0
    ref_units: int | None = None
    fit_min: int = 10
    repeats: int = 1


@dataclass(frozen=True)
class ReadoutSettings:
    """``lazylab readout``'s defaults (docs/gram_readout.md)."""

    arm: str = "yat-frozen"
    widths: tuple[int, ...] = (64, 512)
    train_size: int = 10_000
    steps: int = 300
    lr: float = 0.3
    eval_every: int = 5
    seed: int = 0


@dataclass(frozen=True)
class TrajectorySettings:
    """``lazylab trajectory``'s defaults, except the rate (module docstring).

    ``lr=None``: each arm's bracketed rate if its whole bracket is in the memo,
    else ``fallback_lr``. A number: that rate for every arm.
    """

    arms: tuple[str, ...] = ("yat-trained", "yat-data-trained", "gaussian-trained")
    width: int = 64
    epochs: int = 24
    snapshots: int = 16
    seed: int = 0
    lr: float | None = None
    fallback_lr: float = FIXED_TRAJECTORY_LR
    train_size: int = 60000
    fan_in: str = "unit"
    prototype_scale: str = "per-image"  # or "shared" (lazylab.render.trajectory.prototype_figure)


@dataclass(frozen=True)
class NtkSettings:
    """``lazylab ntk lab`` (one run: m = 32, lr 0.5, 2000 steps, 60 frames), its width sweep
    (lr 0.05, seeds 0-4, widths 8..1024), ``ntk scalar`` (w0 = 0.01) and ``ntk audit``."""

    lab_config: LabConfig = LabConfig()
    sweep_widths: tuple[int, ...] = SWEEP_WIDTHS
    sweep_lr: float = SWEEP_LR
    sweep_seeds: tuple[int, ...] = SWEEP_SEEDS
    w0: float = 0.01
    times: tuple[float, ...] = (0.0, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0)
    dt: float = 1e-3
    offset: float = 1e-3

    def lab(self):
        return self.lab_config.validate()

    def sweep(self):
        return replace(self.lab_config, width=self.sweep_widths[0], lr=self.sweep_lr, seed=self.sweep_seeds[0]).validate()

    def audit(self):
        return LabConfig()  # the audit's own default configuration (lazylab ntk audit)


@dataclass(frozen=True)
class LadderSettings:
    """Which ladder the figures and the table show.

    ``preset``: ``"auto"`` (paper if complete in the memo, else quick), ``"quick"`` or ``"paper"``
    (``lazylab ladder --preset``). ``plan``: an explicit plan instead (``arms``, ``widths``,
    ``seeds``, ``epochs``, ``train_size``, ``lr``; tests use a tiny one).
    """

    preset: str = "auto"
    plan: tuple | None = None  # sorted (key, value) pairs of an explicit plan
    source: str | None = None  # a ``ladder --json`` file to show instead (``render --from``)

    @staticmethod
    def explicit(**plan) -> "LadderSettings":
        return LadderSettings(preset="custom", plan=tuple(sorted((k, tuple(v) if isinstance(v, list) else v)
                                                                 for k, v in plan.items())))

    @staticmethod
    def from_file(path) -> "LadderSettings":
        """The ladder a ``lazylab ladder --json`` file holds, shown as written (``load_ladder_json`` reads it)."""
        return LadderSettings(preset="file", source=str(path))


@dataclass(frozen=True)
class RenderSettings:
    """Everything ``render`` draws, each part with its subcommand's defaults."""

    gram: GramSettings = field(default_factory=GramSettings)
    readout: ReadoutSettings = field(default_factory=ReadoutSettings)
    trajectory: TrajectorySettings = field(default_factory=TrajectorySettings)
    ntk: NtkSettings = field(default_factory=NtkSettings)
    ladder: LadderSettings = field(default_factory=LadderSettings)
    reference: str | None = None  # the reference results file [default: the shipped lazylab/reference/paper.json]

    def with_ladder(self, preset: str) -> "RenderSettings":
        if self.ladder.plan is not None or self.ladder.source is not None:
            return self
        return replace(self, ladder=LadderSettings(preset=preset))


DEFAULT_SETTINGS = RenderSettings()


# --------------------------------------------- --json files (render --from)
JSON_KINDS = {  # a key only that kind's --json output has at its top level -> its name
    "pictures": "trajectory", "frames": "gram", "curves": "readout", "checks": "ntk",
}


def json_kind(payload) -> str | None:
    """Which command wrote a ``--json`` file: ``"trajectory"``, ``"gram"``, ``"readout"``, ``"ntk"``, else
    ``"ladder"`` when it has a plan, else None."""
    if not isinstance(payload, dict):
        return None
    if payload.get("experiment") in ("gram", "readout"):
        return payload["experiment"]
    kind = next((k for key, k in JSON_KINDS.items() if key in payload), None)
    return kind or ("ladder" if "plan" in payload else None)


FROM_MAX_BYTES = MAX_FILE_BYTES  # the cap on a --from file: far above any --json file lazylab writes


def _read_json(path) -> tuple[object, bytes]:
    """``(document, raw bytes)`` of a ``--from`` file, read by the one bounded reader (``lazylab.schemas``).

    Raises: LazylabError (one line naming the file) for a file that is missing, not a regular file (a FIFO,
      a device, a folder), over the size cap, not JSON, or nested too deeply to parse.
    """
    from lazylab.schemas import parse_json, read_bytes

    raw = read_bytes(path, "--from", FROM_MAX_BYTES)
    return parse_json(raw, f"--from {path}"), raw


def _arm_of(name: str, what: str, where: str, command: str, trained: bool):
    """The arm a file names at field ``where``: known, and trained (``trained``) or frozen as ``command`` needs.

    Raises: LazylabError (one line naming ``what`` and the field) otherwise.
    """
    from lazylab.arms import get_arm

    try:
        arm = get_arm(name)
    except LazylabError as exc:
        raise LazylabError(f"{what}: field {where}: {exc}") from None
    if arm.trained != trained:
        need, kind = ("trained", "frozen") if trained else ("frozen", "trained")
        raise LazylabError(f"{what}: field {where}: {command} needs {need} arms; {name!r} is {kind}")
    return arm


def with_json(settings: RenderSettings, path) -> RenderSettings:
    """``settings`` with the part a ``--json`` file names replaced by that file's configuration (``render --from``).

    A ``lazylab ladder --json`` file becomes the ladder shown as written (``load_ladder_json``); a
    ``lazylab gram``, ``readout`` or ``trajectory`` ``--json`` file sets that picture's settings to the
    configuration it records, so the picture is drawn from the memo entry that command left (or
    recomputed, with the same memo key, if the memo lacks it). The rate of a trajectory whose arms were
    bracketed is looked up again in the memo (``trajectory_rates``). Each file is checked against its
    schema (``lazylab.schemas.results``: the types and ranges of the options that wrote it), so a value
    the command line refuses is refused in a file too, before anything is computed.
    Raises: LazylabError (one line naming the file, and the field when one is wrong) for an unreadable
      file, a field missing or of the wrong type or out of its option's range, an unknown arm or one of
      the wrong kind, an ``ntk`` file (not shown from files), or a malformed ladder.
    """
    from lazylab.schemas import validate
    from lazylab.schemas.results import RESULT_FILES

    payload, _ = _read_json(path)
    kind = json_kind(payload)
    if kind not in RESULT_FILES:
        _check_ladder(payload, path)  # a ladder's, or one line saying what is wrong with it, before anything is computed
        return replace(settings, ladder=LadderSettings.from_file(path))
    what = f"--from {path} (`lazylab {kind} --json` output)"
    doc = validate(RESULT_FILES[kind], payload, what)
    if kind == "gram":
        c = doc.config
        arm = _arm_of(c.arm, what, "config.arm", "gram", trained=False)
        _check_ref_units(arm, c.max_units, c.ref_units, what)
        return replace(settings, gram=GramSettings(
            arm=c.arm, max_units=c.max_units, frames=c.frames, classes=tuple(c.classes), per_class=c.per_class,
            seed=c.seed, ref_units=c.ref_units, fit_min=c.fit_min, repeats=c.repeats))
    if kind == "readout":
        cs = [curve.config for curve in doc.curves]
        c = cs[0]
        arm = _arm_of(c.arm, what, "curves[0].config.arm", "readout", trained=False)
        widest = max(x.width for x in cs)
        if arm.init == "data" and widest > c.train_size:  # as readout_configs checks, naming the file
            raise LazylabError(f"{what}: field curves[0].config.train_size: width {widest} exceeds the "
                               f"{c.train_size} training images available for data seeding")
        return replace(settings, readout=ReadoutSettings(
            arm=c.arm, widths=tuple(x.width for x in cs), train_size=c.train_size, steps=c.steps,
            lr=c.lr, eval_every=c.eval_every, seed=c.seed))
    if kind == "trajectory":
        p = doc.plan
        for i, name in enumerate(p.arms):
            _arm_of(name, what, f"plan.arms[{i}]", "trajectory", trained=True)
        return replace(settings, trajectory=replace(
            settings.trajectory, arms=tuple(p.arms), width=p.width, epochs=p.epochs, snapshots=p.snapshots,
            seed=p.seed, lr=p.lr, train_size=p.train_size, fan_in=p.fan_in))
    raise LazylabError(f"--from: {path} is `lazylab ntk` output; the NTK pictures are drawn with their defaults "
                       "(docs/render.md)")


def _check_ref_units(arm, max_units: int, ref_units: int | None, what: str) -> None:
    """``gram_config``'s bound on an explicit reference width of a random-init arm, naming the file's field."""
    from lazylab.experiments.gram_config import MAX_REF_CHUNKS, MIN_REF_FACTOR

    lo, hi = MIN_REF_FACTOR * max_units, MAX_REF_CHUNKS * max_units
    if arm.init != "data" and ref_units is not None and not lo <= ref_units <= hi:
        raise LazylabError(f"{what}: field config.ref_units: {ref_units} is not between {MIN_REF_FACTOR} x max_units "
                           f"({lo}) and {MAX_REF_CHUNKS} x max_units ({hi})")


def load_ladder_json(path) -> tuple[dict, str]:
    """``(payload, sha256)`` of a file written by ``lazylab ladder --json`` (``render --from``).

    Read by the bounded reader (``_read_json``); the payload is checked by
    ``lazylab.reference.check_payload``; a plugin arm needs no installed unit here (the file
    carries its numbers). Older files without the ``unstable`` marks get them from their loss
    curves; without ``exchange``/``warnings`` they are shown without them.
    Raises: LazylabError (one line) if the file cannot be read, is not a regular file, is too
      large, is not JSON, is another command's JSON (``with_json`` takes those), a
      ``--readout convex`` ladder, or a malformed ladder payload.
    """
    import hashlib

    payload, raw = _read_json(path)
    _check_ladder(payload, path)
    return payload, hashlib.sha256(raw).hexdigest()


def _check_ladder(payload, path) -> None:
    """Raise LazylabError (one line) unless ``payload`` is a ladder's (``lazylab.reference.check_payload``)."""
    from lazylab.reference import check_payload

    kind = json_kind(payload)
    if kind not in ("ladder", None):
        raise LazylabError(f"--from: {path} is `lazylab {kind} --json` output, not a ladder's")
    if isinstance(payload, dict) and isinstance(payload.get("plan"), dict) and payload["plan"].get("readout") == "convex":
        raise LazylabError(f"--from: {path} is a `ladder --readout convex` file; use `ladder --readout both --json`")
    check_payload(payload, f"--from {path}")
