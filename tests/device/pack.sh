#!/usr/bin/env bash
# Prepares tests/device/run.sh for a GPU machine that has the CUDA toolkit but not the
# build's other dependencies (Qt, SentencePiece, CLI11, nlohmann-json): builds the device
# checks here (Release, real code for sm_80, sm_86, sm_89 and sm_90 plus PTX that newer GPUs
# compile at load; the machine needs a driver for this toolkit's CUDA version and its
# cuBLAS) and fills two ignored folders of the repository, which run.sh then uses instead
# of building:
#
#   .device-bin/bundle.tar.gz   bin/: the test executables, bench_cuda and specula-cli,
#                               stripped; lib/: the shared libraries they load beyond
#                               glibc and the CUDA toolkit (Qt, ICU, SentencePiece, ...)
#   .device-data      stories260K and its oracle, in the layout of ../shared
#
#   tests/device/pack.sh [build-dir]      CUDA_ARCH=80-real for an A100 only (faster)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-device}
arch=${CUDA_ARCH:-80-real;86-real;89-real;90-real;90-virtual}
shared=${SPECULA_SHARED_DIR:-$root/../shared}
if ! command -v nvcc > /dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="$PATH:/usr/local/cuda/bin"
fi
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
targets=(test_device_plan test_device_layout test_cuda_kernels test_cuda_backend test_cuda_forward bench_cuda specula-cli)
cmake -S "$root" -B "$build" ${generator[@]+"${generator[@]}"} -DCMAKE_BUILD_TYPE=Release -DSPECULA_BUILD_UI=OFF \
  -DSPECULA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" > /dev/null
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"

# bin/ and lib/ travel as one archive: uncompressed they would not fit a 64 MB transfer
stage=$build/pack
rm -rf "$stage"
mkdir -p "$stage/bin" "$stage/lib"
for t in "${targets[@]}"; do
  exe=$(find "$build/app" "$build/tests" -name "$t" -type f -perm -u+x | head -1)
  [ -n "$exe" ] || { echo "pack: $t was not built" >&2; exit 1; }
  cp "$exe" "$stage/bin/"
  strip "$stage/bin/$t"
done
# glibc and the driver come with the machine, cuBLAS with its toolkit (too large to carry)
ldd "$stage"/bin/* | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u |
  grep -v -E '/(libc|libm|libpthread|libdl|librt|libresolv|libcuda|libcublas|libcublasLt)\.so' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
echo "CUDA $(nvcc --version | grep -o 'release [0-9.]*' | cut -d' ' -f2), architectures $arch" > "$stage/BUILD"
rm -rf "$root/.device-bin"
mkdir -p "$root/.device-bin"
tar -czf "$root/.device-bin/bundle.tar.gz" -C "$stage" bin lib BUILD
echo "newest glibc symbol needed: $(objdump -T "$stage"/bin/* "$stage"/lib/* 2> /dev/null |
  grep -o 'GLIBC_[0-9.]*' | sort -u -V | tail -1)"

data=$root/.device-data
mkdir -p "$data/models/stories260K" "$data/oracles"
for f in models/stories260K/stories260K.bin models/stories260K/tok512.bin oracles/stories260K.md; do
  cp "$shared/$f" "$data/$f"
done
du -sh "$root/.device-bin" "$data"
echo "carry .device-bin and .device-data with the run (both are ignored by git)"
