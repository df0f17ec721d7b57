#!/usr/bin/env bash
# Makes the 1.1B random-weight GGUF files of the other tensor types the CPU side-by-side
# table compares (docs/performance.md, cpu-side-by-side-types): llama-quantize's Q4_1, Q5_0,
# Q5_K_M, Q3_K_M, IQ4_XS and Q2_K from the F16 file that ../shared/bench/make-models.sh
# writes, so that both engines read identical files. Without an importance matrix, as a
# user quantizing a model of their own would (llama-quantize refuses only the IQ1/IQ2 types
# without one).
#   usage: tools/bench/make-more-types.sh LLAMA_BIN_DIR MODEL_DIR
set -euo pipefail
bin=$1; out=$2
export LD_LIBRARY_PATH=$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
[ -s "$out/r11-f16.gguf" ] || { echo "$out/r11-f16.gguf is missing: run ../shared/bench/make-models.sh first" >&2; exit 1; }
for t in Q4_1 Q5_0 Q5_K_M Q3_K_M IQ4_XS Q2_K; do
  # llama-quantize reports each tensor on stderr: kept beside the file, for its type mix
  [ -s "$out/r11-$t.gguf" ] || "$bin/llama-quantize" "$out/r11-f16.gguf" "$out/r11-$t.gguf" "$t" 2 \
    >/dev/null 2>"$out/r11-$t.quantize.log"
done
ls -l "$out"/r11-*.gguf
