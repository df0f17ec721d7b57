#!/usr/bin/env bash
# Device checks of the CUDA backend, for a machine with an NVIDIA GPU: says which CUDA runtime
# and driver it has (and what is missing when they do not fit), builds (Release, for this
# GPU) unless tests/device/pack.sh left executables in .device-bin/, runs the CUDA tests,
# then the timings, and prints one table last. Exits non-zero when a test fails (or the
# build does). Finishes in under 8 minutes on one GPU.
#
#   tests/device/run.sh [build-dir]      CUDA_ARCH=80-real to build for an A100 only
#
# Reference data (stories260K): SPECULA_SHARED_DIR, else .device-data/ (what pack.sh copies
# there), else ../shared; without any, the stories260K checks skip and say so. The demo pair
# comes with the repository (resources/models). Logs go to the build directory, and to $OUT
# as well when that is set. Every step's time limit is cut to what is left of
# DEVICE_CHECKS_DEADLINE_S (420 s from the start, build included), so a hang costs the
# timings, not the results before it.
set -uo pipefail
deadline=${DEVICE_CHECKS_DEADLINE_S:-420}
# the smaller of $1 seconds and what is left before the deadline (at least 10)
limit() {
  local left=$((deadline - SECONDS))
  [ $left -lt 10 ] && left=10
  echo $((left < $1 ? left : $1))
}
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-device}
arch=${CUDA_ARCH:-native}
tests=(test_device_plan test_device_layout test_cuda_kernels test_cuda_backend test_cuda_forward)
mkdir -p "$build"
log=$build/device-checks.log
# the toolkit's default location is often not on PATH
if ! command -v nvcc > /dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="$PATH:/usr/local/cuda/bin"
fi
export SPECULA_DEMO_DIR=$root/resources/models

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
echo "== GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader 2> /dev/null ||
  echo 'nvidia-smi found no GPU')"
nvidia-smi 2> /dev/null | grep -o "CUDA Version: [0-9.]*" | sed 's/^/== driver /'

if [ -f "$root/.device-bin/bundle.tar.gz" ]; then
  prebuilt=$build/prebuilt
  rm -rf "$prebuilt" && mkdir -p "$prebuilt" && tar -xzf "$root/.device-bin/bundle.tar.gz" -C "$prebuilt"
  echo "== prebuilt executables from .device-bin (tests/device/pack.sh): $(cat "$prebuilt/BUILD" 2> /dev/null)"
  # the machine's own C++ runtime when it is recent enough (the packed one needs glibc 2.36)
  system_cxx=$(ldconfig -p 2> /dev/null | awk '/libstdc\+\+\.so\.6 .*x86-64/ { print $NF; exit }')
  if [ -n "$system_cxx" ] && grep -qa GLIBCXX_3.4.30 "$system_cxx"; then
    rm -f "$prebuilt/lib/libstdc++.so.6" "$prebuilt/lib/libgcc_s.so.1"
  fi
  bin_of() { echo "$prebuilt/bin/$1"; }
  # cuBLAS of the runtime's major version from the machine's toolkit, else from wherever one is installed
  cublas=$(ldd "$prebuilt/bin/bench_cuda" 2> /dev/null | grep -o 'libcublas\.so\.[0-9]*' | head -1)
  cuda_lib=$(dirname "$(command -v nvcc 2> /dev/null || echo /usr/local/cuda/bin/nvcc)")/../lib64
  if [ -n "$cublas" ] && [ ! -e "$cuda_lib/$cublas" ]; then
    cuda_lib=$(find /usr/local /opt /usr/lib -name "$cublas" -printf '%h\n' 2> /dev/null | head -1)
  fi
  export LD_LIBRARY_PATH="$prebuilt/lib:$cuda_lib:${LD_LIBRARY_PATH:-}"
  if ldd "$prebuilt"/bin/* | grep "not found" | sort -u | grep .; then
    echo "prebuilt executables miss the libraries above (LD_LIBRARY_PATH=$LD_LIBRARY_PATH):"
    echo "  $cublas comes with the CUDA toolkit of the same major version as the one they were packed with;"
    echo "  install it, or run tests/device/pack.sh with this machine's toolkit version"
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

# runtime against driver, and the compute capability: what is missing, before anything else
echo "== versions"
timeout 30 "$(bin_of bench_cuda)" --versions 2>&1 | tee "$build/versions.log" | sed 's/^/   /'
versions_rc=${PIPESTATUS[0]}

echo "== CUDA tests"
failed=0
summary=()
for t in "${tests[@]}"; do
  exe=$(bin_of "$t")
  QT_QPA_PLATFORM=offscreen timeout "$(limit 150)" "$exe" > "$build/$t.log" 2>&1
  rc=$?
  [ $rc -ne 0 ] && failed=1
  # failures and skips with their reasons, then the totals
  grep -E -A3 "^(FAIL!|SKIP)" "$build/$t.log" | grep -v -E "^(PASS|Totals|\*\*|--$)" | head -40
  [ $rc -ne 0 ] && tail -5 "$build/$t.log"  # a crash or a timeout prints no FAIL! line
  summary+=("$t: $(grep -E '^Totals' "$build/$t.log" | sed 's/, 0 blacklisted.*//') (exit $rc)")
done

# this script exists to exercise the GPU: tests that skip for the lack of one are a failure here
if [ "$versions_rc" -ne 0 ] || grep -q -E "SKIP .*(no usable CUDA device|no CUDA device found)" "$build/test_cuda_kernels.log"; then
  echo "no usable GPU: the device checks skipped (see the versions above)"
  failed=1
fi

echo "== timings"
# the session's own decoder (acceptance on the device) at forced acceptance: its log only
timeout "$(limit 90)" "$(bin_of specula-cli)" bench-spec --device cuda --random 7b --type q4_K --n 1,8,16 \
  --drafters layers:4 --policies fixed:4 --temps 0 --alpha 0.8 --max-tokens 64 > "$build/bench-spec.log" 2>&1
spec_rc=$?
timeout "$(limit 300)" "$(bin_of bench_cuda)" > "$build/bench.log" 2>&1
bench_rc=$?
[ -n "${OUT:-}" ] && cp "$build"/*.log "$OUT/" 2> /dev/null

echo
cat "$build/versions.log"
printf '%s\n' "${summary[@]}"
echo "specula-cli bench-spec (the session's decoder): exit $spec_rc, table in $build/bench-spec.log"
[ $bench_rc -ne 0 ] && echo "bench_cuda exit $bench_rc (log: $build/bench.log)"
echo
cat "$build/bench.log"
[ $failed -ne 0 ] && echo "DEVICE CHECKS FAILED"
exit $failed
