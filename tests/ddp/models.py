"""Python twins of engine/models (same parameter names and registration order) and of the data
`dpscope train` trains on, for the PyTorch DDP oracle. Run with /usr/bin/python3 (torch 1.13).
`args` carries pytorch_ddp.py's flags; sizes left None are the model's defaults (DEFAULTS)."""
import gzip
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F


class Toy(nn.Module):
    def __init__(self):
        super().__init__()
        self.net1 = nn.Linear(10, 10)
        self.net2 = nn.Linear(10, 5)

    def forward(self, x):
        return self.net2(F.relu(self.net1(x)))


class Mlp(nn.Module):
    def __init__(self, inputs, hidden, layers, classes):
        super().__init__()
        width = inputs
        self.count = layers + 1
        for i in range(layers):
            setattr(self, f"fc{i}", nn.Linear(width, hidden))
            width = hidden
        setattr(self, f"fc{layers}", nn.Linear(width, classes))

    def forward(self, x):
        h = x
        for i in range(self.count - 1):
            h = F.relu(getattr(self, f"fc{i}")(h))
        return getattr(self, f"fc{self.count - 1}")(h)


class Branch(nn.Module):
    def __init__(self, inputs, hidden, classes):
        super().__init__()
        self.fc0 = nn.Linear(inputs, hidden)
        self.head_a = nn.Linear(hidden, classes)
        self.head_b = nn.Linear(hidden, classes)

    def forward(self, x):
        h = F.relu(self.fc0(x))
        out = self.head_a(h)
        if x.reshape(-1)[0].item() > 0:
            out = out + self.head_b(h)
        return out


class Cnn(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32 * 4 * 4, classes)

    def forward(self, x):
        h = x.reshape(-1, 1, 8, 8)
        h = F.relu(self.bn1(self.conv1(h)))
        h = F.relu(self.conv2(h))
        h = F.max_pool2d(h, 2)
        return self.fc(h.flatten(1))


class TinyTransformer(nn.Module):
    def __init__(self, vocab, sequence, dim):
        super().__init__()
        self.dim = dim
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.randn(sequence, dim) * 0.02)
        self.ln1 = nn.LayerNorm(dim)
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.o = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp1 = nn.Linear(dim, 4 * dim)
        self.mlp2 = nn.Linear(4 * dim, dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        h = self.embed(tokens) + self.pos
        a = self.ln1(h)
        scores = torch.matmul(self.q(a), self.k(a).transpose(-2, -1)) / math.sqrt(self.dim)
        h = h + self.o(torch.matmul(torch.softmax(scores, -1), self.v(a)))
        h = h + self.mlp2(F.relu(self.mlp1(self.ln2(h))))
        return self.head(h)


class GptBlock(nn.Module):
    """engine/models/gpt.cpp's GptBlockImpl: every module call and operation in its order (the
    order forward creates autograd nodes is the order backward delivers gradients to DDP)."""

    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(hidden)
        self.attn_qkv = nn.Linear(hidden, 3 * hidden)
        self.attn_proj = nn.Linear(hidden, hidden)
        self.ln_2 = nn.LayerNorm(hidden)
        self.mlp_fc = nn.Linear(hidden, 4 * hidden)
        self.mlp_proj = nn.Linear(4 * hidden, hidden)

    def forward(self, x):
        batch, length, width = x.shape
        head_width = width // self.heads
        a = self.ln_1(x)
        qkv = self.attn_qkv(a)
        parts = qkv.split(width, 2)
        q = parts[0].view(batch, length, self.heads, head_width).transpose(1, 2)
        k = parts[1].view(batch, length, self.heads, head_width).transpose(1, 2)
        v = parts[2].view(batch, length, self.heads, head_width).transpose(1, 2)
        key_t = k.transpose(-2, -1)
        scores = torch.matmul(q, key_t) / math.sqrt(head_width)
        future = torch.ones(length, length, dtype=torch.bool).triu(1)
        masked = scores.masked_fill(future, float("-inf"))
        weights = torch.softmax(masked, -1)
        mixed = torch.matmul(weights, v)
        merged = mixed.transpose(1, 2).contiguous().view(batch, length, width)
        h = x + self.attn_proj(merged)
        m = self.ln_2(h)
        up = self.mlp_fc(m)
        activated = F.gelu(up)
        return h + self.mlp_proj(activated)


class Gpt(nn.Module):
    """engine/models/gpt.h: wte, wpe, block0..block{L-1}, ln_f, lm_head. The initial weights come
    from dpscope's saved ones (--init), so this twin needs no initialisation of its own."""

    def __init__(self, vocab, sequence, hidden, layers, heads):
        super().__init__()
        self.layers = layers
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(sequence, hidden)
        for i in range(layers):
            setattr(self, f"block{i}", GptBlock(hidden, heads))
        self.ln_f = nn.LayerNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab)

    def forward(self, tokens):
        length = tokens.shape[-1]
        token_embedding = self.wte(tokens)
        positions = torch.arange(length)
        position_embedding = self.wpe(positions)
        h = token_embedding + position_embedding
        for i in range(self.layers):
            h = getattr(self, f"block{i}")(h)
        normed = self.ln_f(h)
        return self.lm_head(normed)


# engine/models/model_config.cpp's with_defaults: a size left unset is its model's default.
DEFAULTS = {
    "gpt": {"hidden": 128, "layers": 4, "heads": 4, "seq": 64},
    "transformer": {"seq": 8},
}
MLP_DEFAULTS = {"hidden": 256, "layers": 2}
# `--data text`'s file (engine/data/text.cpp's find_text_file), unless args.text names another.
TEXT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data",
                    "opticks.txt.gz")


def size(args, name):
    given = getattr(args, name, None)
    if given is not None:
        return given
    return DEFAULTS.get(args.model, MLP_DEFAULTS).get(name)


def make_model(args, features):
    if args.model == "toy":
        return Toy()
    if args.model == "mlp":
        return Mlp(features, size(args, "hidden"), size(args, "layers"), 10)
    if args.model == "branch":
        return Branch(features, size(args, "hidden"), 10)
    if args.model == "cnn":
        return Cnn(10)
    if args.model == "transformer":
        return TinyTransformer(16, size(args, "seq"), 32)
    if args.model == "gpt":
        vocab = len(read_text(text_path(args))[1])
        return Gpt(vocab, size(args, "seq"), size(args, "hidden"), size(args, "layers"),
                   size(args, "heads"))
    raise SystemExit(f"unknown model {args.model}")


def load_digits(path):
    rows = []
    with gzip.open(path, "rt") as f:
        for line in f:
            parts = line.strip().split(",")
            if not parts or not parts[0].strip().lstrip("-").isdigit():
                continue
            rows.append([int(v) for v in parts])
    data = torch.tensor(rows, dtype=torch.int64)
    return data[:, :64].to(torch.float32) / 16, data[:, 64].clone()


def text_path(args):
    return getattr(args, "text", None) or TEXT


def read_text(path):
    """The text and its vocabulary (engine/data/text.cpp): strict UTF-8, no newline translation,
    the characters in ascending code-point order."""
    with gzip.open(path) as f:
        text = f.read().decode("utf-8")
    return text, sorted(set(text))


def load_text(path, sequence):
    """Samples of sequence + 1 characters from i * sequence: x the first, y the last sequence."""
    text, chars = read_text(path)
    index = {c: i for i, c in enumerate(chars)}
    ids = torch.tensor([index[c] for c in text], dtype=torch.int64)
    n = (len(ids) - 1) // sequence
    return ids[:n * sequence].view(n, sequence), ids[1:n * sequence + 1].view(n, sequence)


def load_data(args, digits_path):
    if args.data == "digits":
        return load_digits(digits_path)
    if args.data == "text":
        return load_text(text_path(args), size(args, "seq"))
    g = torch.Generator().manual_seed(args.seed)
    if args.model == "transformer":
        x = torch.randint(16, (args.samples, size(args, "seq")), generator=g)
        return x, x.flip(1)
    features, classes = (10, 5) if args.model == "toy" else (64, 10)
    x = torch.randn(args.samples, features, generator=g)
    w = torch.randn(features, classes, generator=g)
    return x, (x @ w).argmax(1)


def loss_of(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
