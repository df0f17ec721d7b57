"""A Llama model in PyTorch, laid out exactly as the engine and GGUF expect.

RMSNorm, rotary embeddings on adjacent pairs (x[2i], x[2i+1]) as llama2.c and GGUF rotate,
SwiGLU feed-forward, grouped-query attention, output classifier tied to the embedding.
Because the rotation convention is GGUF's, export writes wq and wk without permutation.
"""
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Config:
    dim: int = 192          # residual stream width
    hidden_dim: int = 512   # feed-forward width
    n_layers: int = 4
    n_heads: int = 6
    n_kv_heads: int = 2     # n_heads % n_kv_heads == 0
    vocab_size: int = 4096
    context_length: int = 256
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5

    def as_dict(self):
        return asdict(self)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))  # (dim)

    def forward(self, x):
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


def rope_tables(head_dim, length, theta):
    """cos and sin of shape (length, head_dim / 2): pair i of position p turns by p * theta^(-2i/d).

    Kept in float64 so that the float64 reference pass uses exact angles."""
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.outer(torch.arange(length, dtype=torch.float64), inv_freq)
    return angles.cos(), angles.sin()


def apply_rope(x, cos, sin):
    """x: (batch, seq, heads, head_dim); rotates adjacent pairs (x[2i], x[2i+1])."""
    even, odd = x[..., 0::2], x[..., 1::2]
    cos, sin = cos[None, :, None, :], sin[None, :, None, :]
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = c.n_heads, c.n_kv_heads, c.dim // c.n_heads
        self.wq = nn.Linear(c.dim, c.dim, bias=False)                            # (dim, dim)
        self.wk = nn.Linear(c.dim, c.n_kv_heads * self.head_dim, bias=False)     # (kv_dim, dim)
        self.wv = nn.Linear(c.dim, c.n_kv_heads * self.head_dim, bias=False)     # (kv_dim, dim)
        self.wo = nn.Linear(c.dim, c.dim, bias=False)                            # (dim, dim)

    def forward(self, x, cos, sin):
        batch, seq, _ = x.shape
        q = self.wq(x).view(batch, seq, self.n_heads, self.head_dim)
        k = self.wk(x).view(batch, seq, self.n_kv_heads, self.head_dim)
        v = self.wv(x).view(batch, seq, self.n_kv_heads, self.head_dim)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        # Each group of n_heads / n_kv_heads query heads shares one key/value head.
        repeat = self.n_heads // self.n_kv_heads
        k, v = k.repeat_interleave(repeat, dim=2), v.repeat_interleave(repeat, dim=2)
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                             is_causal=True)
        return self.wo(out.transpose(1, 2).reshape(batch, seq, -1))


class FeedForward(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.w_gate = nn.Linear(c.dim, c.hidden_dim, bias=False)  # (hidden_dim, dim)
        self.w_up = nn.Linear(c.dim, c.hidden_dim, bias=False)    # (hidden_dim, dim)
        self.w_down = nn.Linear(c.hidden_dim, c.dim, bias=False)  # (dim, hidden_dim)

    def forward(self, x):
        return self.w_down(F.silu(self.w_gate(x)) * self.w_up(x))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attn_norm = RMSNorm(c.dim, c.norm_eps)
        self.attn = Attention(c)
        self.ffn_norm = RMSNorm(c.dim, c.norm_eps)
        self.ffn = FeedForward(c)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.ffn(self.ffn_norm(x))


class Llama(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.config = c
        self.token_embedding = nn.Embedding(c.vocab_size, c.dim)  # (vocab, dim), also the classifier
        self.layers = nn.ModuleList(Block(c) for _ in range(c.n_layers))
        self.final_norm = RMSNorm(c.dim, c.norm_eps)
        cos, sin = rope_tables(c.dim // c.n_heads, c.context_length, c.rope_theta)
        # Plain attributes, not buffers, so that .float() / .double() never round them.
        self.rope_cos, self.rope_sin = cos, sin
        self.apply(self._init)
        # Residual projections start small so that deep sums stay near unit scale (GPT-2).
        for name, p in self.named_parameters():
            if name.endswith("wo.weight") or name.endswith("w_down.weight"):
                nn.init.normal_(p, std=0.02 / (2 * c.n_layers) ** 0.5)

    @staticmethod
    def _init(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)

    def forward(self, tokens):
        """tokens: (batch, seq) int64 -> logits (batch, seq, vocab) float32."""
        seq = tokens.shape[1]
        x = self.token_embedding(tokens)
        cos, sin = self.rope_cos[:seq].to(x.dtype), self.rope_sin[:seq].to(x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return F.linear(self.final_norm(x), self.token_embedding.weight).float()

    def parameter_count(self):
        return sum(p.numel() for p in self.parameters())
