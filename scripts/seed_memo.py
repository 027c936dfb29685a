#!/usr/bin/env python
"""Write the records of a reference file (default: the shipped lazylab/reference/paper.json) into a memo.

    .venv/bin/python scripts/seed_memo.py --cache-dir /path/to/memo [--reference FILE] [--data-dir DIR]

Every protocol run, convex readout and lambda choice the file holds (the pending ones of a frontier
still being computed included) is stored under its own key, so `lazylab ladder --preset paper
--readout both --cache-dir DIR` computes only what the file lacks, and scripts/export_reference.py
can write the file again from that memo. Why: the paper ladder and its frontier cost more machine
time than one working session has, and a session's memo does not outlive its machine. A key the memo
already holds is left alone. The file is read through ``load_reference`` (its digest is checked).
Refused, since their keys would never be looked up: a file computed by other code (another code
identity) or on other data (another Fashion-MNIST fingerprint), and a record whose key is not the
hash of its configuration. The banks' redundancy measurements are not among the file's records:
the export recomputes them (seconds; on another CPU they move in the fifth significant digit).
Exit 2 with one line on any error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lazylab.errors import LazylabError


def reference_records(doc: dict) -> list[dict]:
    """Every record of a reference document once: protocol runs, convex readouts, lambda choices and their
    refinements (pending ones included), and the trained optimum's selection runs and refits, each a dict with
    its memo ``key``.

    Raises: LazylabError (one line) naming a record whose ``key`` is not ``memo_key`` of its configuration.
    """
    from lazylab.config import memo_key

    payload = doc["payload"]
    convex = payload.get("convex") or {}
    pending = convex.get("pending") or {}
    optimum = payload.get("optimum") or {}
    records = {}
    for record in [*payload["runs"], *convex.get("runs", []), *convex.get("choices", []),
                   *convex.get("refinements", []), *pending.get("runs", []), *pending.get("choices", []),
                   *pending.get("refinements", []), *optimum.get("runs", []), *optimum.get("fits", [])]:
        key = record.get("key") or ""
        prefix = key.rsplit("-", 1)[0]
        if not prefix or key != memo_key(prefix, record.get("config")):
            raise LazylabError(f"the record {key or '(no key)'} of {(record.get('config') or {}).get('arm')} is not "
                               "stored under the hash of its configuration")
        records[key] = record
    return list(records.values())


def main(argv=None) -> int:
    from lazylab import data as fmnist
    from lazylab.cache import Memo
    from lazylab.config import code_identity
    from lazylab.reference import load_reference, reference_path

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache-dir", required=True, type=Path, help="the memo to write into (created if absent)")
    ap.add_argument("--reference", type=Path, default=reference_path(), help=f"[default: {reference_path()}]")
    ap.add_argument("--data-dir", type=Path, default=None, help="Fashion-MNIST [default: $LAZYLAB_DATA or the system copy]")
    args = ap.parse_args(argv)
    try:
        doc = load_reference(args.reference)
        prov = doc["provenance"]
        if prov["code"] != code_identity():
            raise LazylabError(f"{args.reference} was computed by {prov['code']!r}, this code is "
                               f"{code_identity()!r}: its keys would never be looked up")
        data = fmnist.fingerprint(fmnist.locate(args.data_dir))
        if prov["data"] != data:
            raise LazylabError(f"{args.reference} was computed on Fashion-MNIST {prov['data']}, the data here is "
                               f"{data}: its keys would never be looked up")
        records = reference_records(doc)
        memo = Memo(args.cache_dir)
        written = kept = 0
        for record in records:
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
