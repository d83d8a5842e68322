"""Rewrite vitprof's copy of timm's published table from a downloaded timm results CSV.

Usage::

    python tools/refresh_timm_table.py SRC.csv --commit SHA --date YYYY-MM-DD \
        [--path results/benchmark-infer-amp-nchw-pt291-cu130-pro6000maxq.csv] \
        [--out vitprof/data/timm_published.csv]

SRC.csv is one of the ``results/benchmark-infer-*.csv`` files of
https://github.com/huggingface/pytorch-image-models at commit SHA (downloaded by you: this
script reads a local file and downloads nothing). Only the columns vitprof needs are kept
(:data:`vitprof.checks.crosscheck.peers.timm_published.COLUMNS`), rows sorted by model and image
size, under a header of ``#`` lines naming the source, the commit and its date.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

from vitprof.checks.crosscheck.peers.timm_published import (
    COLUMNS,
    DATA_FILE,
    REPOSITORY,
    header_lines,
)

DEFAULT_PATH = "results/benchmark-infer-amp-nchw-pt291-cu130-pro6000maxq.csv"


def read_rows(source: Path) -> list[dict[str, str]]:
    """The needed columns of every row of ``source``; a missing column is an error."""
    with source.open(newline="") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise SystemExit(f"refresh_timm_table: {source} has no column {', '.join(missing)}")
        rows = [{c: row[c] for c in COLUMNS} for row in reader]
    return sorted(rows, key=lambda r: (r["model"], int(r["infer_img_size"])))


def write_table(rows: list[dict[str, str]], out: Path, path: str, commit: str, date: str) -> None:
    """Write the header lines and the rows to ``out``."""
    with out.open("w", newline="") as handle:
        source = f"{REPOSITORY}/blob/{commit}/{path}"
        handle.writelines(f"{line}\n" for line in header_lines(source, commit, date))
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, metavar="SRC.csv")
    parser.add_argument("--commit", required=True, help="timm commit the file was taken from")
    parser.add_argument("--date", required=True, help="that commit's date, YYYY-MM-DD")
    parser.add_argument("--path", default=DEFAULT_PATH, help="the file's path in timm's repo")
    parser.add_argument("--out", type=Path, default=DATA_FILE)
    args = parser.parse_args(argv)
    rows = read_rows(args.source)
    write_table(rows, args.out, args.path, args.commit, args.date)
    print(f"{args.out}: {len(rows)} rows", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
