#!/usr/bin/env bash
# The CUDA checks that need a GPU, as one prepared script.
#
#   bash scripts/gpu-check.sh --prepare     # here, with the toolkit: build and bundle
#   bash scripts/gpu-check.sh [OUT_DIR]     # on the GPU machine: certify and benchmark
#
# --prepare builds the default preset and copies stripped binaries into
# build/gpu-bundle (about 8 MiB), the one folder to carry to a machine with
# an NVIDIA GPU and driver. Nothing there needs a compiler, a package
# registry or the CUDA toolkit: the runtime is linked in statically, the
# driver is reached at run time, and the one shared library Debian gives only
# as such (Google Benchmark) is copied in.
#
# The check writes to OUT_DIR (default $OUT, else build/gpu-check):
#   environment.txt       nvidia-smi and driver facts
#   cuda.json, cuda-vmm.json   the conformance reports of both CUDA adapters
#   reference-cuda.json   the CUDA unit tests (GoogleTest JSON)
#   cuda-bench.json       the CUDA benchmarks (Google Benchmark JSON)
#   gpu-check.log         everything printed, in order
# and exits 0 only if both adapters are conformant and the unit tests pass.
# Each step has its own time limit (150 + 150 + 30 + 120 s): the whole check
# stays under 8 minutes.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bundle=build/gpu-bundle

if [[ ${1:-} == --prepare ]]; then
  set -e
  bash scripts/install-deps.sh
  cmake --preset default >/dev/null
  cmake --build --preset default --target ortmem-cts ortmem_cuda_bench ortmem_reference_tests
  rm -rf "$bundle" && mkdir -p "$bundle"
  for binary in build/default/ortmem-cts build/default/reference/bench/ortmem_cuda_bench \
                build/default/reference/tests/ortmem_reference_tests; do
    strip -o "$bundle/$(basename "$binary")" "$binary"
  done
  # Debian ships Google Benchmark as a shared library only: it travels too.
  for library in $(ldd build/default/reference/bench/ortmem_cuda_bench | awk '/libbenchmark/ {print $3}'); do
    cp -L "$library" "$bundle/"
  done
  echo "bundle ready: $bundle ($(du -sh "$bundle" | cut -f1)); carry it and run: bash scripts/gpu-check.sh"
  exit 0
fi

out=${1:-${OUT:-build/gpu-check}}
mkdir -p "$out"
log=$out/gpu-check.log
: >"$log"
say() { echo "$*" | tee -a "$log"; }
for binary in ortmem-cts ortmem_cuda_bench ortmem_reference_tests; do
  [[ -x $bundle/$binary ]] || {
    say "gpu-check: $bundle/$binary is missing; run 'bash scripts/gpu-check.sh --prepare' on the build machine and carry $bundle"
    exit 2
  }
done

{ date -u; uname -a; nvidia-smi 2>&1 || echo "nvidia-smi not available"; } >"$out/environment.txt"
say "== $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo 'no nvidia-smi')"

status=0
for adapter in cuda cuda-vmm; do
  say "== certify $adapter"
  start=$SECONDS
  # In one process: CUDA reports device faults as errors rather than signals,
  # and a fresh CUDA context per test (--isolate test) would cost seconds each.
  timeout 150 "$bundle/ortmem-cts" run --adapter "$adapter" --isolate none --timeout 60 \
    --report "$out/$adapter.json" >>"$log" 2>&1
  code=$?
  say "   exit $code in $((SECONDS - start)) s"
  # SM-008 on the device: the probe reads cuMemGetAccess of the mapped prefix
  # (a device write through it would poison the context); say what it found.
  if [[ $adapter == cuda-vmm ]] && command -v python3 >/dev/null; then
    python3 - "$out/$adapter.json" <<'PY' 2>&1 | tee -a "$log"
import json, sys
report = json.load(open(sys.argv[1]))
for test in report.get("tests", []):
    if "SM-008" in test.get("requirements", []):
        why = "; ".join(f.get("message", "")[:200] for f in test.get("failures", [])) or test.get("skip_reason", "")
        print(f"   SM-008 {test['status']}: {test['id']} {why}".rstrip())
PY
  fi
  [[ $code -eq 0 ]] || status=1
done

say "== CUDA unit tests"
timeout 30 "$bundle/ortmem_reference_tests" --gtest_filter='Cuda*:WithoutADevice*' \
  --gtest_output="json:$out/reference-cuda.json" >>"$log" 2>&1 || { say "   FAILED"; status=1; }

say "== CUDA benchmarks"
LD_LIBRARY_PATH=$bundle${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} timeout 120 "$bundle/ortmem_cuda_bench" --benchmark_repetitions=3 --benchmark_min_time=0.2 \
  --benchmark_report_aggregates_only=true --benchmark_out="$out/cuda-bench.json" \
  --benchmark_out_format=json >>"$log" 2>&1 || say "   the benchmarks did not finish (exit $?)"
if [[ -s $out/cuda-bench.json ]] && command -v python3 >/dev/null; then
  python3 - "$out/cuda-bench.json" <<'PY' 2>&1 | tee -a "$log"
import json, sys
runs = {b["run_name"]: b["real_time"] for b in json.load(open(sys.argv[1]))["benchmarks"]
        if b.get("aggregate_name") == "median"}
pairs = [("BM_CudaAllocatorAllocRelease/64", "BM_CudaRawMallocFree/64"),
         ("BM_CudaOwningAllocRelease/64", "BM_CudaRawMallocFree/64"),
         ("BM_CudaVmmAllocRelease", "BM_CudaRawVmmGranule"),
         ("BM_CudaDeferredEnqueueDrain", "BM_CudaRawEventRecordQuery")]
print("| measure | ns | baseline ns | ratio |\n|---|---|---|---|")
for name, base in pairs:
    if name in runs and base in runs:
        print(f"| {name} ÷ {base} | {runs[name]:.0f} | {runs[base]:.0f} | {runs[name] / runs[base]:.2f} |")
PY
fi
say "== gpu-check: $([[ $status -eq 0 ]] && echo 'both CUDA adapters conformant' || echo 'FAILED, see the log')"
exit $status
