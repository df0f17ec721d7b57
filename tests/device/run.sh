#!/usr/bin/env bash
# Device checks of the CUDA backend, for a machine with an NVIDIA GPU: builds (Release,
# sm_90 by default), runs the CUDA tests, then the timings, and prints a short table last.
# Takes a few minutes on an H200, most of it the build.
#
#   tests/device/run.sh [build-dir]      CUDA_ARCH=80-real for an A100;
#                                        SPECULA_SHARED_DIR for the reference data
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-device}
arch=${CUDA_ARCH:-90-real}
tests=(test_device_plan test_cuda_kernels test_cuda_backend test_cuda_forward)
mkdir -p "$build"
log=$build/device-checks.log
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
# the toolkit's default location is often not on PATH
if ! command -v nvcc > /dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="$PATH:/usr/local/cuda/bin"
fi

echo "== build (Release, CUDA $arch, $(nproc) jobs)"
start=$SECONDS
if ! cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DSPECULA_BUILD_UI=OFF \
     -DSPECULA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" > "$log" 2>&1 ||
   ! cmake --build "$build" -j "$(nproc)" --target "${tests[@]}" bench_cuda specula-cli >> "$log" 2>&1; then
  grep -E "error|Error" "$log" | head -40
  echo "build failed; full log: $log"
  exit 1
fi
echo "built in $((SECONDS - start)) s"

echo "== CUDA tests"
failed=0
summary=()
for t in "${tests[@]}"; do
  exe=$(find "$build/tests" -name "$t" -type f -perm -u+x | head -1)
  QT_QPA_PLATFORM=offscreen timeout 240 "$exe" > "$build/$t.log" 2>&1
  rc=$?
  [ $rc -ne 0 ] && failed=1
  # failures and skips with their reasons, then the totals
  grep -E -A3 "^(FAIL!|SKIP)" "$build/$t.log" | grep -v -E "^(PASS|Totals|\*\*|--$)" | head -40
  summary+=("$t: $(grep -E '^Totals' "$build/$t.log" | sed 's/, 0 blacklisted.*//') (exit $rc)")
done

echo "== timings"
# the session's own decoder (logits copied to the host every step) at forced acceptance
timeout 150 "$build/app/specula-cli" bench-spec --device cuda --random 7b --type f16 --n 1,8,16 \
  --drafters layers:4 --policies fixed:4 --temps 0 --alpha 0.8 --max-tokens 64 > "$build/bench-spec.log" 2>&1
spec_rc=$?
timeout 300 "$build/tests/device/bench_cuda" > "$build/bench.log" 2>&1
bench_rc=$?

echo
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2> /dev/null
printf '%s\n' "${summary[@]}"
echo
echo "specula-cli bench-spec (decoder with host sampling):"
grep -E "^(model|\|)" "$build/bench-spec.log"
[ $spec_rc -ne 0 ] && echo "bench-spec exit $spec_rc (log: $build/bench-spec.log)"
echo
[ $bench_rc -ne 0 ] && echo "bench_cuda exit $bench_rc (log: $build/bench.log)"
cat "$build/bench.log"
exit $failed
