"""Python twins of engine/models (same parameter names and registration order) and of the data
`dpscope train` trains on, for the PyTorch DDP oracle. Run with /usr/bin/python3 (torch 1.13)."""
import gzip
import math

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


def make_model(args, features):
    if args.model == "toy":
        return Toy()
    if args.model == "mlp":
        return Mlp(features, args.hidden, args.layers, 10)
    if args.model == "branch":
        return Branch(features, args.hidden, 10)
    if args.model == "cnn":
        return Cnn(10)
    if args.model == "transformer":
        return TinyTransformer(16, 8, 32)
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


def load_data(args, digits_path):
    if args.data == "digits":
        return load_digits(digits_path)
    g = torch.Generator().manual_seed(args.seed)
    if args.model == "transformer":
        x = torch.randint(16, (args.samples, 8), generator=g)
        return x, x.flip(1)
    features, classes = (10, 5) if args.model == "toy" else (64, 10)
    x = torch.randn(args.samples, features, generator=g)
    w = torch.randn(features, classes, generator=g)
    return x, (x @ w).argmax(1)


def loss_of(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
