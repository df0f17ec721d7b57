"""SmolLM2's tokenizer built by Hugging Face `tokenizers` from a GGUF file's own vocabulary and
merges, with SmolLM2's published pipeline (pre-tokenizer: every digit alone, then GPT-2's
byte-level split; llama.cpp calls it `smollm`). Shared by the oracle scripts of the real file."""
from tokenizers import Tokenizer, models, pre_tokenizers


def strings(reader, key):
    """A GGUF string array field as Python strings."""
    field = reader.fields[key]
    return [bytes(field.parts[i]).decode("utf-8") for i in field.data]


def smollm2_tokenizer(reader):
    tokens = strings(reader, "tokenizer.ggml.tokens")
    merges = [tuple(m.split(" ", 1)) for m in strings(reader, "tokenizer.ggml.merges")]
    tok = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    return tok
