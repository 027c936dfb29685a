"""Plan against wall: what ``--dry-run`` says a command costs, then what it takes, from an empty memo and compile cache.

Usage: .venv/bin/python bench/estimate.py [--only quick,convex,verify,optimum] [--markdown]

For each command below, in its own empty temporary memo and jax compilation cache (a fresh clone's
first run), as a user runs them (subprocesses of ``.venv/bin/lazylab``):

1. ``COMMAND --dry-run --json PLAN``: the plan and its estimate (``lazylab.estimate``), with whatever
   else runs on the machine at that moment;
2. ``COMMAND``: its wall time, the CPU time it got, and the 1-minute load average sampled every 5 s
   while it ran (other jobs on the cores show there);
3. the ratio plan / wall (issue 49: between 0.67 and 1.5, on quiet cores and beside other jobs), and
   per phase the estimate against the records' own seconds where the command writes records.

The commands: the quick preset (``ladder --preset quick``), a small convex ladder (``CONVEX``: two
frozen arms, widths 64 and 256, seeds 0 and 1, ``--readout convex``), ``verify`` (every arm's
seed-0 runs at m = 256 of the shipped reference, and its convex readouts there) and a small ladder with
the trained side at its optimum (``OPTIMUM``: ``--readout both`` with yat-trained at widths 16 and 64). ``--markdown`` ends with the table that
docs/performance.md ("Estimates against wall time") holds. This machine's calibration
(``lazylab.calibration``) is measured first if it never was, so that no plan pays for it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

LAZYLAB = str(Path(sys.executable).parent / "lazylab")
CONVEX = ["ladder", "--arms", "yat-frozen,relu-frozen", "--widths", "64,256", "--seeds", "0,1", "--readout", "convex"]
# The trained side at its optimum (--readout both with a trained arm): one trained arm's selection runs and refits.
OPTIMUM = ["ladder", "--arms", "yat-frozen,yat-trained", "--widths", "16,64", "--seeds", "0,1", "--epochs", "3",
           "--readout", "both"]
COMMANDS = {"quick": ["ladder", "--preset", "quick"], "convex": CONVEX, "verify": ["verify"], "optimum": OPTIMUM}
LOAD_EVERY_S = 5.0


def cpu_name() -> str:
    """The CPU model from /proc/cpuinfo (``platform.processor()`` elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def sample_load(stop: threading.Event, into: list) -> None:
    """Append the 1-minute load average to ``into`` every ``LOAD_EVERY_S`` until ``stop`` is set."""
    while not stop.wait(LOAD_EVERY_S):
        into.append(os.getloadavg()[0])


def run(argv: list[str], env: dict) -> tuple[float, float, list[float], str]:
    """``lazylab ARGV`` to completion: (wall s, CPU s of the child, load averages sampled, stderr tail).
    Exits with the command's last error line when it fails (verify's exit 1, a diverged run, is a result)."""
    loads, stop = [os.getloadavg()[0]], threading.Event()
    sampler = threading.Thread(target=sample_load, args=(stop, loads), daemon=True)
    sampler.start()
    t0 = time.perf_counter()
    proc = subprocess.Popen([LAZYLAB, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    stop.set()
    stdout, stderr = proc.stdout.read(), proc.stderr.read()
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1) or (code == 1 and argv[0] != "verify"):
        sys.exit(f"lazylab {' '.join(argv)} failed ({code}): {(stderr.strip().splitlines() or ['?'])[-1]}")
    return wall, usage.ru_utime + usage.ru_stime, loads, stdout


def phases_measured(name: str, result: dict) -> dict:
    """Seconds per phase from a command's ``--json`` (the records' own seconds; wall time outside runs is not in them)."""
    out: dict = defaultdict(float)
    if name == "convex":
        convex = result.get("convex") or {}
        for r in convex.get("choices", []):
            out["convex-lambda"] += r.get("seconds") or 0.0
        for r in convex.get("refinements", []):
            out["convex-refine"] += r.get("seconds") or 0.0
        for r in convex.get("runs", []):
            out["convex"] += r.get("seconds") or 0.0
    elif name != "verify":  # verify's JSON holds its rows' verdicts, not their records' seconds
        for r in result.get("runs", []):
            out["runs"] += r.get("seconds") or 0.0
        optimum = result.get("optimum") or {}
        for part, phase in (("runs", "optimum"), ("fits", "optimum-refit")):
            for r in optimum.get(part, []):
                out[phase] += r.get("seconds") or 0.0
    return dict(out)


def phases_planned(name: str, plan: dict) -> dict:
    """Estimated seconds per phase of a ``--dry-run --json`` plan (ladder phases folded into ``runs``)."""
    out: dict = defaultdict(float)
    for r in plan["runs"]:
        out[r["phase"] if name == "convex" or r["phase"].startswith("optimum") else "runs"] += r["seconds"]
    return dict(out)


def measure(name: str, argv: list[str], tmp: Path) -> dict:
    """Plan and wall of one command in an empty memo and compilation cache under ``tmp``."""
    memo, xla, out = tmp / f"{name}-memo", tmp / f"{name}-xla", tmp / f"{name}-out"
    env = {**os.environ, "LAZYLAB_CACHE": str(memo), "LAZYLAB_XLA_CACHE": str(xla), "LAZYLAB_OUT": str(out)}
    extra = ["--cache-dir", str(memo)] if name == "verify" else []  # verify's memo is kept for its records' seconds
    plan_path, json_path = tmp / f"{name}-plan.json", tmp / f"{name}.json"
    subprocess.run([LAZYLAB, *argv, *extra, "--dry-run", "--json", str(plan_path)], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    plan = json.loads(plan_path.read_text())
    wall, cpu, loads, _ = run([*argv, *extra, "--json", str(json_path)], env)
    result = json.loads(json_path.read_text())
    convex = result.get("convex") or {}
    done = len(result.get("rows") or []) if name == "verify" else \
        sum(len(convex.get(part, [])) for part in ("runs", "choices", "refinements")) if name == "convex" else \
        len(result.get("runs", [])) + sum(len((result.get("optimum") or {}).get(part, [])) for part in ("runs", "fits"))
    return {"name": name, "command": "lazylab " + " ".join(argv), "plan_s": plan["seconds"],
            "runs": [plan["runs_total"], plan.get("runs_high", plan["runs_total"])], "done": done,
            "cores": plan.get("contention", {}).get("cores"), "wall_s": wall, "cpu_s": cpu,
            "load": [min(loads), sum(loads) / len(loads), max(loads)], "planned": phases_planned(name, plan),
            "measured": phases_measured(name, result)}


def minutes(s: float) -> str:
    return f"{int(s // 60)} min {s % 60:02.0f} s" if s >= 60 else f"{s:.0f} s"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(COMMANDS), help="comma-separated: " + ", ".join(COMMANDS))
    ap.add_argument("--markdown", action="store_true", help="end with the table of docs/performance.md")
    args = ap.parse_args()
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in COMMANDS]
    if unknown:
        sys.exit(f"error: --only: unknown command {unknown[0]!r} (choose from {', '.join(COMMANDS)})")
    # The calibration first (measured once per machine, kept in $XDG_CACHE_HOME/lazylab): no plan below pays for it.
    with tempfile.TemporaryDirectory(prefix="lazylab-calibration-") as tmp:
        subprocess.run([LAZYLAB, "ladder", "--preset", "quick", "--dry-run"], check=True, stdout=subprocess.DEVNULL,
                       env={**os.environ, "LAZYLAB_CACHE": tmp})
    print(f"{cpu_name()}, {os.cpu_count()} cores; load average before: {os.getloadavg()[0]:.2f}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="lazylab-estimate-") as tmp:
        for name in names:
            r = measure(name, COMMANDS[name], Path(tmp))
            rows.append(r)
            low, high = r["runs"]
            print(f"{name}: {r['command']}\n  plan {minutes(r['plan_s'])} for {low}"
                  f"{'' if high == low else f'-{high}'} runs at {r['cores']} cores; wall "
                  f"{minutes(r['wall_s'])} for {r['done']}, CPU {r['cpu_s']:.0f} s ({r['cpu_s'] / r['wall_s']:.2f} cores); "
                  f"load {r['load'][0]:.2f}-"
                  f"{r['load'][2]:.2f} (mean {r['load'][1]:.2f}); plan / wall {r['plan_s'] / r['wall_s']:.2f}", flush=True)
            for phase in sorted(r["measured"]):
                p, m = r["planned"].get(phase, 0.0), r["measured"].get(phase, 0.0)
                print(f"  {phase}: planned {p:.0f} s, records' own {m:.0f} s" + (f" ({p / m:.2f})" if m else ""), flush=True)
    if args.markdown:
        when = time.strftime("%Y-%m-%d")
        print(f"\nMeasured {when} on {cpu_name()} ({os.cpu_count()} cores), `bench/estimate.py`:\n")
        print("| command | runs planned / run | plan (cores priced) | wall (cores used) | plan / wall | "
              "load average during the run |")
        print("|---|---|---|---|---|---|")
        for r in rows:
            low, high = r["runs"]
            print(f"| `{r['command']}` | {low}{'' if high == low else f'-{high}'} / {r['done']} | {minutes(r['plan_s'])} "
                  f"({r['cores']:.2g}) | {minutes(r['wall_s'])} ({r['cpu_s'] / r['wall_s']:.2f}) | "
                  f"{r['plan_s'] / r['wall_s']:.2f} | {r['load'][0]:.1f}-{r['load'][2]:.1f} |")


if __name__ == "__main__":
    main()
