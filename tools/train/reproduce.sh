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

# Second stage: mostly generated tasks, from the first stage's weights, with fresh batches.
$RUN train.py --name target_tasks --init target --dim 192 --layers 4 --heads 6 --kv-heads 2 \
    --hidden 512 --steps 200 --lr 1e-3 --warmup 20 --tasks-fraction 0.9 --seed 1235 \
    --eval-every 50 >> work/target_tasks.log 2>&1 &
TARGET=$!
$RUN train.py --name draft_tasks --init draft --dim 64 --layers 2 --heads 4 --kv-heads 2 \
    --hidden 172 --steps 400 --lr 1.5e-3 --warmup 20 --tasks-fraction 0.9 --seed 1235 \
    --eval-every 100 >> work/draft_tasks.log 2>&1 &
DRAFT=$!
wait $TARGET
wait $DRAFT

$RUN export_gguf.py --name target_tasks --type f16 --out ../../resources/models/specula-demo-target.gguf
$RUN export_gguf.py --name draft_tasks --type f32 --out ../../resources/models/specula-demo-draft.gguf
$RUN reference.py
cp work/corpus/manifest.json corpus_manifest.json
$RUN evaluate.py
