"""The Hugging Face tokenizer of a Gemma 3 GGUF file, built the way `transformers` builds it from
the file (`AutoTokenizer.from_pretrained(dir, gguf_file=...)`), without `torch`: transformers'
GGUF reader imports torch, so the metadata is read here with the `gguf` package and handed to
transformers' own GGUF tokenizer builder (integrations/gguf/gguf_tokenizer_mapping.py:
GemmaTokenizer, whitespace-only pieces respelled with "▁", merges in vocabulary order, control
pieces as special tokens, user-defined pieces as added tokens)."""
from transformers.integrations.gguf.gguf_tokenizer_mapping import convert_gguf_tokenizer


def field(reader, key):
    return reader.fields[key].contents()


def gemma3_tokenizer(reader):
    """A `tokenizers.Tokenizer` of the file's vocabulary (ids without BOS: the GGUF builder's
    post-processor adds none; tokenizer.ggml.add_bos_token says a caller adds <bos>)."""
    tokenizer_dict = {
        "tokenizer_type": field(reader, "tokenizer.ggml.model"),
        "tokens": field(reader, "tokenizer.ggml.tokens"),
        "scores": field(reader, "tokenizer.ggml.scores"),
        "token_type": field(reader, "tokenizer.ggml.token_type"),
        "bos_token_id": field(reader, "tokenizer.ggml.bos_token_id"),
        "eos_token_id": field(reader, "tokenizer.ggml.eos_token_id"),
        "unk_token_id": field(reader, "tokenizer.ggml.unknown_token_id"),
        "pad_token_id": field(reader, "tokenizer.ggml.padding_token_id"),
        "add_prefix_space": field(reader, "tokenizer.ggml.add_space_prefix"),
    }
    tokenizer, _ = convert_gguf_tokenizer(field(reader, "general.architecture"), tokenizer_dict)
    return tokenizer
