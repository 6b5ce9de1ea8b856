// GlooReduceScatter: Gloo's halving-doubling reduce-scatter (gloo/reduce_scatter.h), whose
// schedule Debian's Gloo runs with a race that corrupts results; this runs the same schedule on
// the same buffers without it. See Note [Gloo reduce-scatter]. Only engine/comm/ includes it.
#pragma once

#include <gloo/reduce_scatter.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

namespace dpscope::comm {

// Note [Gloo reduce-scatter]
// What gloo::ReduceScatterHalvingDoubling<T>(context, {buf}, count, recvElems, fn).run() does in
// Debian's Gloo (0.0~git20220518.5b14351; read from gloo/reduce_scatter.h and measured with
// ranks on one host):
// - recvElems partitions the reduced [0, count) in rank order: rank r gets elements
//   [recvElems[0] + ... + recvElems[r-1], + recvElems[r]). They land at the START of buf,
//   buf[0, recvElems[r]), not at their offset; the rest of buf is left holding partial sums.
// - The ranks form binary blocks, largest first (7 ranks: 0-3, 4-5, 6). Each block does
//   recursive halving (partner rank ^ 2^i) over count cut into 2^floor(log2 size) chunks of
//   ceil(count / 2^floor(log2 size)); a smaller block then sends its partial sums to the next
//   larger one, so the largest block ends with one fully reduced chunk per rank, at the
//   bit-reversed chunk index (rank 1 of 4 holds chunk 2). A distribution phase sends every rank
//   the pieces of those chunks that its recvElems range covers.
// - Equal recvElems of 1, 3, 7, 1001 per rank, world sizes 1..8, and uneven positive recvElems
//   (60 random cases, 2..7 ranks) give correct results with small messages and nothing else
//   run on the context before (but see the race below).
//   A recvElems entry of 0 inside another rank's chunk ([1,0,2] on 3 ranks, [5,0,5,0] on 4)
//   hangs: the holder sends a zero-length piece and waits for an acknowledgement that never
//   comes. So it is not non-power-of-two sizes that fail, but zero counts, for any size.
// - The race: sends are asynchronous (the transport reads buf until the bytes are in the
//   socket), yet the distribution phase copies into buf[0, ...) without waiting for the earlier
//   sends from that region, and run() returns without waiting for the sends to the next larger
//   block at all. A send is deferred to Gloo's event loop whenever an earlier one on that pair is
//   still queued or the socket cannot take it at once, and Gloo shrinks each socket's send buffer
//   to the kernel's minimum of a few KiB (it sets SO_SNDBUF to the size of the first message, a
//   52-byte notification; strace shows it), so after a collective with messages of a few KiB even
//   an 8-byte send gets EAGAIN and is deferred. Measured: on 3 and 5 ranks after an all-gather of
//   8 KiB per rank, about one reduce-scatter in three had rank 0 add the value the last rank had
//   just written to its buf[0] instead of that rank's partial sum (or freed memory, when the
//   algorithm was destroyed first); on 2 ranks with 8 MiB per rank and no other collective, a run
//   gave rank 0 32780 wrong elements at the end of its chunk.
// - A second race, harmless but real (ThreadSanitizer reports it): every notification buffer,
//   sent and received, is the one int dummy_, and send() sends its whole 4 bytes, so Gloo's event
//   loop thread recv()s a peer's notification into dummy_ while this thread writev()s dummy_ to
//   another peer.
// GlooReduceScatter keeps Gloo's construction (blocks, slots, buffers, distribution maps) and
// runs the same schedule, waiting for its sends from buf before the distribution phase writes
// into it, and for every send before returning. Its notifications carry no bytes (send(0, 0):
// a zero-length message on the slot completes the peer's waitRecv all the same), so dummy_ is
// never read or written. reduce_scatter uses it with equal, non-empty
// counts (an empty collective skips communication), so no padding is needed.
//
// Thread-safety: an instance is constructed and run by one thread. The ranks of the context must
// construct their instances in the same order (each takes 4 * size * (size - 1) slots from the
// context's int slot counter, which therefore allows about 2^31 / that many instances).
template <typename T>
class GlooReduceScatter : public gloo::ReduceScatterHalvingDoubling<T> {
  using Base = gloo::ReduceScatterHalvingDoubling<T>;

 public:
  // Reduces the count elements at `buffer` across the context with `fn`; rank r's counts[r]
  // elements of the result end up at buffer[0, counts[r]). Every count must be positive.
  GlooReduceScatter(const std::shared_ptr<gloo::Context>& context, T* buffer, int count,
                    std::vector<int> counts, const gloo::ReductionFunction<T>* fn)
      : Base(context, {buffer}, count, std::move(counts), fn) {}

  void run() override {
    if (this->contextSize_ == 1) return;  // the input is the result
    T* const buffer = this->ptrs_[0];
    const size_t count = static_cast<size_t>(this->count_);
    const int me = this->context_->rank;
    const uint32_t steps = this->stepsWithinBlock_;

    // 1. Recursive halving within this rank's binary block.
    size_t scratch = 0;  // where the received half of step i lies in recvBuf_
    size_t half = steps > 0 ? this->chunkSize_ << (this->steps_ - 1) : count;
    for (uint32_t i = 0; i < steps; ++i) {
      if (this->sendOffsets_[i] < count) {
        this->sendDataBufs_[i]->send(this->sendOffsets_[i] * sizeof(T),
                                     this->sendCounts_[i] * sizeof(T));
      }
      if (this->recvOffsets_[i] < count) {
        this->recvDataBufs_[i]->waitRecv();
        this->fn_->call(&buffer[this->recvOffsets_[i]], &this->recvBuf_[scratch],
                        this->recvCounts_[i]);
      }
      scratch += half;
      half >>= 1;
      this->sendNotificationBufs_[i]->send(0, 0);  // zero bytes: see the Note
    }

    // 2. Add the next smaller block's partial sums (a rank with a smaller block has steps > 0).
    if (this->nextSmallerBlockSize_ != 0 && this->smallerBlockRecvDataBuf_ != nullptr) {
      this->smallerBlockRecvDataBuf_->waitRecv();
      this->fn_->call(&buffer[this->recvOffsets_[steps - 1]], &this->recvBuf_[scratch],
                      this->recvCounts_[steps - 1]);
    }

    // 3. Hand this block's partial sums to the next larger block.
    const size_t held = steps > 0 ? this->recvCounts_[steps - 1] : count;
    const size_t held_at = steps > 0 ? this->recvOffsets_[steps - 1] : 0;
    const size_t piece = this->sendCountToLargerBlock_;
    auto sends_to_larger = [&](auto&& each) {
      if (this->nextLargerBlockSize_ == 0 || held == 0) return;
      for (size_t i = 0; i < this->largerBlockSendDataBufs_.size(); ++i) {
        if (piece * i < held) each(i);
      }
    };
    sends_to_larger([&](size_t i) {
      this->largerBlockSendDataBufs_[i]->send((held_at + i * piece) * sizeof(T),
                                              std::min(piece, held - piece * i) * sizeof(T));
    });

    // 4. Send the pieces of this rank's reduced chunk to the ranks that own them.
    size_t index = 0;
    for (const auto& to : this->distMapForSend_) {
      if (to.rank != me) {
        this->distSendDataBufs_[index++]->send(to.offset * sizeof(T), to.itemCount * sizeof(T));
      }
    }

    // The fix: every send so far reads from buffer, whose start step 5 overwrites.
    for (uint32_t i = 0; i < steps; ++i) {
      if (this->sendOffsets_[i] < count) this->sendDataBufs_[i]->waitSend();
    }
    sends_to_larger([&](size_t i) { this->largerBlockSendDataBufs_[i]->waitSend(); });
    for (auto& sent : this->distSendDataBufs_) sent->waitSend();

    // 5. Collect this rank's pieces at the start of buffer, acknowledging each remote one.
    index = 0;
    size_t out = 0;
    size_t notify = steps;
    for (const auto& from : this->distMapForRecv_) {
      if (from.rank != me) {
        this->distRecvDataBufs_[index++]->waitRecv();
        std::memcpy(static_cast<void*>(&buffer[out]), &this->recvBufDist_[from.offset],
                    from.itemCount * sizeof(T));
        this->sendNotificationBufs_[notify++]->send(0, 0);  // zero bytes: see the Note
      } else if (from.offset != out) {
        std::memmove(static_cast<void*>(&buffer[out]), &buffer[from.offset],
                     from.itemCount * sizeof(T));
      }
      out += from.itemCount;
    }

    // 6. Wait until every peer has consumed what it was sent, and our acknowledgements are out.
    for (auto& received : this->recvNotificationBufs_) received->waitRecv();
    for (auto& sent : this->sendNotificationBufs_) sent->waitSend();
  }
};

}  // namespace dpscope::comm
