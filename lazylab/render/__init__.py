"""Pictures from experiment results.

* ``gifs`` — the ``gram`` crystallization and the ``readout`` race GIFs.
* ``figures`` — the width-ladder figures (PNG/SVG).
* ``trajectory`` — prototype-travel GIFs and curves, and the trajectory finals figure.
* ``ntk`` — the 1-D NTK lab, its width sweep and the scalar model.
* ``report`` — ``lazylab render``: the jobs, the manifest, and the results page
  (``page``, ``ladder_sections``, ``html_parts``, ``provenance``).

Render code reads result objects and draws; it never computes science. It
uses matplotlib's object API on the Agg canvas (no pyplot, no global backend
switch), so it is safe in headless processes.
"""
