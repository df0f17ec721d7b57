#!/bin/sh
# Reproduces the demo pair from scratch: problems, corpus, tokenizer, both models (trained
# side by side, one thread each, at the lowest priority), GGUF files, reference logits.
# Usage: tools/train/reproduce.sh [path/to/HumanEval.jsonl.gz]
set -eu
cd "$(dirname "$0")"
HUMANEVAL=${1:-../../../shared/data/humaneval/HumanEval.jsonl.gz}
RUN="nice -n 19 python3"
mkdir -p work

$RUN demo_problems.py
$RUN corpus.py --humaneval "$HUMANEVAL"
$RUN tokenizer.py
$RUN encode.py

$RUN train.py --name target --dim 192 --layers 4 --heads 6 --kv-heads 2 --hidden 512 \
    --steps 600 --lr 2e-3 >> work/target.log 2>&1 &
TARGET=$!
$RUN train.py --name draft --dim 64 --layers 2 --heads 4 --kv-heads 2 --hidden 172 \
    --steps 1000 --lr 3e-3 >> work/draft.log 2>&1 &
DRAFT=$!
wait $TARGET
wait $DRAFT

$RUN export_gguf.py --name target --type f16 --out ../../resources/models/specula-demo-target.gguf
$RUN export_gguf.py --name draft --type f32 --out ../../resources/models/specula-demo-draft.gguf
$RUN reference.py
cp work/corpus/manifest.json corpus_manifest.json
$RUN evaluate.py
