#!/usr/bin/env bash
# Specula's CPU forward against llama.cpp's on the same GGUF files, interleaved, for
# docs/performance.md: one-token decode, 8- and 16-token forwards of one sequence, at every
# SIMD level this processor has.
#
#   usage: tools/cpu_side_by_side.sh SPECULA_CLI LLAMA_BIN_DIR MODEL_DIR [THREADS] [ROUNDS] [OUT_DIR]
#
# MODEL_DIR holds r11-f16.gguf, r11-Q8_0.gguf, r11-Q4_0.gguf and r11-Q4_K_M.gguf (the 1.1B
# shape with random weights, quantized by llama.cpp's llama-quantize); LLAMA_BIN_DIR holds a
# built llama-bench. Each round runs, per file, llama-bench (-p 8,16 -n 32) and then
# `specula-cli bench-forward --tokens 1,8,16` at each SIMD level; the summary gives the
# median over rounds of every figure, and Specula's decode as a fraction of the read bandwidth
# its bench measured in the same run. Run it on a quiet machine: the figures are wall-clock.
set -euo pipefail
cli=$1; llama=$2; models=$3; threads=${4:-2}; rounds=${5:-3}
out=${6:-$(mktemp -d)}
mkdir -p "$out"
export LD_LIBRARY_PATH=$llama${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

levels=(avx2)
if "$cli" bench-forward --random tiny --type f32 --tokens 1 --repeats 1 --simd avx512 >/dev/null 2>&1; then
  levels+=(avx512)
fi
echo "SIMD levels: ${levels[*]}; $threads threads; $rounds rounds; logs in $out"
uptime

for round in $(seq 1 "$rounds"); do
  for type in f16 Q8_0 Q4_0 Q4_K_M; do
    model=$models/r11-$type.gguf
    "$llama/llama-bench" -m "$model" -t "$threads" -p 8,16 -n 32 -r 2 -o json \
      >"$out/llama-$type-$round.json" 2>/dev/null
    for level in "${levels[@]}"; do
      "$cli" bench-forward -m "$model" --tokens 1,8,16 --threads "$threads" --repeats 5 \
        --simd "$level" --json >"$out/specula-$type-$level-$round.json"
    done
  done
done

python3 - "$out" "$rounds" "${levels[@]}" <<'EOF'
import json, statistics, sys
out, rounds, levels = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
med = statistics.median
print("| type | llama.cpp decode tok/s | llama.cpp 8 tok/s | llama.cpp 16 tok/s | SIMD | Specula decode tok/s | % of bandwidth | 8 tokens tok/s | 16 tokens tok/s | 16 tokens % of peak | decode vs llama.cpp | 8 tokens vs llama.cpp |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for t in ["f16", "Q8_0", "Q4_0", "Q4_K_M"]:
    ll = {"d": [], 8: [], 16: []}
    for r in range(1, rounds + 1):
        for row in json.load(open(f"{out}/llama-{t}-{r}.json")):
            key = "d" if row["n_gen"] > 0 else row["n_prompt"]
            ll[key].append(row["avg_ts"])
    for level in levels:
        dec, bw, k8, k16, pk = [], [], [], [], []
        for r in range(1, rounds + 1):
            s = json.load(open(f"{out}/specula-{t}-{level}-{r}.json"))
            dec.append(s["decode"]["tokens_per_s"]); bw.append(s["decode"]["fraction_of_bandwidth"])
            rows = {f["tokens"]: f for f in s["forwards"]}
            k8.append(rows[8]["one_sequence_tokens_per_s"]); k16.append(rows[16]["one_sequence_tokens_per_s"])
            pk.append(rows[16]["one_sequence_fraction_of_peak"])
        print(f"| {t} | {med(ll['d']):.1f} | {med(ll[8]):.1f} | {med(ll[16]):.1f} | {level} | {med(dec):.1f} | "
              f"{100 * med(bw):.0f}% | {med(k8):.1f} | {med(k16):.1f} | {100 * med(pk):.0f}% | "
              f"{med(dec) / med(ll['d']):.2f}x | {med(k8) / med(ll[8]):.2f}x |")
EOF
uptime
