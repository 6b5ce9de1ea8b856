// Full-model checkpoints for --save-init / --save-final: a name -> tensor dict pickled as
// torch.save does, so Python's torch.load reads it (the tests' PyTorch oracle starts from it).
#include <torch/serialize.h>

#include <fstream>
#include <iterator>
#include <stdexcept>

#include "engine/train/trainer.h"

namespace dpscope::train {

void save_state(torch::nn::Module& module, const std::string& path) {
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (const auto& item : module.named_parameters(true)) tensors.emplace_back(item.key(), item.value());
  for (const auto& item : module.named_buffers(true)) tensors.emplace_back(item.key(), item.value());
  save_tensors(tensors, path);
}

void save_tensors(const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                  const std::string& path) {
  c10::Dict<std::string, at::Tensor> state;
  for (const auto& [name, tensor] : tensors) {
    state.insert(name, tensor.detach().cpu().contiguous().clone());
  }
  const std::vector<char> bytes = torch::pickle_save(c10::IValue(state));
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    throw std::runtime_error("cannot write checkpoint " + path +
                             "; check that its directory exists and is writable");
  }
}

void load_state(torch::nn::Module& module, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read checkpoint " + path + "; check the path");
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  c10::IValue value;
  try {
    value = torch::pickle_load(bytes);
  } catch (const std::exception& error) {
    throw std::runtime_error("checkpoint " + path + " is not a pickled tensor dict (" +
                             error.what() + "); write it with --save-init/--save-final or torch.save");
  }
  if (!value.isGenericDict()) {
    throw std::runtime_error("checkpoint " + path + " holds no name -> tensor dict");
  }
  const c10::impl::GenericDict dict = value.toGenericDict();
  at::NoGradGuard no_grad;
  auto assign = [&](const std::string& name, const at::Tensor& target) {
    auto it = dict.find(name);
    if (it == dict.end()) {
      throw std::runtime_error("checkpoint " + path + " has no tensor '" + name +
                               "'; it was saved from a different model");
    }
    const at::Tensor source = it->value().toTensor();
    if (source.sizes() != target.sizes()) {
      throw std::runtime_error("checkpoint " + path + ": '" + name + "' has another shape than "
                               "the model's; it was saved from a different model");
    }
    target.detach().copy_(source);
  };
  for (const auto& item : module.named_parameters(true)) assign(item.key(), item.value());
  for (const auto& item : module.named_buffers(true)) assign(item.key(), item.value());
}

}  // namespace dpscope::train
