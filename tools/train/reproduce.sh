#!/bin/sh
# Reproduces the demo pair from scratch: problems, corpus, tokenizer, both models (at the
# lowest priority), their fill-in-the-middle stage, GGUF files, reference logits.
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

# The target trains on both cores, then the draft. (Both at once, the target's two threads
# and the draft's one on two cores, slowed the target tenfold: its threads wait on each other
# at every operation.) The target sees generated tasks in 70 % of its windows.
$RUN train.py --name target --dim 256 --layers 4 --heads 8 --kv-heads 2 --hidden 688 --threads 2 \
    --steps 2400 --lr 2e-3 --warmup 100 --eval-every 400 --tasks-fraction 0.7 >> work/target.log 2>&1

# The draft trains in two stages: the second mostly on generated tasks, from the first
# stage's weights, with fresh batches.
DRAFT="--dim 64 --layers 2 --heads 4 --kv-heads 2 --hidden 172 --threads 2"
$RUN train.py --name draft $DRAFT --steps 800 --lr 3e-3 >> work/draft.log 2>&1
$RUN train.py --name draft_tasks --init draft $DRAFT --steps 300 --lr 1.5e-3 --warmup 20 \
    --tasks-fraction 0.9 --seed 1235 --eval-every 100 >> work/draft_tasks.log 2>&1

$RUN export_gguf.py --name target --type f16 --out work/base-target.gguf
$RUN export_gguf.py --name draft_tasks --type f32 --out work/base-draft.gguf

# Fill in the middle (fim.py): three sentinel pieces, half of the documents as FIM, both
# models fine-tuned from the weights of the files above (as they were shipped before FIM:
# the target in F16) with the new embedding rows; half of every batch is FIM windows.
$RUN fim.py tokenizer
$RUN fim.py encode
$RUN fim.py init --gguf work/base-target.gguf --name target_base
$RUN fim.py init --gguf work/base-draft.gguf --name draft_base
$RUN train.py --name target_fim --init target_base --dim 256 --layers 4 --heads 8 --kv-heads 2 --hidden 688 \
    --vocab 4099 --threads 2 --steps 800 --lr 1e-3 --warmup 30 --eval-every 200 --tasks-fraction 0.7 \
    --fim-fraction 0.5 >> work/target_fim.log 2>&1
$RUN train.py --name draft_fim --init draft_base $DRAFT --vocab 4099 --steps 400 --lr 1.5e-3 --warmup 20 \
    --eval-every 100 --tasks-fraction 0.9 --fim-fraction 0.5 >> work/draft_fim.log 2>&1

$RUN export_gguf.py --name target_fim --type f16 --tokenizer tokenizer_fim.model \
    --out ../../resources/models/specula-demo-target.gguf
$RUN export_gguf.py --name draft_fim --type f32 --tokenizer tokenizer_fim.model \
    --out ../../resources/models/specula-demo-draft.gguf
$RUN reference.py
cp work/corpus/manifest.json corpus_manifest.json
$RUN evaluate.py
