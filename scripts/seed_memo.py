#!/usr/bin/env python
"""Write the records of a reference file (default: the shipped lazylab/reference/paper.json) into a memo.

    .venv/bin/python scripts/seed_memo.py --cache-dir /path/to/memo [--reference FILE]

Every protocol run, convex readout and lambda choice the file holds (the pending ones of a frontier
still being computed included) is stored under its own key, so `lazylab ladder --preset paper
--readout convex --cache-dir DIR` computes only what the file lacks, and scripts/export_reference.py
can write the file again from that memo. Why: the paper ladder and its frontier cost more machine
time than one working session has, and a session's memo does not outlive its machine. A key the memo
already holds is left alone. The file is read through ``load_reference`` (its digest is checked);
a record written by other code (another code identity) is refused, since its key would never be
looked up. Exit 2 with one line on any error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lazylab.errors import LazylabError


def reference_records(doc: dict) -> list[dict]:
    """Every record of a reference document: protocol runs, convex readouts and lambda choices
    (pending ones included), each a dict with its memo ``key``."""
    payload = doc["payload"]
    convex = payload.get("convex") or {}
    pending = convex.get("pending") or {}
    return [*payload["runs"], *convex.get("runs", []), *convex.get("choices", []),
            *pending.get("runs", []), *pending.get("choices", [])]


def main(argv=None) -> int:
    from lazylab.cache import Memo
    from lazylab.config import code_identity
    from lazylab.reference import load_reference, reference_path

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache-dir", required=True, type=Path, help="the memo to write into (created if absent)")
    ap.add_argument("--reference", type=Path, default=reference_path(), help=f"[default: {reference_path()}]")
    args = ap.parse_args(argv)
    try:
        doc = load_reference(args.reference)
        if doc["provenance"]["code"] != code_identity():
            raise LazylabError(f"{args.reference} was computed by {doc['provenance']['code']!r}, this code is "
                               f"{code_identity()!r}: its keys would never be looked up")
        memo = Memo(args.cache_dir)
        written = kept = 0
        for record in reference_records(doc):
            if record["key"] in memo:
                kept += 1
            else:
                memo.put_record(record["key"], record)
                written += 1
        memo.close()
    except (LazylabError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{args.cache_dir}: wrote {written} records from {args.reference} ({kept} already there)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
