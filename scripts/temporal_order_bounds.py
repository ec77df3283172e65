"""The order-blind bounds of each temporal-order run's own test set, beside what it reached.

    python scripts/temporal_order_bounds.py [--results results]

Raffel & Ellis 2.4: pooling over time cannot tell XY from YX, so the best an order-blind model
can do is 100% on XX and YY and one answer for all the mixed pairs: 75% accuracy and a test
loss of ln(2)/2 = 0.347 when the four classes are equally frequent. A test set of 1000 draws
is not exactly balanced, so the report's fixed 75% / 0.347 can be off by a point or two. This
regenerates each record's test set (``train.test_set``, seeded by the record's config; the
report renders from records alone) and gives the two bounds on it
(``tasks.orderless_accuracy_ceiling``, ``tasks.orderless_loss_floor``; they hold in
expectation over the distractors, so a model that answers from those lands within chance of
them) beside the run's last epoch. Prints a table and writes
``results/diagnostics/temporal-order-bounds.json``; a few seconds.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from thesis_repro import tasks
from thesis_repro.ffattention.config import NAME, RunConfig
from thesis_repro.ffattention.train import test_set
from thesis_repro.files import write_json_atomic
from thesis_repro.records import load_records, run_name

OUT = Path("results/diagnostics/temporal-order-bounds.json")  # outside every experiment folder


def bounds(record: dict) -> dict:
    """The record's last epoch beside the order-blind bounds of its test set."""
    labels = np.concatenate([b.y for b in test_set(RunConfig(**record["config"]))])
    last = record["epochs"][-1]
    counts = tasks.temporal_order_class_counts(labels)
    return {
        "run": run_name(record),
        "epochs": len(record["epochs"]),
        "test_class_counts": dict(zip(tasks.TEMPORAL_ORDER_CLASSES, counts.tolist(), strict=True)),
        "test_accuracy": last["test_accuracy"],
        "orderless_accuracy_ceiling": tasks.orderless_accuracy_ceiling(labels),
        "test_loss": last["test_loss"],
        "orderless_loss_floor": tasks.orderless_loss_floor(labels),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=Path("results"))
    args = parser.parse_args(argv)
    records = [
        r
        for r in load_records(args.results / NAME / "temporal_order")
        if r.get("epochs") and not r.get("failed")
    ]
    if not records:
        parser.error(f"no temporal-order record with a finished epoch in {args.results}")
    rows = [bounds(r) for r in records]
    print(f"{'run':<60} {'accuracy':>8} {'ceiling':>8} {'loss':>7} {'floor':>7}")
    for row in rows:
        print(
            f"{row['run']:<60} {100 * row['test_accuracy']:7.1f}% "
            f"{100 * row['orderless_accuracy_ceiling']:7.1f}% {row['test_loss']:7.3f} "
            f"{row['orderless_loss_floor']:7.3f}"
        )
    command = "python scripts/temporal_order_bounds.py " + " ".join(sys.argv[1:])
    OUT.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(OUT, {"command": command.strip(), "runs": rows})
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
