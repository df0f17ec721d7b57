#!/usr/bin/env bash
# Specula's CPU forward against llama.cpp's on the same GGUF files, interleaved, and the
# table of docs/performance.md that reports it: one-token decode and 4-, 8- and 16-token
# forwards of one sequence, at every SIMD level this processor has.
#
#   usage: [TYPES="..."] [TABLE=NAME] tools/cpu_side_by_side.sh SPECULA_CLI LLAMA_BIN_DIR MODEL_DIR
#          [THREADS] [ROUNDS] [OUT_DIR]
#
# MODEL_DIR holds r11-TYPE.gguf for each of TYPES (default "f16 Q8_0 Q4_0 Q4_K_M"; the 1.1B
# shape with random weights from `bench-forward --random 1.1b --write-gguf`, quantized by
# llama.cpp's llama-quantize: ../shared/bench/make-models.sh and tools/bench/make-more-types.sh
# make them); LLAMA_BIN_DIR holds a built llama-bench. The table goes between the TABLE
# markers (default cpu-side-by-side; the other types' table is cpu-side-by-side-types). Each round runs, per
# file, llama-bench (-p 4,8,16 -n 32), then `specula-cli bench-forward --tokens 1,4,8,16` at
# each SIMD level, then llama-bench again: llama.cpp's figure of the round is the mean of the
# runs before and after, so that both programs see the same load and the same phase of the
# machine's memory, which moves within minutes. The median over rounds of every figure
# replaces the block between the cpu-side-by-side markers of docs/performance.md, with the
# machine, date, command, niceness and load; the raw JSON stays in OUT_DIR. The figures are
# wall-clock: run it on a quiet machine (under `nice`, say so: the table records it).
set -euo pipefail
cli=$1; llama=$2; models=$3; threads=${4:-2}; rounds=${5:-3}
out=${6:-$(mktemp -d)}
doc=$(cd "$(dirname "$0")/.." && pwd)/docs/performance.md
mkdir -p "$out"
export LD_LIBRARY_PATH=$llama${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
read -r -a types <<<"${TYPES:-f16 Q8_0 Q4_0 Q4_K_M}"
table=${TABLE:-cpu-side-by-side}

levels=(avx2)
if "$cli" bench-forward --random tiny --type f32 --tokens 1 --repeats 1 --simd avx512 >/dev/null 2>&1; then
  levels+=(avx512)
fi
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "SIMD levels: ${levels[*]}; $threads threads; $rounds rounds; niceness $(nice); logs in $out"

for round in $(seq 1 "$rounds"); do
  for type in "${types[@]}"; do
    model=$models/r11-$type.gguf
    echo "round $round: $type"
    "$llama/llama-bench" -m "$model" -t "$threads" -p 4,8,16 -n 32 -r 3 -o json \
      >"$out/llama-$type-$round-before.json" 2>/dev/null
    for level in "${levels[@]}"; do
      "$cli" bench-forward -m "$model" --tokens 1,4,8,16 --threads "$threads" --repeats 5 \
        --simd "$level" --json >"$out/specula-$type-$level-$round.json"
    done
    "$llama/llama-bench" -m "$model" -t "$threads" -p 4,8,16 -n 32 -r 3 -o json \
      >"$out/llama-$type-$round-after.json" 2>/dev/null
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$out" "$rounds" "$threads" "$doc" "$(nice)" "$load_before" "$load_after" \
  "$(lscpu | sed -n 's/^Model name: *//p')" "$(nproc)" "${types[*]}" "$table" "${levels[@]}" <<'EOF'
import datetime, json, re, statistics, sys
out, rounds, threads, doc, niceness, load_before, load_after, cpu, cores, types, table = sys.argv[1:12]
rounds, levels, med, types = int(rounds), sys.argv[12:], statistics.median, types.split()
ks = [4, 8, 16]

rows = []
for t in types:
    ll = {"decode": []} | {k: [] for k in ks}
    for r in range(1, rounds + 1):
        runs = {}  # the round's figures, before and after Specula's
        for when in ("before", "after"):
            for row in json.load(open(f"{out}/llama-{t}-{r}-{when}.json")):
                runs.setdefault("decode" if row["n_gen"] > 0 else row["n_prompt"], []).append(row["avg_ts"])
        for key, v in runs.items():
            ll[key].append(statistics.fmean(v))
    for level in levels:
        sp = {"decode": [], "bw": [], "peak": []} | {k: [] for k in ks}
        for r in range(1, rounds + 1):
            s = json.load(open(f"{out}/specula-{t}-{level}-{r}.json"))
            sp["decode"].append(s["decode"]["tokens_per_s"])
            sp["bw"].append(s["decode"]["fraction_of_bandwidth"])
            by_k = {f["tokens"]: f for f in s["forwards"]}
            for k in ks:
                sp[k].append(by_k[k]["one_sequence_tokens_per_s"])
            sp["peak"].append(by_k[16]["one_sequence_fraction_of_peak"])
        m = {key: med(v) for key, v in sp.items()}
        l = {key: med(v) for key, v in ll.items()}
        # each round's two engines ran minutes apart: the ratio is the median of the rounds'
        # own ratios, so that a phase of the machine falls on both sides of each
        ratio = lambda key: med(a / b for a, b in zip(sp[key], ll[key]))
        cells = [t, level, f"{m['decode']:.1f}", f"{l['decode']:.1f}", f"{ratio('decode'):.2f}x",
                 f"{100 * m['bw']:.0f}%"]
        for k in ks:
            cells += [f"{m[k]:.1f}", f"{l[k]:.1f}", f"{ratio(k):.2f}x"]
        cells.append(f"{100 * m['peak']:.0f}%")
        rows.append("| " + " | ".join(cells) + " |")

head = ["type", "SIMD", "decode tok/s", "llama.cpp", "ratio", "% of bw"]
for k in ks:
    head += [f"{k} tokens tok/s", "llama.cpp", "ratio"]
head.append("16 tokens % of peak")
rendered = "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + rows)
plural = lambda n, word: f"{n} {word}" + ("" if str(n) == "1" else "s")
nice_prefix = "" if niceness == "0" else f"nice -n {niceness} "
if types != ["f16", "Q8_0", "Q4_0", "Q4_K_M"] or table != "cpu-side-by-side":
    nice_prefix = f'TYPES="{" ".join(types)}" TABLE={table} ' + nice_prefix
block = f"""<!-- {table}:begin (written by tools/cpu_side_by_side.sh) -->
{cpu}, {cores} cores, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {plural(threads, "thread")},
niceness {niceness}, load average {load_before} before and {load_after} after. Medians of
{plural(rounds, "interleaved round")} (llama-bench `-r 3` before and after bench-forward
`--repeats 5`, llama.cpp's figure of a round the mean of the two); "k tokens" is a forward
of one sequence with k new tokens (llama-bench's `pp k`), each ratio the median of the
rounds' own ratios, "% of bw" the one-token decode's weight rate over the read bandwidth
of a pass run just before it (bench-forward's median of such pairs), "% of peak" the
16-token forward's multiply-add rate over the core's register-only peak for the model's
mix of kernels.

```
{nice_prefix}tools/cpu_side_by_side.sh build/app/specula-cli LLAMA_BIN_DIR MODEL_DIR {threads} {rounds}
```

{rendered}
<!-- {table}:end -->"""
print(block)
text = open(doc).read()
pattern = re.compile(rf"<!-- {re.escape(table)}:begin.*?<!-- {re.escape(table)}:end -->", re.S)
if not pattern.search(text):
    sys.exit(f"{doc} has no {table} markers")
open(doc, "w").write(pattern.sub(lambda _: block, text))
print(f"table written to {doc}")
EOF
