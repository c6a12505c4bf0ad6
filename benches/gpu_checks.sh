#!/usr/bin/env bash
# basin's GPU checks, for a GPU machine that has PyTorch 2.11 (cu130) but no Rust.
#
#   benches/gpu_checks.sh prepare        here: builds the binaries and gathers them, the Python
#                                        anchors (bench_et_pytorch.py, et_energy_ref.py, from
#                                        $BASIN_CHECKS) and a few small datasets (from
#                                        $BASIN_DATA_DIR) into .gpu/ (ignored)
#   bash .gpu/gpu_checks.sh [PART...]    there, from the repository root (default: every part)
#
# Parts: env (GPU, driver, torch); energy (`basin energy` on CPU, CUDA and CUDA+TF32 against
# the paper-equation reference); tests (the `device` module of basin-core's test binary: CUDA
# against CPU, the float32 descent with and without TF32); anchor (et_step_anchor at both
# sizes, TF32 off and on, beside the Python anchor bench_et_pytorch.py cuda, --tf32 and
# --compile); train (`basin train`, the et-graph example on MUTAG fold 0 for 20 epochs, on CUDA
# and on the CPU); tables (et-table1 and cdat-table2 on tolokers, cdat-table4 on NCI1, paper
# protocols, on CUDA). About six minutes on an H100 for all of them. Not in the default set:
# cdat-table1 (`reproduce cdat-table1 --paper` on DATASET, MUTAG unless set, in SHARDS = 10
# parallel processes on the one GPU). Results: stdout, and archives of the run directories
# under $OUT (or /tmp/gpu-out).
set -uo pipefail

if [ "${1:-}" = prepare ]; then
    set -e
    cd "$(dirname "$0")/.."
    data=${BASIN_DATA_DIR:?set BASIN_DATA_DIR}
    checks=${BASIN_CHECKS:?set BASIN_CHECKS to the folder of the Python anchors}
    cargo build --release -q -p basin-cli -p basin-benches --bin basin --bin et_step_anchor
    test_bin=$(cargo test --release -q -p basin-core --test it --no-run --message-format=json \
        | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1)
    rm -rf .gpu && mkdir -p .gpu/data/tu .gpu/data/anomaly
    cp target/release/basin target/release/et_step_anchor .gpu/
    cp "$test_bin" .gpu/device_test
    cp benches/gpu_checks.sh benches/energy_check.py data/blocks/et-small.toml .gpu/
    cp "$checks/bench_et_pytorch.py" "$checks/et_energy_ref.py" .gpu/
    cp -r "$data/tu/MUTAG" "$data/tu/NCI1" .gpu/data/tu/
    cp "$data"/anomaly/tolokers* .gpu/data/anomaly/
    chmod -R u+w .gpu
    target/release/basin train --example et-graph \
        | sed 's/^epochs = 100/epochs = 20/; s/^total = 100/total = 20/; s/^warmup = 17/warmup = 3/' \
        > .gpu/et-graph.toml
    echo "prepared $(du -sh .gpu | cut -f1) in .gpu/: carry it and run 'bash .gpu/gpu_checks.sh'"
    exit 0
fi

G=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
PY=${PY:-python3}
export LD_LIBRARY_PATH=$($PY -c 'import torch, os; print(os.path.dirname(torch.__file__))')/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export BASIN_DATA_DIR=$G/data
W=$(mktemp -d)
log() { echo "=== $* [$(date +%T)]"; }
for part in ${*:-env energy tests anchor train tables}; do
    case $part in
    env)
        log env
        nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
        $PY -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name())' ;;
    energy)
        log "basin energy: CPU, CUDA, CUDA+TF32 against the float64 reference"
        $PY "$G/energy_check.py" "$G/basin" "$G/et-small.toml" "$W" "$G" ;;
    tests)
        log "device tests"
        "$G/device_test" device:: --nocapture --test-threads 1 ;;
    anchor)
        log "basin under the anchor's protocol (TF32 off, on)"
        for t in 0 1; do
            BASIN_DEVICE=cuda BASIN_TF32=$t timeout 120 "$G/et_step_anchor" foundation imagenet --rate
        done
        log "PyTorch anchor (fp32, TF32)"
        timeout 100 $PY "$G/bench_et_pytorch.py" cuda
        timeout 100 $PY "$G/bench_et_pytorch.py" cuda --tf32
        log "basin again"
        BASIN_DEVICE=cuda timeout 60 "$G/et_step_anchor" foundation imagenet --rate
        log "torch.compile"
        timeout 150 $PY "$G/bench_et_pytorch.py" cuda --compile ;;
    train)
        for d in cuda cpu; do
            log "basin train et-graph, MUTAG fold 0, 20 epochs, $d"
            timeout 120 "$G/basin" train "$G/et-graph.toml" --out "$W/train-$d" --device "$d" \
                --shard 0/10 --quiet
        done
        tar czf "$OUT/train.tgz" --exclude='*.safetensors' -C "$W" train-cuda train-cpu ;;
    tables)
        for t in "et-table1 --dataset tolokers" "cdat-table2 --dataset tolokers" \
                 "cdat-table4 --dataset NCI1"; do
            read -r -a args <<< "$t"
            log "reproduce $t --paper on CUDA"
            timeout 240 "$G/basin" reproduce "${args[@]}" --paper --device cuda --out "$W/${args[0]}" --quiet
            grep '^| ' "$W/${args[0]}/report.md"
            tar czf "$OUT/${args[0]}.tgz" --exclude='*.safetensors' -C "$W" "${args[0]}"
        done ;;
    cdat-table1)
        # Issue 13's full-scale run of one TU set: every run of `reproduce cdat-table1 --paper`
        # (CV, code-cv and et-paper, models and baselines) in SHARDS processes sharing one GPU
        # (small graph models are launch-bound, so they interleave), then the report.
        n=${SHARDS:-10} set=${DATASET:-MUTAG} o="$W/cdat-table1" ok=1
        log "reproduce cdat-table1 --paper --dataset $set on CUDA in $n parallel shards"
        for i in $(seq 0 $((n - 1))); do
            OMP_NUM_THREADS=1 RAYON_NUM_THREADS=1 timeout "${SHARD_TIMEOUT:-460}" "$G/basin" \
                reproduce cdat-table1 --paper --dataset "$set" --device cuda --out "$o" --quiet \
                --shard "$i/$n" > "$W/shard-$i.log" 2>&1 &
        done
        for job in $(jobs -p); do wait "$job" || ok=0; done
        log "shards done (all finished: $ok)"
        tail -n 2 "$W"/shard-*.log
        if [ $ok = 1 ]; then
            timeout 60 "$G/basin" reproduce cdat-table1 --paper --dataset "$set" --device cuda \
                --out "$o" --quiet && grep '^| ' "$o/report.md"
        fi
        tar czf "$OUT/cdat-table1.tgz" --exclude='*.safetensors' -C "$W" cdat-table1 \
            $(cd "$W" && ls shard-*.log) ;;
    *) echo "unknown part '$part' (env energy tests anchor train tables cdat-table1)" >&2; exit 2 ;;
    esac
done
log done
