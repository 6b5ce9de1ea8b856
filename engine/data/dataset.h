// In-memory data sets the engine trains on: digits (data/digits.csv.gz), a text cut into
// character samples (data/opticks.txt.gz) and synthetic tasks made from a seeded generator that
// Python's torch reproduces exactly (the tests' PyTorch oracle).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace dpscope::data {

// Rows of inputs and targets. x: float32 [N, ...] (features) or int64 [N, T] (tokens);
// y: int64 [N] (classes) or [N, T] (tokens).
struct Dataset {
  at::Tensor x;
  at::Tensor y;
  int64_t size() const { return x.defined() ? x.size(0) : 0; }
  // Rows `indices` (int64 list) of x and y, as new contiguous tensors. Throws std::out_of_range
  // naming the first index outside [0, size()).
  Dataset rows(const std::vector<int64_t>& indices) const;
  // Rows [begin, end), as views of x and y (no copy). Throws std::out_of_range for a bad range.
  Dataset slice(int64_t begin, int64_t end) const;
  // x and y on `device` (themselves when they are there already). The data set stays on the
  // host; a training loop moves each batch, as a PyTorch loop moves what its loader yields.
  Dataset to(c10::Device device) const;
  // Claims x's and y's storages as the run's data in the ownership registry, when one is
  // installed (Note [Ownership accounting]); what made them counted them as data already in the
  // tracking allocator. Returns the data set.
  Dataset& owned_as_data();
};

// ---- Digits -------------------------------------------------------------------------------
// Reads the UCI digits CSV (gzip or plain): 64 pixel columns (0..16) then the label, one row per
// image, optional header line. x = pixels / 16 as float32 [N, 64], y = label int64 [N], rows in
// file order. Throws std::runtime_error naming the file, the line and the fix.
Dataset load_digits(const std::string& path);
// Where data/digits.csv.gz is: $DPSCOPE_DATA_DIR/digits.csv.gz, else data/ beside the current
// directory or beside the executable's ../../ (build/bin -> repository), else the source tree's.
// Throws naming every place it looked.
std::string find_digits_file();

// ---- Text ---------------------------------------------------------------------------------
// A character-level language-modelling set. The vocabulary is the text's characters (UTF-8
// decoded; code points) in ascending order, token k the k-th. With T = `sequence`, sample i is
// the T + 1 characters from i * T: x its first T tokens, y its last T (the next character of
// each), so every character but the first is a target exactly once; n = (characters - 1) / T
// samples, in text order, the rest dropped. Python (tests/ddp/models.py, load_text):
//   text = gzip.open(path).read().decode("utf-8"); chars = sorted(set(text))
//   ids = torch.tensor([chars.index(c) for c in text]); n = (len(ids) - 1) // T
//   x = ids[:n * T].view(n, T); y = ids[1:n * T + 1].view(n, T)
struct TextSamples {
  Dataset samples;             // x, y: int64 [n, T]
  std::u32string vocabulary;   // code points, ascending
};
// Reads `path` (gzip or plain UTF-8). Throws std::runtime_error naming the file and, for bytes
// that are not UTF-8, their offset; std::invalid_argument naming --seq when the text is too short
// for one sample.
TextSamples load_text(const std::string& path, int64_t sequence);
// Where data/opticks.txt.gz is, looked for as find_digits_file looks for the digits.
std::string find_text_file();

// ---- Synthetic ----------------------------------------------------------------------------
// Classification: g = CPU generator seeded `seed`; x = randn(n, features, g);
// w = randn(features, classes, g); y = argmax(x @ w, 1). Python:
//   g = torch.Generator().manual_seed(seed); x = torch.randn(n, f, generator=g)
//   w = torch.randn(f, c, generator=g); y = (x @ w).argmax(1)
Dataset make_synthetic_classification(int64_t n, int64_t features, int64_t classes, uint64_t seed);
// Sequences (the tiny transformer's task, reversal): x = randint(vocab, (n, length), g) as int64,
// y = x flipped along dim 1. Python: x = torch.randint(vocab, (n, length), generator=g);
// y = x.flip(1).
Dataset make_synthetic_sequences(int64_t n, int64_t length, int64_t vocab, uint64_t seed);

}  // namespace dpscope::data
