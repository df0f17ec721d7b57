#!/usr/bin/env bash
# Device checks of the CUDA backend, for a machine with an NVIDIA GPU: builds (Release,
# sm_90 by default), runs the CUDA tests, then the timings, and prints a short table last.
# Exits non-zero when a test fails (or the build does). Takes a few minutes on an H200.
#
#   tests/device/run.sh [build-dir]      CUDA_ARCH=80-real for an A100
#
# A machine without the build's dependencies (Qt, SentencePiece, CLI11) runs the
# executables that tests/device/pack.sh left in .device-bin/ instead of building.
# Reference data (stories260K): SPECULA_SHARED_DIR, else .device-data/ (what pack.sh
# copies there), else ../shared; without any, the stories260K checks skip and say so.
# Logs go to the build directory, and to $OUT as well when that is set. Every step's
# time limit is cut to what is left of DEVICE_CHECKS_DEADLINE_S (360 s from the start), so
# a hang costs the timings, not the results before it.
set -uo pipefail
deadline=${DEVICE_CHECKS_DEADLINE_S:-360}
# the smaller of $1 seconds and what is left before the deadline (at least 10)
limit() {
  local left=$((deadline - SECONDS))
  [ $left -lt 10 ] && left=10
  echo $((left < $1 ? left : $1))
}
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-device}
arch=${CUDA_ARCH:-90-real}
tests=(test_device_plan test_cuda_kernels test_cuda_backend test_cuda_forward)
mkdir -p "$build"
log=$build/device-checks.log
# the toolkit's default location is often not on PATH
if ! command -v nvcc > /dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="$PATH:/usr/local/cuda/bin"
fi

if [ -z "${SPECULA_SHARED_DIR:-}" ]; then
  for dir in "$root/.device-data" "$root/../shared"; do
    if [ -f "$dir/models/stories260K/stories260K.bin" ]; then
      export SPECULA_SHARED_DIR=$dir
      break
    fi
  done
fi
echo "== reference data: ${SPECULA_SHARED_DIR:-none, the stories260K checks will skip (see docs/cuda.md)}"
export SPECULA_TEST_DATA_DIR=${SPECULA_TEST_DATA_DIR:-$root/tests/data}

if [ -f "$root/.device-bin/bundle.tar.gz" ]; then
  prebuilt=$build/prebuilt
  rm -rf "$prebuilt" && mkdir -p "$prebuilt" && tar -xzf "$root/.device-bin/bundle.tar.gz" -C "$prebuilt"
  echo "== prebuilt executables from .device-bin (tests/device/pack.sh)"
  # the machine's own C++ runtime when it is recent enough (the packed one needs glibc 2.36)
  system_cxx=$(ldconfig -p 2> /dev/null | awk '/libstdc\+\+\.so\.6 .*x86-64/ { print $NF; exit }')
  if [ -n "$system_cxx" ] && grep -qa GLIBCXX_3.4.30 "$system_cxx"; then
    rm -f "$prebuilt/lib/libstdc++.so.6" "$prebuilt/lib/libgcc_s.so.1"
  fi
  bin_of() { echo "$prebuilt/bin/$1"; }
  # cuBLAS from the machine's toolkit, else from wherever a CUDA 13 cuBLAS is installed
  cuda_lib=$(dirname "$(command -v nvcc 2> /dev/null || echo /usr/local/cuda/bin/nvcc)")/../lib64
  if [ ! -e "$cuda_lib/libcublas.so.13" ]; then
    cuda_lib=$(find /usr/local /opt /usr/lib -name libcublas.so.13 -printf '%h\n' 2> /dev/null | head -1)
  fi
  export LD_LIBRARY_PATH="$prebuilt/lib:$cuda_lib:${LD_LIBRARY_PATH:-}"
  if ldd "$prebuilt"/bin/* | grep "not found" | sort -u | grep .; then
    echo "prebuilt executables miss the libraries above (LD_LIBRARY_PATH=$LD_LIBRARY_PATH)"
  fi
else
  generator=()
  command -v ninja > /dev/null && generator=(-G Ninja)
  echo "== build (Release, CUDA $arch, $(nproc) jobs)"
  start=$SECONDS
  if ! cmake -S "$root" -B "$build" ${generator[@]+"${generator[@]}"} -DCMAKE_BUILD_TYPE=Release \
       -DSPECULA_BUILD_UI=OFF -DSPECULA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" > "$log" 2>&1 ||
     ! cmake --build "$build" -j "$(nproc)" --target "${tests[@]}" bench_cuda specula-cli >> "$log" 2>&1; then
    grep -E "error|Error|Could not|not found" "$log" | head -40
    echo "build failed; full log: $log (no Qt/SentencePiece here? see tests/device/pack.sh)"
    [ -n "${OUT:-}" ] && cp "$log" "$OUT/"
    exit 1
  fi
  echo "built in $((SECONDS - start)) s"
  bin_of() {
    case $1 in
      specula-cli) echo "$build/app/specula-cli" ;;
      bench_cuda) echo "$build/tests/device/bench_cuda" ;;
      *) find "$build/tests" -name "$1" -type f -perm -u+x | head -1 ;;
    esac
  }
fi

echo "== CUDA tests"
failed=0
summary=()
for t in "${tests[@]}"; do
  exe=$(bin_of "$t")
  QT_QPA_PLATFORM=offscreen timeout "$(limit 120)" "$exe" > "$build/$t.log" 2>&1
  rc=$?
  [ $rc -ne 0 ] && failed=1
  # failures and skips with their reasons, then the totals
  grep -E -A3 "^(FAIL!|SKIP)" "$build/$t.log" | grep -v -E "^(PASS|Totals|\*\*|--$)" | head -40
  [ $rc -ne 0 ] && tail -5 "$build/$t.log"  # a crash or a timeout prints no FAIL! line
  summary+=("$t: $(grep -E '^Totals' "$build/$t.log" | sed 's/, 0 blacklisted.*//') (exit $rc)")
done

# this script exists to exercise the GPU: tests that skip for the lack of one are a failure here
if grep -q -E "SKIP .*(no usable CUDA device|no CUDA device found)" "$build/test_cuda_kernels.log"; then
  echo "no usable GPU: the device checks skipped"
  failed=1
fi

echo "== timings"
# the session's own decoder (logits copied to the host every step) at forced acceptance
timeout "$(limit 120)" "$(bin_of specula-cli)" bench-spec --device cuda --random 7b --type f16 --n 1,8,16 \
  --drafters layers:4 --policies fixed:4 --temps 0 --alpha 0.8 --max-tokens 64 > "$build/bench-spec.log" 2>&1
spec_rc=$?
timeout "$(limit 240)" "$(bin_of bench_cuda)" > "$build/bench.log" 2>&1
bench_rc=$?
[ -n "${OUT:-}" ] && cp "$build"/*.log "$OUT/" 2> /dev/null

echo
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2> /dev/null
printf '%s\n' "${summary[@]}"
echo
echo "specula-cli bench-spec (decoder with host sampling):"
grep -E "^(model|\|)" "$build/bench-spec.log"
[ $spec_rc -ne 0 ] && echo "bench-spec exit $spec_rc (log: $build/bench-spec.log)" && tail -3 "$build/bench-spec.log"
echo
[ $bench_rc -ne 0 ] && echo "bench_cuda exit $bench_rc (log: $build/bench.log)"
cat "$build/bench.log"
[ $failed -ne 0 ] && echo "DEVICE CHECKS FAILED"
exit $failed
