"""A tour of lazylab's Python API (docs/api.md), written like notebook cells.

Run it with ``python examples/api_tour.py`` (about a minute on 2 cores from an empty memo; a
second run reads everything from the memo). Set ``LAZYLAB_CACHE`` to use another memo than
``~/.cache/lazylab/memo``. Its output, as recorded, is ``examples/api_tour.out``.
"""

# %% The shipped paper ladder: 260 runs computed once, shipped with lazylab; nothing is trained here.
from lazylab import api

paper = api.reference()
print(paper.source)
print(f"{len(paper.arms)} arms x {len(paper.widths)} widths x {len(paper.seeds)} seeds, "
      f"{paper.epochs} epochs: {len(paper.runs)} runs")
cell = paper.cell("yat-frozen", 512)
print(f"yat-frozen at m = 512: {cell.mean:.2f} ± {cell.std:.2f} % best_acc over seeds {cell.seeds}, lr {cell.lr:g}")

# %% The exchange rate: how many frozen units buy a trained one.
print(paper.exchange_sentence)
for row in paper.exchange:
    if row.trained == "yat-trained" and row.width <= 64:
        print(f"  {row.trained} m={row.width} ({row.trained_acc:.2f} %) -> {row.frozen}: {row.text}")
law = paper.law("yat-frozen")
print(f"yat-frozen ladder law on m = {law.widths[0]}..{law.widths[-1]}: err = {law.floor:.2f} + "
      f"{law.c:.1f} m^-{law.alpha:.3f} (R^2 {law.r2:.4f})")

# %% A tiny ladder of your own, on the real Fashion-MNIST (4096 training images, 2 epochs).
mine = api.ladder(arms=["yat-frozen", "yat-trained"], widths=[16, 64, 256], seeds=[0], epochs=2,
                  train_size=4096, on_run=lambda run, cached: print(
                      f"  {'memo' if cached else 'trained'}: {run.arm} m={run.width} lr={run.lr:g} "
                      f"best {run.best_acc:.2f} %"))
print(mine.source)
for rate in mine.rates:
    print(f"{rate.arm}: lr {rate.lr:g} chosen from the bracket {rate.bracket}")
for c in mine.cells:
    print(f"{c.arm:12s} m={c.width:<4d} {c.mean:.2f} %")
print(mine.exchange_sentence)

# %% Every result in the memo, as rows (the same as `lazylab runs`): one kind per call, the training runs by default.
rows = api.runs(arm="yat-frozen", width=[16, 64, 256], seed=0)
for r in rows:
    print(f"{r.kind} {r.arm} m={r.width} lr={r.lr:g} epochs={r.epochs} train={r.train_size}: "
          f"best {r.best_acc:.2f} %, {r.seconds:.1f} s, stored {r.stored.isoformat()}")

# %% Convex readouts (`lazylab ladder --readout convex|both`), if the memo holds any: ask for their kind.
convex = api.runs(arm="yat-frozen", kind="convex")
for r in convex:
    print(f"{r.kind} {r.arm} m={r.width} seed={r.seed} train={r.train_size}: test {r.best_acc:.2f} % ({r.detail})")
print(f"{len(convex)} convex readouts of yat-frozen in the memo")

# %% Files read back: api.load reads any --json file a command wrote (ladder, gram, readout, trajectory,
# ntk), checked like the options that wrote it; `lazylab ladder --json` files become a Ladder like the one
# above. It reads the shipped reference file too.
from lazylab.reference import reference_path

again = api.load(reference_path())
print(f"api.load: {len(again.cells)} cells; yat-frozen at m = 512 again {again.cell('yat-frozen', 512).mean:.2f} %")

# %% DataFrames, when pandas is installed (pip install 'lazylab[pandas]').
from lazylab.errors import LazylabError

try:
    frame = paper.to_dataframe()
except LazylabError as exc:
    print(exc)
else:
    table = frame.pivot(index="width", columns="arm", values="mean").round(2)
    print(table[["yat-frozen", "yat-trained", "relu-frozen", "relu-trained"]])
    print(api.runs(kind="run").to_dataframe().groupby("arm")["best_acc"].max())
