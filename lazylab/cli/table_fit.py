"""Rich tables laid out for a console's width without breaking a word: rich alone shrinks the widest columns
first, below their longest word (``yat-frozen`` became ``yat-f`` / ``rozen``); here every column keeps its longest
word, and a table whose words alone are too wide comes in parts that each repeat the columns naming a row."""

from __future__ import annotations

import copy
import dataclasses

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table


def _column_range(table: Table, column, console: Console) -> tuple[int, int]:
    """``(minimum, maximum)`` characters of ``column`` with its padding: its longest word (its longest line where
    the column may not wrap), its longest line."""
    pad = table.padding[1] + table.padding[3]
    sizes = [Measurement.get(console, console.options, c) for c in [column.header, *column.cells]]
    high = max(m.maximum for m in sizes) + pad
    return (high if column.no_wrap else max(m.minimum for m in sizes) + pad), high


def _rules(table: Table, columns: int) -> int:
    """Characters of ``table``'s vertical rules for ``columns`` columns: between them, and around them when it
    shows its edge."""
    return (columns - 1 + 2 * table.show_edge) if table.box else 0


def keyed(table: Table, *columns: int) -> Table:
    """Mark the columns (indices) that name a row of ``table``: where it comes in parts (``fit_table``), each part
    repeats them. Without a mark: the first column, and the width ``m`` where it is second."""
    table.key_columns = columns
    return table


def table_minimum(table: Table, console: Console) -> int:
    """The narrowest ``table`` prints in characters without breaking a word (``fit_table``)."""
    return sum(low for low, _ in (_column_range(table, c, console) for c in table.columns)) + \
        _rules(table, len(table.columns))


def _share(ranges: list[tuple[int, int]], extra: int) -> list[int]:
    """Column widths from ``(minimum, maximum)`` ranges and ``extra`` characters beyond the minima: the columns
    that need least are given their whole line first (a short cell such as ``failed 2`` stays on one line), the
    rest share what is left in proportion to what each still lacks, and the long free text wraps."""
    widths = [low for low, _ in ranges]
    lacking = sorted(range(len(ranges)), key=lambda i: ranges[i][1] - ranges[i][0])
    while lacking and ranges[lacking[0]][1] - widths[lacking[0]] <= extra:
        i = lacking.pop(0)
        extra -= ranges[i][1] - widths[i]
        widths[i] = ranges[i][1]
    need = sum(ranges[i][1] - widths[i] for i in lacking)  # > extra: every column left lacks more than extra
    given = [extra * (ranges[i][1] - widths[i]) // need for i in lacking]
    for i, g in zip(lacking, given):
        widths[i] += g
    if lacking:  # what rounding down left over goes to the column that lacks most
        widths[lacking[-1]] += extra - sum(given)
    return widths


def fit_table(table: Table, console: Console) -> list[Table]:
    """``table`` laid out for ``console.width`` without breaking a word (rich shrinks the widest columns first,
    below their longest word, and folds ``yat-frozen`` into ``yat-f`` / ``rozen``): every column keeps its longest
    word (its longest line where it may not wrap) and the room left is shared in proportion to what each would
    take on one line. A table whose words alone are too wide prints as several tables, each repeating the
    columns that name a row (``keyed``) with as many of the others as fit; the title says which part it is, the
    notes go below the last. Returns new tables where it lays one out; ``table`` itself is left as it was."""
    cols = table.columns
    if not cols:
        return [table]
    ranges = [_column_range(table, c, console) for c in cols]
    room = console.width - _rules(table, len(cols))
    if sum(high for _, high in ranges) <= room:
        return [table]
    low_total = sum(low for low, _ in ranges)
    if low_total <= room:
        pad = table.padding[1] + table.padding[3]
        fitted = copy.copy(table)
        fitted.columns = [dataclasses.replace(c, width=w - pad)
                          for c, w in zip(cols, _share(ranges, room - low_total))]
        return [fitted]
    keys = getattr(table, "key_columns", (0, 1) if len(cols) > 1 and cols[1].header == "m" else (0,))
    base = sum(ranges[k][0] for k in keys)
    blocks: list[list[int]] = [[]]
    for i in (i for i in range(len(cols)) if i not in keys):
        if blocks[-1] and base + sum(ranges[j][0] for j in blocks[-1] + [i]) + \
                _rules(table, len(keys) + len(blocks[-1]) + 1) > console.width:
            blocks.append([])
        blocks[-1].append(i)
    if len(blocks) == 1:  # one column beside the keys is already too wide: rich folds it
        return [table]
    parts = []
    for n, block in enumerate(blocks, 1):
        part = copy.copy(table)  # every setting of the table; its own columns, title and notes
        order = sorted([*keys, *block])
        part.columns = [dataclasses.replace(cols[i], _index=j) for j, i in enumerate(order)]
        part.key_columns = tuple(order.index(k) for k in keys)
        part.title = f"{table.title or ''} (part {n} of {len(blocks)})".lstrip()
        part.title_justify = table.title_justify if table.title else "left"
        part.caption = table.caption if n == len(blocks) else None
        parts += fit_table(part, console)
    return parts
