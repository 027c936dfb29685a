"""Progress on stderr: a live rich display on a terminal, plain log lines otherwise.

On a terminal each running stage is one bar with its elapsed and remaining time; a stage that
finishes leaves the display. Piped, under nohup, in CI or in a notebook's ``!lazylab``, progress
is plain lines instead: one per finished run, and for other stages at most one every
``PLAIN_EVERY`` seconds plus one when the stage ends, each with counts, elapsed time and an
estimate of the time left. ``-q`` prints no progress, ``-v`` adds one line per epoch.
"""

from __future__ import annotations

import math
import time

from rich.progress import ProgressColumn, TimeRemainingColumn
from rich.text import Text

from lazylab.cli.output import count, err, wrap_lines

PLAIN_EVERY = 10.0  # seconds between two plain lines of one stage (finished runs always get one)
QUIET, NORMAL, VERBOSE = 0, 1, 2
verbosity = NORMAL  # set by the group's -q / -v


def duration(seconds: float) -> str:
    """``"0.4 s"``, ``"42 s"``, ``"3 min 05 s"``, ``"1 h 12 min"``."""
    if seconds < 9.95:
        return f"{seconds:.1f} s"
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


class Display:
    """One command's progress: ``task(name, total)`` opens a stage, ``update`` moves it, ``finish``
    closes it (it leaves the live display); ``line(text)`` logs one plain line."""

    def __init__(self):
        self.live = err.is_terminal and verbosity > QUIET
        self.rich = None
        self.t0 = time.monotonic()
        self.stages: dict[int, dict] = {}

    def __enter__(self):
        if self.live:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.rich = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), _Remaining(), console=err, transient=True)
            self.rich.__enter__()
        return self

    def __exit__(self, *exc):
        if self.rich is not None:
            self.rich.__exit__(*exc)
        return False

    def task(self, name: str, total: int | None = None) -> int:
        """Open a stage; returns its id."""
        tid = self.rich.add_task(name, total=total, eta=None) if self.rich is not None else len(self.stages)
        now = time.monotonic()
        self.stages[tid] = {"name": name, "total": total, "done": 0, "t0": now, "said": now, "eta": None}
        return tid

    def update(self, tid: int, done: int | None = None, total: int | None = None, description: str | None = None,
               advance: int = 0, say: str | None = None, eta: float | None = None) -> None:
        """Move stage ``tid``; ``say`` is logged as a plain line (throttled unless it ends the stage);
        ``eta``, seconds left, replaces the pace-based estimate (``ProgressReporter`` derives it from the plan)."""
        st = self.stages[tid]
        st["total"] = st["total"] if total is None else total
        st["done"] = (st["done"] if done is None else done) + advance
        st["eta"] = st["eta"] if eta is None else eta
        if self.rich is not None:
            self.rich.update(tid, completed=st["done"], total=st["total"], eta=st["eta"],
                             **({"description": description} if description else {}))
            return
        now = time.monotonic()
        ended = st["total"] is not None and st["done"] >= st["total"]
        if say is not None or ended or now - st["said"] >= PLAIN_EVERY:
            st["said"] = now
            self.line(self.status(tid) + (f": {say}" if say else f": {description}" if description else ""))

    def status(self, tid: int) -> str:
        """``stage 3/27, 42 s, eta 1 min 10 s`` (eta from the plan, else from the pace so far)."""
        st = self.stages[tid]
        spent = time.monotonic() - st["t0"]
        text = f"{st['name']} {st['done']}" + (f"/{st['total']}" if st["total"] else "") + f", {duration(spent)}"
        if st["total"] and 0 < st["done"] < st["total"]:
            eta = st["eta"] if st["eta"] is not None else spent / st["done"] * (st["total"] - st["done"])
            text += f", eta {duration(eta)}"
        return text

    def finish(self, tid: int) -> None:
        """Close stage ``tid``: its bar leaves the live display."""
        if self.rich is not None and tid in self.stages:
            self.rich.remove_task(tid)
        self.stages.pop(tid, None)

    def line(self, text: str) -> None:
        """One plain progress line on stderr (not on a terminal's live display, not with -q)."""
        if verbosity > QUIET and self.rich is None:
            err.print(f"[{duration(time.monotonic() - self.t0):>10}] {text}", markup=False, highlight=False,
                      soft_wrap=not wrap_lines())


class _Remaining(ProgressColumn):
    """Live display column: the stage's ``eta`` field when a plan gave one, else rich's pace-based time left."""

    def __init__(self):
        super().__init__()
        self.pace = TimeRemainingColumn()

    def render(self, task):
        eta = task.fields.get("eta")
        return Text("eta ") + (self.pace.render(task) if eta is None else Text(duration(eta), style="progress.remaining"))


def stage_ticker(display: Display):
    """A ``tick(stage, done, total)`` callback (the experiments' stage progress): one display
    stage per name, closed when ``done`` reaches ``total``."""
    tasks: dict[str, int] = {}

    def tick(stage, done, total):
        check_interrupt()
        if stage not in tasks:
            tasks[stage] = display.task(stage, total)
        display.update(tasks[stage], done=done, total=total)
        if total and done >= total:
            display.finish(tasks.pop(stage))

    return tick


PACE_AFTER = 0.1  # the share of a plan's estimated seconds done before the time left follows the pace


class ProgressReporter:
    """The experiments' run reporter (``plan``, ``start``, ``epoch``, ``done``) drawn on a ``Display``:
    a bar with the current run, and in plain mode one line per finished run.

    The latest one is kept in ``ProgressReporter.latest`` (``main`` sets it to None before each
    command), and each one keeps the one before it in ``before``, so that ``main`` can say, after an
    interrupt, how many finished runs the command kept in the memo over all its stages.
    """

    latest = None

    def __init__(self, display: Display, name: str = "runs", est=None, convex: bool = False, optimum: bool = False):
        self.before = ProgressReporter.latest  # the command's earlier stage (a ladder before its convex readouts)
        ProgressReporter.latest = self
        self.display = display
        self.task = display.task(name)
        self.computed = 0
        self.cached = 0
        self._reported: dict[str, bool] = {}  # key -> cached; a bracket run reused as a ladder cell is counted once
        # The plan's estimated seconds per run to compute (lazylab.estimate), so that the time left
        # follows the plan (the wide runs come last) scaled by the pace so far, not the first runs' pace;
        # ``convex`` keeps the convex readouts' rows (a stage of their own), ``optimum`` the trained
        # optimum's, else the training runs'.
        stage = "convex" if convex else "optimum" if optimum else "run"
        self.pending = {(_kind(r["phase"]), r["arm"], r["width"], r["seed"], r["lr"]): r["seconds"]
                        for r in (est.runs if est is not None else [])
                        if not r["in_memo"] and _stage(r["phase"]) == stage}
        self.planned_done = 0.0
        self.planned_total = sum(self.pending.values())
        self.t0 = time.monotonic()

    def plan(self, total):
        self.display.update(self.task, total=total)

    def more(self, n):
        self.display.update(self.task, total=(self.display.stages[self.task]["total"] or 0) + n)

    @staticmethod
    def label(cfg) -> str:
        """``arm m=W seed=S lr=R`` (``... refit`` for a trained optimum's refit), ``... convex`` for a convex readout,
        ``... lambda`` for its choice, ``... lambda refined`` for its refinement (no rate)."""
        kind = {"convex-lambda": "lambda", "convex-refine": "lambda refined", "optimum-refit": "refit"}.get(
            _config_kind(cfg), "convex")
        tail = kind if cfg.lr is None else f"lr={cfg.lr:g}" + (" refit" if kind == "refit" else "")
        return f"{cfg.arm} m={cfg.width} seed={cfg.seed} " + tail

    def start(self, cfg):
        check_interrupt()
        self.display.update(self.task, description=self.label(cfg))

    def epoch(self, cfg, epoch, acc):
        check_interrupt()
        text = f"{self.label(cfg)} epoch {epoch}/{cfg.epochs}" + (f" {acc:.2f}%" if acc is not None and math.isfinite(acc) else "")  # a refit: no score
        if verbosity >= VERBOSE and self.display.rich is None:
            self.display.line(text)
        self.display.update(self.task, description=text)

    def done(self, cfg, record, cached):
        if record["key"] not in self._reported:
            self._reported[record["key"]] = bool(cached)
            self.cached += cached
            self.computed += not cached
            best = record.get("best_acc")
            what = "from the memo" if cached else f"computed in {duration(record.get('seconds') or 0)}"
            self.display.update(self.task, advance=1, description=self.label(cfg), eta=self._eta(cfg, cached),
                                say=f"{self.label(cfg)}: " + (f"best {best:.2f} %, " if best is not None else "") + what)
        check_interrupt()

    def _eta(self, cfg, cached: bool) -> float | None:
        """Seconds left: the plan's estimate of the runs still to compute, times (time spent / the plan's
        estimate of the runs computed so far) once a tenth of the plan is done; before that the plan's
        own figures (the first runs pay the compilations: their pace would say hours); None without a plan."""
        if not self.pending and not self.planned_done:
            return None
        kind = _config_kind(cfg)
        lr = getattr(cfg, "lr", None)
        planned = self.pending.pop((kind, cfg.arm, cfg.width, cfg.seed, lr), None)
        if planned is None:  # a cell whose rate the plan could not know before its bracket ran
            planned = self.pending.pop((kind, cfg.arm, cfg.width, cfg.seed, None), None)
        if not cached and planned:
            self.planned_done += planned
        settled = self.planned_done and self.planned_done >= PACE_AFTER * self.planned_total
        pace = (time.monotonic() - self.t0) / self.planned_done if settled else 1.0
        return sum(self.pending.values()) * pace

    def summary(self) -> str:
        """``N computed, K from the memo``."""
        return f"{self.computed} computed, {self.cached} from the memo"


ROW_KINDS = ("convex", "convex-lambda", "convex-refine", "optimum", "optimum-refit")


def _kind(phase: str) -> str:
    """An estimate row's kind: its phase when a readout's, a lambda choice's or refinement's, or the trained
    optimum's (``ROW_KINDS``), else ``"run"``."""
    return phase if phase in ROW_KINDS else "run"


def _stage(phase: str) -> str:
    """Which progress stage computes an estimate row: ``"convex"``, ``"optimum"`` or ``"run"``."""
    return _kind(phase).split("-")[0]


def _config_kind(cfg) -> str:
    """The estimate row kind of the config a stage reports (``_kind``'s names)."""
    from lazylab.experiments.convex import LambdaConfig, RefineConfig
    from lazylab.experiments.optimum import RefitConfig, SelectConfig

    kinds = {LambdaConfig: "convex-lambda", RefineConfig: "convex-refine", SelectConfig: "optimum",
             RefitConfig: "optimum-refit"}
    return kinds.get(type(cfg), "convex" if hasattr(cfg, "lam") else "run")


def sweep(backend, experiment, ws, plan, name: str = "runs", est=None):
    """``(experiment(ws, plan, reporter), reporter)`` under a progress display (its time left from
    the Estimate ``est`` when given), then ``backend.close()``, also on Ctrl-C: what is stored
    stays, pending Ray tasks are cancelled."""
    try:
        with Display() as display:
            reporter = ProgressReporter(display, name, est)
            return experiment(ws, plan, reporter), reporter
    finally:
        backend.close()


# ----------------------------------------------------------------- interrupts
interrupted = False  # set by the SIGINT handler that ``lazylab.cli.main`` installs


REDELIVER_S = 0.05  # how soon a Ctrl-C met during an import is delivered again


def on_sigint(signum, frame):
    """SIGINT handler: remember the interrupt (see ``check_interrupt``) and raise KeyboardInterrupt, except
    during an import (``frame`` inside importlib): there SIGINT is sent again ``REDELIVER_S`` later, until the
    import is over. An exception raised while a native extension initialises (jaxlib's, in a command's first
    seconds) killed the process with SIGSEGV or SIGABRT and said nothing."""
    global interrupted
    interrupted = True
    if _importing(frame):
        import os
        import signal
        import threading

        timer = threading.Timer(REDELIVER_S, os.kill, (os.getpid(), signal.SIGINT))
        timer.daemon = True
        timer.start()
        return
    raise KeyboardInterrupt


def _importing(frame) -> bool:
    """Whether ``frame`` (the one a signal handler is given) or a caller of it is importlib's: a module is being
    imported."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib._bootstrap"):
            return True
        frame = frame.f_back
    return False


def quiet_interrupts(hook):
    """``sys.unraisablehook`` that says nothing of a KeyboardInterrupt: Python cannot raise the one ``on_sigint``
    raises inside a finalizer or a garbage-collector callback (jax's), and would print "Exception ignored in ...";
    ``check_interrupt`` raises it again. Every other unraisable exception goes to ``hook``."""
    def quiet(unraisable):
        if not isinstance(unraisable.exc_value, KeyboardInterrupt):
            hook(unraisable)

    return quiet


def check_interrupt() -> None:
    """Raise KeyboardInterrupt again if one was swallowed (Python drops an exception raised in a finalizer)."""
    if interrupted:
        raise KeyboardInterrupt


def kept_runs() -> tuple[int, int] | None:
    """``(computed now, already in the memo)``: the distinct runs every stage of this command reported
    (``ProgressReporter.latest`` and the ones ``before`` it), each once; None when no stage reported.
    A run computed by one stage and met again by a later one counts as computed."""
    rep, cached = ProgressReporter.latest, {}
    if rep is None:
        return None
    while rep is not None:
        for key, was_cached in rep._reported.items():
            cached[key] = cached.get(key, True) and was_cached
        rep = rep.before
    now = sum(not c for c in cached.values())
    return now, len(cached) - now


def interrupted_message() -> str:
    """What an interrupt leaves: the finished runs the command kept in the memo, over all its stages."""
    kept = kept_runs()
    if kept is None:
        return "interrupted: every finished run is kept in the memo; run the same command to resume"
    computed, cached = kept
    return (f"interrupted: {count(computed + cached, 'run')} kept in the memo ({computed} computed now, "
            f"{cached} already there); run the same command to resume")
