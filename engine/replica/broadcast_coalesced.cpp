// The coalesced broadcast (broadcast_coalesced.h): tensors packed by dtype and device into flat
// buffers, a bounded number of broadcasts in flight, each unpacked into place when done.
#include "engine/replica/broadcast_coalesced.h"

#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>

#include <deque>
#include <utility>

namespace dpscope::replica {

void broadcast_coalesced(comm::ProcessGroup& group, const std::vector<at::Tensor>& tensors,
                         int root, int64_t buffer_bytes, int max_in_flight,
                         comm::CollectiveTag tag) {
  // Chunks of consecutive-by-dtype tensors, as PyTorch's take_tensors groups them.
  struct Chunk {
    std::vector<size_t> members;
    int64_t numel = 0;
    int64_t bytes = 0;
  };
  std::vector<Chunk> chunks;
  std::vector<std::pair<c10::ScalarType, c10::Device>> open_keys;
  std::vector<Chunk> open;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& tensor = tensors[i];
    const int64_t bytes = tensor.numel() * tensor.element_size();
    const auto key = std::make_pair(tensor.scalar_type(), tensor.device());
    size_t k = 0;
    while (k < open_keys.size() && open_keys[k] != key) ++k;
    if (k == open_keys.size()) {
      open_keys.push_back(key);
      open.emplace_back();
    }
    if (!open[k].members.empty() && open[k].bytes + bytes > buffer_bytes) {
      chunks.push_back(std::move(open[k]));
      open[k] = Chunk{};
    }
    open[k].members.push_back(i);
    open[k].numel += tensor.numel();
    open[k].bytes += bytes;
  }
  for (Chunk& chunk : open) {
    if (!chunk.members.empty()) chunks.push_back(std::move(chunk));
  }

  struct InFlight {
    const Chunk* chunk;
    at::Tensor flat;
    comm::WorkHandle work;
  };
  std::deque<InFlight> in_flight;
  auto finish_oldest = [&] {
    InFlight done = std::move(in_flight.front());
    in_flight.pop_front();
    done.work->wait();
    if (group.rank() == root) return;
    int64_t offset = 0;
    for (const size_t member : done.chunk->members) {
      const at::Tensor& tensor = tensors[member];
      tensor.detach().copy_(done.flat.narrow(0, offset, tensor.numel()).view(tensor.sizes()));
      offset += tensor.numel();
    }
  };
  for (const Chunk& chunk : chunks) {
    if (static_cast<int>(in_flight.size()) >= max_in_flight) finish_oldest();
    const at::Tensor& first = tensors[chunk.members.front()];
    at::Tensor flat;
    if (group.rank() == root) {
      std::vector<at::Tensor> parts;
      for (const size_t member : chunk.members) parts.push_back(tensors[member].detach().reshape({-1}));
      flat = at::cat(parts);
    } else {
      flat = at::empty({chunk.numel}, first.options().requires_grad(false));
    }
    comm::WorkHandle work = group.broadcast(flat, root, tag);
    in_flight.push_back({&chunk, flat, std::move(work)});
  }
  while (!in_flight.empty()) finish_oldest();
}

}  // namespace dpscope::replica
