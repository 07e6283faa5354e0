#!/usr/bin/env bash
# One call on a GPU machine lent for at most LIMIT seconds (default 600) whose results come back only through
# the folder $OUT (files of at most 16 MiB) and whose local files are lost when it is handed back: the GPU
# benchmarks and tests of this folder as resumable parts of such calls. Run from the repository root:
#
#   bash bench/device_call.sh tests [PYTEST ARGS]  the GPU tests (pytest -m gpu -v, every test's duration), cut
#                                                  LIMIT - 20 s after the start; the log in $OUT/pytest.log (a test
#                                                  cut off shows as the last line)
#   bash bench/device_call.sh tests-parallel       the same tests in eight pytest processes (the
#                                                  out-of-memory test alone first, then seven side by side); their
#                                                  logs back as one file, $OUT/pytest-logs.tgz (a call brings back
#                                                  at most 8 files: eight logs left no room for anything else)
#   bash bench/device_call.sh validate             the GPU checks of a change to the run code in one call: where
#                                                  out/base.cu is carried (the baseline kernels' source, made here
#                                                  by `git show COMMIT:oracleaudit/data/evidence_kernels.cu`),
#                                                  bench/kernel_ab.py against it first (at most a quarter of the
#                                                  call; $OUT/kernel_ab.json), then tests-parallel
#   bash bench/device_call.sh full K/N... [--cold] shards K of N of the complete bundled run (run_scale.py full of the
#                                                  mutants in bench/data/full_run), one
#                                                  after the other while time is left, each into out/shardK,
#                                                  continued from the store left by the last call (the machine
#                                                  still warm) or from out/carry/shardK.tar.* (a packed store,
#                                                  merged back into a plain one), else from a partial shard
#                                                  committed in bench/results/full_run; a shard that has ended is
#                                                  skipped); each store, packed, and its state back in $OUT as
#                                                  shardK.tar.* (run_scale.py ship; 15 MiB pieces). FRESH=1: the
#                                                  shards from their start, whatever is committed (the current code
#                                                  measured on part of the bundle), as out/freshKofN, continued
#                                                  from out/carry/freshKofN.tar.*. TRACE=1: the run traced
#                                                  (ORACLEAUDIT_TRACE), back as $OUT/trace.tgz (bench/trace_rates.py)
#   bash bench/device_call.sh reobserve [SET]      the same for the mutants of bench/data/reobserve/SET (default shard1:
#                                                  shard 1's variants whose cover inputs were inferred; grucell: every
#                                                  mutant of level3/4_GRUCell_Sequence, whose fp64 references shard 2
#                                                  got wrong) into out/reobserve1 (shard1) or out/reobserve-SET, back
#                                                  as a tar of that name: merged first, its rows replace theirs
#   bash bench/device_call.sh pair-cost [ARGS]     bench/pair_cost.py ARGS on bench/data/full_run's sample (its
#                                                  stderr in $OUT/pair_cost.log.gz)
#   bash bench/device_call.sh fault-tail [ARGS] [-- RUN ARGS]
#                                                  bench/fault_tail.py prepare ARGS (unless out/fault_tail is carried),
#                                                  then run RUN ARGS: faulty variants handed to the queue against run
#                                                  by their slice, or with --floors A,B two deadline floors;
#                                                  fault_tail.json and its stderr (fault_tail.log.gz) in $OUT
#   bash bench/device_call.sh restart [ARGS]       bench/restart_cost.py ARGS on a carried out/fault_tail (prepared
#                                                  here): what a restart is made of, from traced workers
#                                                  (restart_cost.json and restart_traces.tgz in $OUT)
#   bash bench/device_call.sh timeslice [ARGS]     bench/timeslice_cost.py ARGS: what a synchronisation costs with 1-16
#                                                  processes sharing the GPU (timeslice_cost.json in $OUT)
#   bash bench/device_call.sh hull [ARGS]          bench/hull_cost.py ARGS: the GPU hulls of a pair's all-candidate
#                                                  comparisons, one after the other and side by side (or other
#                                                  versions), alone and beside worker-shaped pairs (hull_cost.json in $OUT)
#   bash bench/device_call.sh kill [ARGS]          bench/kill_cost.py ARGS: seconds to kill a worker whose kernel spins,
#                                                  and a bystander's round trips beside 0, 1 and 3 spinning kernels
#                                                  (kill_cost.json in $OUT)
#   bash bench/device_call.sh sizes PART [ARGS]    bench/size_findings.py PART --work out/size_findings ARGS, the work
#                                                  folder restored from out/carry/sizes.tar.* and sent back likewise
#   bash bench/device_call.sh real                 run_scale.py real (KernelBench's own sizes at 8 workers per GPU), cut
#                                                  LIMIT - 20 s after the start; the rows its store holds by problem
#                                                  and status printed; TRACE=1: traced, back as $OUT/trace-real.tgz
#   bash bench/device_call.sh refcheck             refcheck of the bundled problems under every catalog oracle
#
# The tracked tree is over the device tool's 64 MiB: `bash bench/device_tree.sh park` before a call, `unpark` after.
#
# Python wheels the machine lacks are installed from .whl/ when it is there. The state of run_scale.py lives in
# out/scale.json, restored with the store; `memory` figures come from bench/results/run_scale.json when absent.
#
# DUMP_AT="250 300" (seconds after the start): every Python process of the call writes the stacks of all its
# threads then (faulthandler on SIGUSR1, registered by a sitecustomize in every process, forked ones too), with
# the process tree, into $OUT/thread-dumps.tgz: where a run that does not end is waiting (it found a mutant held
# under the original's 600 s deadline after a resume).
set -o pipefail
START=$(date +%s)
LIMIT=${LIMIT:-600}
left() { echo $(( LIMIT - ($(date +%s) - START) - ${1:-0} )); }
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
: "${OUT:?OUT must name the folder whose files come back}"
if [ -n "${DUMP_AT:-}" ]; then
    mkdir -p /tmp/site /tmp/thread-dumps
    cat > /tmp/site/sitecustomize.py <<'PY'
import faulthandler
import os
import signal


def _register():
    global _sink
    _sink = open(f"/tmp/thread-dumps/{os.getpid()}.log", "w")
    faulthandler.register(signal.SIGUSR1, file=_sink, all_threads=True)


_register()
os.register_at_fork(after_in_child=_register)
PY
    (
        for at in $DUMP_AT; do
            sleep "$(( at - ($(date +%s) - START) ))" 2>/dev/null
            ps -eo pid,ppid,etimes,args --forest | grep -vF '\_ [' > "/tmp/thread-dumps/ps-at-$at.txt"
            # Python interpreters only: a SIGUSR1 ends any other process (the `timeout` wrapper among them)
            pkill -USR1 -f '^(/[^ ]*/)?python3?(\.[0-9]+)? '
        done
    ) &
    dumper=$!
    trap 'kill "$dumper" 2>/dev/null; sleep 1; tar -czf "$OUT/thread-dumps.tgz" -C /tmp thread-dumps' EXIT
fi
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader
part=$1; shift

send_back() {  # NAME PATH...: a tar of PATHs split into $OUT/NAME.tar.*
    local name=$1; shift
    tar -cf - "$@" | split -b 15m - "$OUT/$name.tar."
}
ended() {  # STATE: whether run_scale.py's state file says its run has ended (false if it is missing)
    python3 -c "import json, sys; from bench.run_scale import ended
sys.exit(0 if ended(json.load(open(sys.argv[1]))) else 1)" "$1" 2>/dev/null
}
keep_log() {  # NAME: /tmp/NAME.log back as $OUT/NAME.log.gz; shown: its count of tracebacks and its last lines
    # but the tracebacks' frames (a failure of the benchmark itself ends with its error line)
    gzip -c "/tmp/$1.log" > "$OUT/$1.log.gz"
    echo "$1: $(grep -c '^Traceback' "/tmp/$1.log") tracebacks in its stderr ($OUT/$1.log.gz); its last lines:"
    grep -v -e '^\s' -e '^Traceback' "/tmp/$1.log" | tail -5
}
restore() {  # NAME DIR: DIR from out/carry/NAME.tar.* unless DIR is here already (a warm machine)
    if [ ! -e "$2" ] && ls "out/carry/$1.tar."* >/dev/null 2>&1; then
        echo "restoring $2 from out/carry/$1.tar.*"
        cat "out/carry/$1.tar."* | tar -xf -
    fi
}

case "$part" in
tests)
    ORACLEAUDIT_CACHE=/tmp/oa-test-cache timeout "$(left 20)" python3 -m pytest -m gpu -v -rA --durations=0 \
        -p no:cacheprovider "$@" \
        > "$OUT/pytest.log" 2>&1
    echo "pytest exit $?"
    grep -E "PASSED|FAILED|ERROR|SKIPPED|passed|failed|^E |^[0-9.]+s (call|setup)" "$OUT/pytest.log" | tail -80
    tail -1 "$OUT/pytest.log"
    ;;
validate)
    if [ -f out/base.cu ]; then
        timeout "$(( $(left 20) / 4 ))" python3 bench/kernel_ab.py --base out/base.cu --json "$OUT/kernel_ab.json" 2>&1 \
            | tail -30
        echo "kernel_ab exit $? ($(( $(date +%s) - START )) s into the call)"
    else
        echo "validate: no out/base.cu carried: kernel_ab.py left out"
    fi
    ;&  # then the GPU tests
tests-parallel)
    # The out-of-memory test holds all but 12 GiB of the GPU: alone first. Then seven groups side by side (the
    # fixture of the uninterrupted run is made once in each group that needs it; the kill-and-resume tests, the
    # longest, one group each: together they took 423 of a 534 s call; the fault zoo and the trial weights apart
    # from the other tests, which with them ran past the call's limit), each with its log (pytest-gN.log, packed
    # at the end).
    export ORACLEAUDIT_CACHE=/tmp/oa-test-cache
    run_tests() {  # NAME PYTEST-ARGS...
        local name=$1; shift
        timeout "$(left 20)" python3 -m pytest -m gpu -v -rA --durations=0 -p no:cacheprovider "$@" \
            > "$OUT/pytest-$name.log" 2>&1
        echo "pytest $name exit $?: $(tail -1 "$OUT/pytest-$name.log")"
    }
    run="tests/execution/test_run_gpu.py"
    fixture="each_fault or records_nothing_twice or every_pair_has or namespace_cloned or dask_backend"
    fixture="$fixture or shared_out or fresh_model or writes_nothing"
    run_tests oom "$run" -k "out_of_memory_while_sharing"
    run_tests g1 "$run" -k "$fixture" &
    run_tests g2 "$run" -k "stopped_midway and SIGINT" &
    run_tests g6 "$run" -k "stopped_midway and SIGKILL" &
    run_tests g5 "$run" -k "killed_at_random" &
    zoo="fault_zoo or trial_weights"
    run_tests g3 "$run" -k "not ($fixture or $zoo or stopped_midway or killed_at_random or out_of_memory_while_sharing)" &
    run_tests g7 "$run" -k "$zoo" &
    # every other file with GPU tests (found, not listed: a new one is never left out)
    mapfile -t others < <(grep -rlE "mark\.gpu" tests --include="test_*.py" | grep -vx "$run" | sort)
    run_tests g4 "${others[@]}" &
    wait
    grep -hE "PASSED|FAILED|ERROR|SKIPPED" "$OUT"/pytest-*.log | sort | uniq | tail -40
    cat "$OUT"/pytest-*.log | awk '/^[0-9.]+s (call|setup|teardown)/ && $1 + 0 >= 1' | sort -rn | head -40
    (cd "$OUT" && tar -czf pytest-logs.tgz pytest-*.log && rm -f pytest-*.log)
    ;;
full|reobserve)
    # full: shards K/N of bench/data/full_run, each into out/shardK; reobserve: the mutants of
    # bench/data/reobserve/SET into out/reobserve1 (shard1, made by run_scale.py reobserve) or out/reobserve-SET.
    # Either continued from the store the last call left (the machine still warm) or from out/carry/NAME.tar.*
    # (packed, merged back into a plain store); one that has ended is skipped
    if [ "$part" = full ]; then
        runs=()
        while [ $# -gt 0 ] && [[ $1 == */* ]]; do runs+=("$1"); shift; done
    else
        set_=${1:-shard1}
        [ $# -gt 0 ] && shift
        [ -f "bench/data/reobserve/$set_/mutants.jsonl" ] || { echo "no bench/data/reobserve/$set_" >&2; exit 2; }
        if [ "$set_" = shard1 ]; then runs=(reobserve1); else runs=("reobserve-$set_"); fi
    fi
    mkdir -p out
    export ORACLEAUDIT_CACHE=$PWD/.oa-cache
    [ -n "${TRACE:-}" ] && export ORACLEAUDIT_TRACE=/tmp/trace
    for item in "${runs[@]}"; do
        [ "$(left 200)" -gt 0 ] || { echo "no time left for $item"; break; }
        if [ "$part" = full ] && [ -n "${FRESH:-}" ]; then
            name=fresh${item%/*}of${item#*/} state=out/scale-fresh${item%/*}of${item#*/}.json
            mutants=(--mutants bench/data/full_run --shard "$item")
        elif [ "$part" = full ]; then
            name=shard${item%/*} state=out/scale${item%/*}.json mutants=(--mutants bench/data/full_run --shard "$item")
        else
            name=$item state=out/scale-$item.json mutants=(--mutants "bench/data/reobserve/$set_" --reobserving)
        fi
        restore "$name" "out/$name-packed"
        # no piece of the shard here: from the committed one (bench/results/full_run/shardK with its state; the
        # carry of a past session is lost with its machine), or, its store parked (bench/device_tree.sh), skipped
        # when its committed state has ended rather than run again from its start
        committed=bench/results/full_run/scale${item%/*}.json
        if [ "$part" = full ] && [ -z "${FRESH:-}" ] && [ ! -e "out/$name-packed" ] && [ ! -d "out/$name" ]; then
            if [ -d "bench/results/full_run/$name" ]; then
                echo "restoring out/$name-packed from bench/results/full_run/$name"
                cp -r "bench/results/full_run/$name" "out/$name-packed"
                cp "$committed" "$state"
            elif [ ! -e "$state" ] && ended "$committed"; then
                echo "$item has ended ($committed): skipped"
                continue
            fi
        fi
        if ended "$state"; then
            echo "$item has ended: skipped"
            continue
        fi
        if [ ! -d "out/$name" ] && [ -d "out/$name-packed" ]; then
            python3 -m oracleaudit merge --into "out/$name" "out/$name-packed" | tail -1
        fi
        if [ ! -f "$state" ]; then
            python3 -c "import json; m = json.load(open('bench/results/run_scale.json')).get('memory');
json.dump({'memory': m} if m else {}, open('$state', 'w'))"
        fi
        echo "$item"
        # 70 s kept for the end: the run's stop and holes (about 7 s here), then its shipping (a fast codec: about
        # 8 s for a shard, was 50-56 s) and the copy back
        # the whole output (the workers' messages, the mutants' own tracebacks) back gzipped as $OUT/NAME.log.gz
        python3 bench/run_scale.py full "${mutants[@]}" --store "out/$name" --state "$state" \
            --stop-after "$(left 70)" "$@" 2>&1 | tee "/tmp/$name.log" | grep -v "^\s*$" | tail -40
        gzip -c "/tmp/$name.log" > "$OUT/$name.log.gz"
        grep -c "changed on the GPU" "/tmp/$name.log" | sed "s/^/stray writes seen (Models, inputs or references made again): /"
        # packed, in the background while the next one runs
        python3 bench/run_scale.py ship --store "out/$name" --state "$state" --name "$name" --out "$OUT" &
    done
    wait
    [ -n "${TRACE:-}" ] && [ -d /tmp/trace ] && tar -czf "$OUT/trace.tgz" -C /tmp trace
    ls -la "$OUT"
    ;;
fault-tail)
    export ORACLEAUDIT_CACHE=$PWD/.oa-cache
    # prepared here unless carried (prepare reads the committed shards, which bench/device_tree.sh parks)
    # stderr (the mutants' own tracebacks) to $OUT/fault_tail.log.gz: in the output it buries the figures
    # ARGS before "--" go to prepare, those after it to run (--floors 5,2, say)
    prepare_args=() run_args=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do prepare_args+=("$1"); shift; done
    [ "${1:-}" = "--" ] && shift && run_args=("$@")
    { [ -d out/fault_tail/mutants ] \
        || python3 bench/fault_tail.py prepare --work out/fault_tail "${prepare_args[@]}"; } \
        && timeout "$(left 20)" python3 bench/fault_tail.py run --work out/fault_tail --budget-s "$(left 40)" \
        "${run_args[@]}" 2> /tmp/fault_tail.log
    echo "fault_tail exit $?"
    keep_log fault_tail
    cp out/fault_tail/fault_tail.json "$OUT/"
    ;;
restart)
    export ORACLEAUDIT_CACHE=$PWD/.oa-cache
    [ -d out/fault_tail/mutants ] || { echo "restart: carry out/fault_tail (fault_tail.py prepare, run here)"; exit 2; }
    timeout "$(left 20)" python3 bench/restart_cost.py --work out/fault_tail --json "$OUT/restart_cost.json" "$@" \
        2> /tmp/restart_cost.log
    echo "restart_cost exit $?"
    keep_log restart_cost
    tar -czf "$OUT/restart_traces.tgz" -C out/fault_tail $(cd out/fault_tail && ls -d trace-* 2>/dev/null)
    ;;
pair-cost)
    ORACLEAUDIT_CACHE=$PWD/.oa-cache python3 bench/pair_cost.py --mutants bench/data/full_run --json "$OUT/pair_cost.json" \
        "$@" 2> /tmp/pair_cost.log
    echo "pair_cost exit $?"
    keep_log pair_cost
    ;;
timeslice)
    timeout "$(left 10)" python3 bench/timeslice_cost.py --json "$OUT/timeslice_cost.json" "$@"
    echo "timeslice_cost exit $?"
    ;;
hull)
    timeout "$(left 10)" python3 bench/hull_cost.py --json "$OUT/hull_cost.json" "$@"
    echo "hull_cost exit $?"
    ;;
kill)
    timeout "$(left 10)" python3 bench/kill_cost.py --json "$OUT/kill_cost.json" "$@"
    echo "kill_cost exit $?"
    ;;
sizes)
    restore sizes out/size_findings
    ORACLEAUDIT_CACHE=$PWD/.oa-cache python3 bench/size_findings.py "$@" --work out/size_findings
    send_back sizes out/size_findings
    ;;
real)
    [ -n "${TRACE:-}" ] && export ORACLEAUDIT_TRACE=/tmp/trace
    ORACLEAUDIT_CACHE=$PWD/.oa-cache timeout "$(left 20)" python3 bench/run_scale.py real --store out/real \
        --state out/scale-real.json
    echo "run_scale real exit $?"
    [ -f out/scale-real.json ] && cp out/scale-real.json "$OUT/"
    # what the store holds, also when the run was cut off: rows by problem and status
    python3 -c "import sys; from oracleaudit.store import EvidenceStore
rows = EvidenceStore(sys.argv[1]).open().read(columns=['problem', 'mutant_id', 'status'])
print(rows.groupby(['problem', 'status']).size().to_string())" out/real 2>&1 | tail -20
    [ -n "${TRACE:-}" ] && [ -d /tmp/trace ] && tar -czf "$OUT/trace-real.tgz" -C /tmp trace
    ;;
refcheck)
    ORACLEAUDIT_CACHE=/tmp/oa-refcheck timeout "$(left 20)" python3 -m oracleaudit refcheck --jobs 8 --out out/refcheck \
        --json $(for o in oracles/*.toml; do echo --oracle "$(basename "$o" .toml)"; done) > "$OUT/refcheck.json"
    echo "refcheck exit $?"
    cp out/refcheck/refcheck.jsonl "$OUT/"
    ;;
*)
    echo "device_call.sh: unknown part '$part' (tests, tests-parallel, validate, full, reobserve, fault-tail, pair-cost, timeslice, sizes, real, refcheck)" >&2
    exit 2
    ;;
esac
echo "call took $(( $(date +%s) - START )) s"
