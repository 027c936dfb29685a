"""Pictures from experiment results.

* ``gifs`` — the ``gram`` crystallization and the ``readout`` race GIFs.
* ``figures`` — the width-ladder figures (PNG/SVG).
* ``trajectory`` — prototype-travel GIFs and curves.

Render code reads result objects and draws; it never computes science. It
uses matplotlib's object API on the Agg canvas (no pyplot, no global backend
switch), so it is safe in headless processes.
"""
