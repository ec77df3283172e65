"""Does the CPU's vector instruction set change a seeded run's numbers? One `smoke` LM run each.

    python scripts/isa_rounding.py [--caps AVX SSE41] [--seed 3]

Same seed, same code: a PTB `paper` run retrained on another 2-core host agreed bit for bit
with its first training once and differed from the first epoch on (4.5e-4 relative at most)
once (README, thesis 4.2). On one host a seed trains bit-identically
(``tests/test_lm.py::test_same_seed_trains_bit_identically``); this script tests the suspected
cause across hosts, the kernels the math libraries pick for the CPU's instruction set. It trains
the same `smoke` LM run (5-gram + 2, momentum, the synthetic corpus) in a fresh process per
setting, once as the machine is and once with oneDNN capped at each of ``--caps``
(``ONEDNN_MAX_CPU_ISA``, oneDNN's own switch; a cap above what the CPU has changes nothing),
and prints each run's validation and test perplexities and whether they equal the uncapped
run's bit for bit. On an AMD EPYC family 25 model 1 (AVX2; 2026-11-29) the default and a cap at
AVX2 agreed bitwise, a cap at AVX or SSE41 did not (test perplexity 36.642584 against 36.642602
and 36.642576). On an Intel Xeon family 6 model 167 (AVX-512; 2026-12-01) the default, a cap at
AVX512_CORE and one at AVX agreed bitwise, a cap at AVX2 or SSE41 did not, and with the cap at
AVX2 the second epoch's validation perplexity is the AMD host's default one (37.6459391; the
Intel default: 37.6459301). On an AMD EPYC family 26 model 2 (AVX-512; 2026-12-02) the default
equalled the Intel host's default bitwise, a cap at AVX512_CORE or AVX2 changed nothing, and a
cap at AVX or SSE41 gave the family-25 host's AVX-capped test perplexity (36.6426018).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Sequence

from thesis_repro.records import processor
from thesis_repro.settings import DATA_ENV

_RUN = """
import json, sys, tempfile
from thesis_repro import lm
source = lm.resolve_corpus(None)
config = lm.make_config(source, "smoke", order=5, prefix=2, variant="momentum", seed={seed})
record = lm.run(config, source, tempfile.mkdtemp(), verbose=0)
json.dump([[e["valid_perplexity"] for e in record["epochs"]],
           record["summary"]["test_perplexity"]], sys.stdout)
"""


def perplexities(seed: int, cap: str | None) -> tuple[list[float], float]:
    """Validation perplexities by epoch and the test perplexity of the `smoke` run of ``seed``,
    trained in a fresh process with oneDNN capped at ``cap`` (None: uncapped)."""
    # without DATA_ENV: the synthetic corpus, the same on every machine
    env = {k: v for k, v in os.environ.items() if k not in ("ONEDNN_MAX_CPU_ISA", DATA_ENV)}
    env |= {"TF_CPP_MIN_LOG_LEVEL": "2"} | ({"ONEDNN_MAX_CPU_ISA": cap} if cap else {})
    done = subprocess.run(
        [sys.executable, "-c", _RUN.format(seed=seed)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    valid, test = json.loads(done.stdout.strip().splitlines()[-1])
    return valid, test


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--caps",
        nargs="+",
        default=["AVX2", "AVX", "SSE41"],
        help="ONEDNN_MAX_CPU_ISA values to try (default: %(default)s)",
    )
    parser.add_argument("--seed", type=int, default=3, help="the run's seed (%(default)s)")
    args = parser.parse_args(argv)
    print(f"CPU: {processor()}")
    print("| oneDNN cap | validation perplexity by epoch | test perplexity | bitwise = uncapped |")
    print("|---|---|---|---|")
    reference = perplexities(args.seed, None)
    for cap in [None, *args.caps]:
        valid, test = reference if cap is None else perplexities(args.seed, cap)
        shown = ", ".join(repr(v) for v in valid)  # every digit: comparable across hosts
        same = "yes" if (valid, test) == reference else "no"
        print(f"| {cap or 'none'} | {shown} | {test!r} | {same} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
