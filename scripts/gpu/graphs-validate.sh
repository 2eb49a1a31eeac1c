#!/usr/bin/env bash
# GPU validation of CUDA graph support (issue 14): examples/c/graph_steps.cu in every
# variant and mode, against the same work launched eagerly and against ncu's graph
# profiling; then scripts/graphs/torch_graph.py (a whole PyTorch step captured with
# torch.cuda.graph, and the torch.compile mode="reduce-overhead" form) in every mode against
# torch.profiler's kernel count.
#
#   scripts/gpu-stage && OUT=/some/dir bash scripts/gpu/graphs-validate.sh
#
# Runs from a copy of the project root that holds .gpu/ (scripts/gpu-stage; only .gpu/bin/gmprof
# and .gpu/lib/libgmprof.so are used); needs nvcc, ncu and PyTorch with CUDA. Writes log.txt
# and ncu's CSV files into $OUT; exits 1 if any check failed.
set -uo pipefail
cd "$(dirname "$0")/../.."
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} PATH=${CUDA_HOME:-/usr/local/cuda}/bin:$PATH
export LD_LIBRARY_PATH=$CUDA_HOME/targets/x86_64-linux/lib:$CUDA_HOME/extras/CUPTI/lib64:$CUDA_HOME/lib64:${LD_LIBRARY_PATH:-}
OUT=${OUT:-gmprof-validate}
mkdir -p "$OUT"
G=$PWD/.gpu/bin/gmprof
CHECK="python3 scripts/graphs/check_graphs.py"
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
W=$(mktemp -d)
S=6
failed=0
run() { echo "\$ $*"; "$@" || { echo "FAILED: $*"; failed=1; }; }
{
  date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  nvcc -O2 -arch=native -o "$W/graph_steps" examples/c/graph_steps.cu || exit 1
  for v in graph thread_local relaxed to_graph child update; do
    k=8; [ $v = child ] && k=10
    for mode in trace per_range per_kernel kernel_replay; do
      echo "== graph_steps $v, $mode"
      $G run --mode $mode --metrics $M -o "$W/$v-$mode" -- "$W/graph_steps" $S $v 2>&1 | grep -v '^gmprof: pid' | sed -n '/^gmprof 0/,/^$/p'
      run $CHECK steps "$W/$v-$mode" $mode $S $k
    done
  done
  echo "== graph_steps eager and eager_child, per_range (the references for graph DRAM bytes)"
  $G run --mode per_range --metrics $M -o "$W/eager-per_range" -- "$W/graph_steps" $S eager >/dev/null 2>&1
  $G run --mode per_range --metrics $M -o "$W/eager_child-per_range" -- "$W/graph_steps" $S eager_child >/dev/null 2>&1
  for v in graph thread_local relaxed to_graph update; do run $CHECK dram "$W/$v-per_range" "$W/eager-per_range"; done
  run $CHECK dram "$W/child-per_range" "$W/eager_child-per_range"
  echo "== ncu --graph-profiling node and graph"
  NCU="ncu --cache-control none --clock-control none --print-units base --csv --metrics dram__bytes_read.sum,dram__bytes_write.sum"
  $NCU --graph-profiling node "$W/graph_steps" $S graph > "$OUT/ncu-node.csv" 2>&1
  $NCU --graph-profiling graph "$W/graph_steps" $S graph > "$OUT/ncu-graph.csv" 2>&1
  run $CHECK ncu "$W/graph-kernel_replay" "$OUT/ncu-node.csv" kernel_replay
  run $CHECK ncu "$W/graph-per_kernel" "$OUT/ncu-graph.csv" per_kernel

  for form in capture compile; do
    flag=; [ $form = compile ] && flag=--compile
    python3 scripts/graphs/torch_graph.py 5 $flag --count > "$W/count-$form.txt" 2>&1 || tail -5 "$W/count-$form.txt"
    count=$(sed -n 's/.*kernels_per_step=\([0-9]*\).*/\1/p' "$W/count-$form.txt")
    echo "== torch_graph ($form): torch.profiler counts ${count:-?} kernels per step"
    modes="trace per_range per_kernel kernel_replay"; [ $form = compile ] && modes="trace per_kernel"
    for mode in $modes; do
      echo "== torch_graph ($form), $mode"
      $G run --mode $mode --metrics $M -o "$W/torch-$form-$mode" -- python3 scripts/graphs/torch_graph.py 5 $flag \
        > "$W/torch-$form-$mode.txt" 2>&1 || tail -5 "$W/torch-$form-$mode.txt"
      sed -n '/^gmprof 0/,/^$/p' "$W/torch-$form-$mode.txt"
      run $CHECK torch "$W/torch-$form-$mode" "${count:-0}" 5
    done
  done
  echo "failed=$failed"
} 2>&1 | tee "$OUT/log.txt"
grep -q '^failed=0' "$OUT/log.txt"
