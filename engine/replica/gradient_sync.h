// Whether a data-parallel strategy synchronises gradients in its next backward, and the one guard
// that turns that off for gradient accumulation (PyTorch's DDP and FSDP1 no_sync(), FSDP2's
// set_requires_gradient_sync(False)). DDP, FSDP1 and FSDP2 each own a GradientSync.
#pragma once

namespace dpscope::replica {

// A strategy's switch: on by default, off while a NoSyncGuard on it lives. Read by the
// strategy's backward (a reduction is skipped while off). Not thread-safe: turned and read on
// the training thread, between iterations.
class GradientSync {
 public:
  bool enabled() const { return enabled_; }

 private:
  friend class NoSyncGuard;
  bool enabled_ = true;
};

// Gradient accumulation: while the guard lives, backward passes accumulate into .grad locally
// without communication; the first forward+backward after it synchronises the accumulated
// gradients. Guards nest: each restores what it found.
class NoSyncGuard {
 public:
  explicit NoSyncGuard(GradientSync& sync) : sync_(sync), previous_(sync.enabled_) {
    sync_.enabled_ = false;
  }
  ~NoSyncGuard() { sync_.enabled_ = previous_; }
  NoSyncGuard(const NoSyncGuard&) = delete;
  NoSyncGuard& operator=(const NoSyncGuard&) = delete;

 private:
  GradientSync& sync_;
  bool previous_;
};

}  // namespace dpscope::replica
