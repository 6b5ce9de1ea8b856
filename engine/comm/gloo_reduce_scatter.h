// ring_reduce_scatter: the Gloo backend's reduce-scatter, a ring over Gloo's unbound buffers (the
// transport gloo::allreduce and gloo::allgather use), instead of Debian's Gloo's halving-doubling
// ReduceScatter. See Note [Gloo reduce-scatter]. Only engine/comm/ includes it.
#pragma once

#include <gloo/algorithm.h>
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace dpscope::comm {

// Note [Gloo reduce-scatter]
// Debian's Gloo (0.0~git20220518.5b14351) has a reduce-scatter, ReduceScatterHalvingDoubling,
// that dpscope does not use, for two reasons measured with ranks on one host:
// - It races: its sends are asynchronous, yet its distribution phase writes into the buffer
//   they read from without waiting for them, and run() returns before its sends to the next
//   larger block are done. After an 8 KiB all-gather on 3 and 5 ranks, about one reduce-scatter
//   in three added the wrong value; on 2 ranks, an 8 MiB one gave 32780 wrong elements. A
//   recvElems entry of 0 hangs it.
// - It runs on bound buffers, and every send on a bound buffer sizes the connection's socket
//   send buffer to that message (tcp::Pair::send sets SO_SNDBUF whenever a message is larger
//   than any before). Setting SO_SNDBUF turns off the kernel's auto-tuning for good, and the
//   unbound buffers of every later all-reduce and all-gather on the same connections never
//   resize it. After three reduce-scatters of 16 KiB, a 4 MiB all-reduce took 11 to 23 times
//   longer on 2 ranks and 3 s instead of 8 ms on 4, at every later call: the bytes crawl through
//   a send buffer of 8 KiB (bench_reduce_scatter, bench/README.md).
// ring_reduce_scatter is the ring NCCL runs and the link model charges ((n - 1) steps of S/n,
// Note [Link emulation]), on unbound buffers only, so no socket is ever resized:
// - The input is n rows of `count` elements (rank-major); rank r ends with the reduction of every
//   rank's row r in its own row r. The other rows are left holding partial results.
// - At step k (0 <= k <= n - 2) rank r sends row (r + k + 1) mod n to rank r - 1 and reduces the
//   row (r + k + 2) mod n it receives from rank r + 1 into its own: the direction of Gloo's ring
//   all-reduce. Row r + 1 is sent as it was given; every other row is written once (at the step
//   before it is sent, or last: row r) and never after it is sent, so a send never reads memory
//   being written.
// - So row c is reduced in ring order, ((x[c-1] + x[c-2]) + ...) + x[c], the same order on every
//   rank and in every run, and the order in which Gloo's ring all-reduce adds the elements of its
//   c-th chunk: where the all-reduce's chunks and these rows cover the same elements (all but a
//   few at each boundary; Gloo rounds its chunks up), reduce-scatter and all-reduce give the same
//   bits on any number of ranks, as they always do on 2 (x[0] + x[1] either way).
// - Each row moves in segments of at most kRingSegmentBytes, two receives in flight: a segment
//   reduced at step k is sent on at step k + 1 at once, so the ring is pipelined as Gloo's own
//   all-reduce ring is. Messages between two ranks on one slot match in order (Gloo's unbound
//   buffers queue them), so the receiver's segments line up with the sender's.
//
// Thread-safety: one call at a time per context and tag; every rank of the context must make the
// call with the same tag, count and element type. Blocks until this rank's row is reduced and
// its sends are out; throws gloo::IoException on a timeout or a broken connection.
constexpr size_t kRingSegmentBytes = size_t{1} << 20;

// A slot prefix of dpscope's own, next to Gloo's (gloo/types.h uses 0x01 to 0x08).
constexpr uint8_t kRingReduceScatterSlotPrefix = 0x21;

template <typename T>
void ring_reduce_scatter(gloo::Context& context, T* rows, size_t count,
                         const gloo::ReductionFunction<T>* fn, uint32_t tag,
                         std::chrono::milliseconds timeout) {
  const int n = context.size;
  if (n == 1 || count == 0) return;  // the input is the result
  const int me = context.rank;
  const int left = (me + n - 1) % n;  // sends go here
  const int right = (me + 1) % n;     // receives come from here
  const uint64_t slot = gloo::Slot::build(kRingReduceScatterSlotPrefix, tag);

  const size_t segment = std::max<size_t>(1, std::min(count, kRingSegmentBytes / sizeof(T)));
  const size_t segments = (count + segment - 1) / segment;
  const size_t steps = static_cast<size_t>(n - 1);
  auto row = [&](size_t step, size_t ahead) {  // row (me + step + ahead) mod n
    return (static_cast<size_t>(me) + step + ahead) % static_cast<size_t>(n);
  };
  auto length = [&](size_t j) { return std::min(segment, count - j * segment); };

  std::unique_ptr<gloo::transport::UnboundBuffer> data =
      context.createUnboundBuffer(rows, static_cast<size_t>(n) * count * sizeof(T));
  std::vector<T> scratch(2 * segment);
  std::unique_ptr<gloo::transport::UnboundBuffer> received =
      context.createUnboundBuffer(scratch.data(), scratch.size() * sizeof(T));

  // Receives are numbered q = step * segments + j and land in half q % 2 of scratch.
  const size_t total = steps * segments;
  auto post_receive = [&](size_t q) {
    if (q < total) {
      received->recv(right, slot, (q % 2) * segment * sizeof(T), length(q % segments) * sizeof(T));
    }
  };
  size_t sends = 0;
  auto send_segment = [&](size_t r, size_t j) {
    data->send(left, slot, (r * count + j * segment) * sizeof(T), length(j) * sizeof(T));
    ++sends;
  };

  post_receive(0);
  post_receive(1);
  for (size_t j = 0; j < segments; ++j) send_segment(row(0, 1), j);
  for (size_t q = 0; q < total; ++q) {
    const size_t step = q / segments;
    const size_t j = q % segments;
    received->waitRecv(timeout);
    const size_t r = row(step, 2);
    fn->call(rows + r * count + j * segment, scratch.data() + (q % 2) * segment, length(j));
    post_receive(q + 2);
    if (step + 1 < steps) send_segment(r, j);
  }
  for (size_t i = 0; i < sends; ++i) data->waitSend(timeout);
}

}  // namespace dpscope::comm
