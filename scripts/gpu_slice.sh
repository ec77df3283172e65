#!/usr/bin/env bash
# A slice of time on a lent GPU machine (issue 15): grids make progress in every slice, and every
# record a slice writes comes back to be committed. The steps, in the repository's root:
#
#   bash scripts/gpu_slice.sh prepare
#       here, once per machine: the wheels the GPU machine lacks (keras at this checkout's
#       version, namex, optree) and the corpora, into .gpu/ (git-ignored via .git/info/exclude)
#   bash scripts/gpu_slice.sh run SECONDS 'COMMAND' ['COMMAND' ...]
#       there (the device tool's `run`, carrying [".gpu"]): installs the wheels into /tmp/site
#       (once per warm machine), starts every COMMAND at once under KERAS_BACKEND=jax, stops
#       them with Ctrl-C after SECONDS (a run keeps its finished epochs and a checkpoint at most
#       60 s old; a warm machine's next call resumes from it), and packs every record written
#       into $OUT/records.tar (kept on the warm machine too: the next call there puts back any
#       record the working tree it was sent lacks or holds an earlier copy of, so a call made
#       before the last one's files were unpacked here still resumes, never restarts, its runs)
#       and the checkpoints of its unfinished runs that fit (Raffel & Ellis ones; an LM
#       `paper` checkpoint is too large) into $OUT/checkpoints.tar
#   bash scripts/gpu_slice.sh measure
#       there, before `run` in the same call (at most 5 minutes): the backends issue's GPU
#       benchmarks into $OUT/measure.txt (the README's H100 numbers come from it)
#   bash scripts/gpu_slice.sh unpack DIR   (or: unpack TAR, the records alone)
#       here, DIR being the folder the call's files came back in: unpacks the records (where a
#       copy here got further, finished or more epochs, it is kept) and
#       stages the finished ones for a commit; unfinished ones stay untracked, so they travel
#       with the next call, and their checkpoints go to .gpu/checkpoints.tar, which the next
#       slice unpacks first: a Raffel & Ellis run resumes there even on a fresh machine (an LM
#       run only on a warm one, which kept its checkpoint; on a fresh one it starts over).
#       .gpu/ does not outlive this machine: before the session ends, `python scripts/park.py`
#       and a commit keep the unfinished runs and their checkpoints for the next session
#
# Size a slice for its LM runs to finish in it. A lease of 15 minutes (2026-11-26, H200): the
# machine started in ~40 s, then three calls back to back (409 + 303 + 78 s), each unpacked
# here before the next; a warm machine waits 30 s for the next call and keeps what the last
# one left in git-ignored paths (the LM checkpoints), so runs resume there call after call.
# Another (2026-11-26, H200): two LM runs side by side (3.2 ms per update each, beside two
# Raffel & Ellis variable-length runs) took 482 s and ~520 s: give the first call 560 s.
# Another (2026-11-26, H100): the same four took 4.2 ms per LM update beside the Raffel & Ellis
# runs (2.8-3.0 while those compiled), so neither LM run finished in 560 s (epoch 20); the
# second call (215 s, LM alone: 2.3-2.7 ms per update) finished both. On an H100 run the LM
# alone: three side by side (~4 ms each, 2026-11-23, before several updates per compiled
# call) should finish in 560 s + ~150 s, not measured yet.
# An LM `paper` run takes about 8 minutes alone on an H100 (2.5 ms per update); four side by
# side take 5 ms per update each and none would finish in a lease. The Raffel & Ellis runs
# are short and resume anywhere: many at once, unfused (the default on a GPU: 6.3 ms per
# step at T0 = 10,000 on an H100 against 11.4 fused with chunks of 64, 5.4 on an H200 against
# 6.1 with chunks of 1024: benchmarks/results/gpu_measure_h200.txt). Examples for one lease:
# LM runs alone, two side by side, over two calls (unpack between them; the second resumes
# them on the warm machine and should see them finish):
#   bash scripts/gpu_slice.sh run 560 \
#     'python -m thesis_repro.lm grid --table 3.1 --preset paper --jobs 2 --no-report --verbose 2'
#   bash scripts/gpu_slice.sh run 240 '<the same command>'
# or the Raffel & Ellis paper grid's long columns and the variable-length runs, many at once
# (16 runs finished and 8 advanced in the lease above):
#   bash scripts/gpu_slice.sh run 540 \
#     'python -m thesis_repro.ffattention --verbose 2 grid --preset paper --t0s 5000 10000 --jobs 8 --no-report' \
#     'python -m thesis_repro.ffattention --verbose 2 grid --preset paper --only variable --jobs 4 --no-report'
# or both: the two LM runs with two variable-length runs beside them (2026-11-26: one LM run
# and both variable-length runs finished in the first call's 515 s).
# `measure` first (at most 5 minutes) leaves too little of a call for an LM run.
set -euo pipefail

prepare() {
    mkdir -p .git/info
    grep -qx '/.gpu/' .git/info/exclude 2> /dev/null || echo '/.gpu/' >> .git/info/exclude
    mkdir -p .gpu/whl .gpu/data
    local keras_version
    keras_version=$(python -c 'import keras; print(keras.__version__)')
    python -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d .gpu/whl "keras==$keras_version" namex optree
    local data=${THESIS_REPRO_DATA:-../shared/data}
    for corpus in eltec-pol ptb; do
        [ -d "$data/$corpus" ] && cp -r "$data/$corpus" .gpu/data/
    done
    ls -l .gpu/whl && du -sh .gpu
}

# Keras on JAX there: Keras is missing on the GPU machine (a warm machine has it in /tmp/site
# from the last call).
device_env() {
    PYTHONPATH=/tmp/site python3 -c 'import keras' 2> /dev/null \
        || python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
            .gpu/whl/*.whl
    export PYTHONPATH=/tmp/site:. KERAS_BACKEND=jax THESIS_REPRO_DATA=.gpu/data
    export THESIS_REPRO_CHECKPOINT_SECONDS=${THESIS_REPRO_CHECKPOINT_SECONDS:-60}
    export PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=2
    # Several COMMANDs share the GPU, each grid giving its workers 0.9/jobs of its memory
    # (runner.worker_env): allocated as needed instead of up front, they never oversubscribe
    # it (2 LM `paper` runs and 2 Raffel & Ellis ones use a few GiB each).
    export XLA_PYTHON_CLIENT_PREALLOCATE=${XLA_PYTHON_CLIENT_PREALLOCATE:-false}
}

# The backends issue's GPU numbers (issue 14), at most 5 minutes, into $OUT/measure.txt: the
# Raffel & Ellis step at T0 = 10,000, unfused and fused with larger chunks than the CPU's 64
# (target 2 ms; each configuration is a fresh process, printed as it finishes), and the LM
# `paper` update (V = 37,373, batch 1000; target 0.5 ms) in float32 and bfloat16 (printed at
# the end of each), after whether JAX's default float32 matmul is TF32 there
# (bench_matmul_precision.py, ~20 s). Each benchmark compares against its reference in the
# same run.
measure() {
    device_env
    local out=${OUT:-/tmp/out}
    mkdir -p "$out"
    {
        nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader || true
        timeout 100 python3 benchmarks/bench_ffattention.py --t0 10000 --steps 30 \
            --configs reference+xla chunked+xla --chunk-sizes 256 1024 || true
        timeout 40 python3 benchmarks/bench_matmul_precision.py || true
        for policy in float32 mixed_bfloat16; do
            timeout 70 python3 benchmarks/bench_lm.py --vocab 37373 --words 7000000 --rounds 2 \
                --steps 10 --fit-steps 20 --dtype-policy $policy || true
        done
    } > "$out/measure.txt" 2>&1
    grep -v '^I0000\|^WARNING: All' "$out/measure.txt" | tail -n 40
}

run() {
    local seconds=$1
    shift
    [ $# -gt 0 ] || { echo "usage: gpu_slice.sh run SECONDS 'COMMAND' ..." >&2; exit 2; }
    device_env
    # Checkpoints of unfinished runs that an earlier slice brought back (`unpack DIR` keeps
    # them in .gpu/): a fresh machine resumes those runs instead of starting them over.
    if [ -f .gpu/checkpoints.tar ]; then
        tar --skip-old-files -xf .gpu/checkpoints.tar
    fi
    # A warm machine's own records from its last call, where the working tree sent with this
    # call lacks them or holds an earlier copy (that call's files were not unpacked here before
    # this one): restored, so their runs resume from the checkpoints kept here instead of
    # starting over, and a finished run is not run again; an unfinished record sent of another
    # attempt (another `started`) gives way to this machine's, whose checkpoints are here.
    # (Kept in $GPU_SLICE_RECORDS,
    # default /tmp/slice-records; checked by hand on this CPU, 2026-11-26: a smoke grid's two
    # finished records deleted from the tree between two calls were restored and skipped.)
    local kept=${GPU_SLICE_RECORDS:-/tmp/slice-records}
    if [ -d "$kept/results" ]; then
        python3 -c "$MERGE" "$kept/results" results | sed 's/^/restored from the last call: /'
    fi
    local out=${OUT:-/tmp/out} stamp
    mkdir -p "$out"
    stamp=$(mktemp)
    nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader || true
    local pids=() index=0
    for command in "$@"; do
        index=$((index + 1))
        # timeout signals the command's whole process group: the --jobs workers too.
        timeout --signal=INT --kill-after=60 "$seconds" bash -c "$command" \
            > "$out/log$index.txt" 2>&1 &
        pids+=($!)
    done
    (sleep $((seconds / 2)); nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv \
        > "$out/nvidia-smi.txt" 2>&1) &
    local watch=$!
    for pid in "${pids[@]}"; do wait "$pid" || true; done
    kill "$watch" 2> /dev/null || true
    find results -newer "$stamp" \( -name '*.json' -o -name 'table.md' \) -print0 \
        | tar --null -cf "$out/records.tar" -T -
    tar -tf "$out/records.tar" | sed 's/^/packed: /'
    mkdir -p "$kept" && tar -xf "$out/records.tar" -C "$kept"
    python3 -c "$RESUMABLE" | tar --null -cf "$out/checkpoints.tar" -T -
    tar -tf "$out/checkpoints.tar" | sed 's/^/checkpoint packed: /'
    tail -n 3 "$out"/log*.txt
}

# merge_records SOURCE TARGET: each record under SOURCE copied over TARGET's copy where that
# is missing or behind it (fewer epochs, or unfinished where SOURCE's is finished); the paths
# copied, one a line.
MERGE='
import sys
from thesis_repro.record_merge import merge_records
for path in merge_records(sys.argv[1], sys.argv[2], checkpoints_of_source=True):
    print(path)
'

# The records that came back (under SOURCE) merged into TARGET, one line each: "done PATH" for
# a run now finished or failed here (a result either way), "unfinished PATH", or "kept PATH"
# where the copy here got further than the one that came back ("restarted PATH" where that copy
# is unfinished and the call started its run over: another `started`). One process for all of
# them: importing the package takes seconds, and a warm device machine waits only 30.
UNPACK='
import sys
from pathlib import Path
from thesis_repro.record_merge import merge_records
from thesis_repro.records import load_record, settled
source, target = Path(sys.argv[1]), Path(sys.argv[2])
copied = set(merge_records(source, target))
for path in sorted(source.rglob("*.json")):
    here = target / path.relative_to(source)
    if here not in copied:
        kept = load_record(here)
        restarted = not settled(kept) and kept["started"] != load_record(path)["started"]
        print("restarted" if restarted else "kept", here)
    else:
        print("done" if settled(load_record(here)) else "unfinished", here)
'

# NUL-separated: the checkpoints of the runs whose record is unfinished, at most 12 MiB each
# and 15 MiB in all (what comes back from a device call: 16 MiB a file), smallest first. A
# Raffel & Ellis checkpoint is ~0.2 MB; an LM `paper` one (25-60 MB) never fits.
RESUMABLE='
import sys
from thesis_repro.training import unfinished_checkpoints
total, chosen = 0, []
for path in unfinished_checkpoints("results"):
    size = path.stat().st_size
    if size <= 12 * 2**20 and total + size <= 15 * 2**20:
        total += size
        chosen.append(str(path))
sys.stdout.write("".join(f"{p}\0" for p in chosen))
'

unpack() {
    local archive=$1 path
    if [ -d "$archive" ]; then
        # the folder a device call's files came back in: records.tar, checkpoints.tar
        if [ -f "$archive/checkpoints.tar" ]; then
            # the unfinished runs' checkpoints: into the (git-ignored) checkpoint folders here,
            # and into .gpu/ (carried), where the next slice's `run` takes them from
            tar -xf "$archive/checkpoints.tar"
            cp "$archive/checkpoints.tar" .gpu/checkpoints.tar
            tar -tf .gpu/checkpoints.tar | sed 's/^/checkpoint kept for the next slice: /'
        fi
        archive=$archive/records.tar
    fi
    local staging
    staging=$(mktemp -d)
    tar -xf "$archive" -C "$staging"
    python -c "$UNPACK" "$staging/results" results | while read -r state path; do
        case $state in
            done) git add "$path" && echo "done: $path" ;;
            kept) echo "kept the copy here (further along than the one that came back): $path" ;;
            restarted)
                # the warm machine's next call restores its own attempt over this copy (`run`)
                echo "kept the copy here, but the call started its run over (no checkpoint" \
                    "there): a next call on the warm machine goes on with its own attempt," \
                    "a fresh machine starts this one over: $path" ;;
            *)
                if git ls-files --error-unmatch "$path" > /dev/null 2>&1; then
                    echo "unfinished (tracked: parked earlier; park again to commit it): $path"
                else
                    echo "unfinished (left untracked, resumes next call): $path"
                fi ;;
        esac
    done
    rm -rf "$staging"
}

case ${1:-} in
    prepare) prepare ;;
    run) shift; run "$@" ;;
    measure) measure ;;
    unpack) shift; unpack "$@" ;;
    *) awk 'NR > 1 && !/^#/ { exit } NR > 1 { print }' "$0"; exit 2 ;;
esac
