#!/usr/bin/env python
"""Write lazylab/reference/paper.json (the shipped reference results) from a memo holding the whole paper ladder.

    .venv/bin/python scripts/export_reference.py --cache-dir /path/to/memo [--out FILE] [--where TEXT] [--when YYYY-MM-DD]

Reads the memo only (nothing is trained; the redundancy measurement of the analysis is
computed if it is not in the memo: seconds). Refuses in one line, exit 2, when any of the
paper ladder's runs is missing. Records the SHA-256 of the payload's canonical JSON as
``provenance.digest`` (``lazylab.reference.payload_digest``), which every load checks, and reads
the written file back through ``load_reference`` before it reports success. The document is built by
``lazylab.experiments.render.build_reference``; the file's format and its loader:
lazylab/reference/__init__.py; how the report uses it: docs/render.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lazylab.errors import LazylabError


def main(argv=None) -> int:
    from lazylab.experiments import Workspace
    from lazylab.experiments.render import _plan, build_reference
    from lazylab.paths import writable_file, write_text_atomically
    from lazylab.reference import dump_reference, load_reference, reference_path

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache-dir", required=True, type=Path, help="the memo holding the complete paper ladder")
    ap.add_argument("--data-dir", type=Path, default=None, help="Fashion-MNIST [default: $LAZYLAB_DATA or the system copy]")
    ap.add_argument("--out", type=Path, default=reference_path(), help=f"[default: {reference_path()}]")
    ap.add_argument("--where", default=None, help="the machine that computed the runs [default: this one, described]")
    ap.add_argument("--when", default=None, help="the UTC date they were computed [default: today, UTC]")
    ap.add_argument("--command", default=None, help="the command that computed them [default: lazylab ladder --preset paper]")
    args = ap.parse_args(argv)
    try:
        if not args.cache_dir.is_dir():
            raise LazylabError(f"--cache-dir: {args.cache_dir} is not a directory")
        writable_file(args.out, "--out")
        ws = Workspace(args.data_dir, args.cache_dir)
        doc = build_reference(ws, _plan("paper"), "paper", args.where, args.when, args.command)
        write_text_atomically(args.out, dump_reference(doc), "--out")
        load_reference(args.out)  # what the report will read back
    except (LazylabError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    p = doc["provenance"]
    print(f"wrote {args.out} ({args.out.stat().st_size:,} bytes): {p['runs']} runs, lazylab {p['lazylab']} "
          f"({p['code']}), computed {p['when']} on {p['where']}; payload digest {p['digest']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
