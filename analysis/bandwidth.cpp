// algbw and busbw of one collective (bandwidth.h, Note [Bus bandwidth]): nccl-tests' size of each
// op from the bytes the trace counts, and its bus factor.
#include "analysis/bandwidth.h"

namespace dpscope::analysis {

std::optional<Bandwidth> bandwidth_of(trace::CollectiveOp op, int64_t bytes, int ranks, int64_t transfer_ns) {
  if (op == trace::CollectiveOp::Barrier || bytes <= 0 || ranks < 2 || transfer_ns <= 0) return std::nullopt;
  const double n = ranks;
  double size = static_cast<double>(bytes);
  double bus_factor = 1;
  switch (op) {
    case trace::CollectiveOp::AllReduce: bus_factor = 2 * (n - 1) / n; break;
    case trace::CollectiveOp::AllGather:  // the trace counts one rank's input: the output is n of them
      size *= n;
      bus_factor = (n - 1) / n;
      break;
    case trace::CollectiveOp::ReduceScatter:
    case trace::CollectiveOp::AllToAll: bus_factor = (n - 1) / n; break;
    case trace::CollectiveOp::Broadcast:
    case trace::CollectiveOp::SendRecv:
    case trace::CollectiveOp::Barrier: break;
  }
  // Bytes over nanoseconds are GB/s; 8 bits a byte make them Gb/s.
  const double algbw = size * 8 / static_cast<double>(transfer_ns);
  return Bandwidth{algbw, algbw * bus_factor};
}

}  // namespace dpscope::analysis
