// GlooStore: lets Gloo's rendezvous (connectFullMesh) exchange its pair addresses through the
// run's c10d store, under a key prefix of its own per process group, as PyTorch's
// ProcessGroupGloo does with its GlooStore and a PrefixStore.
#pragma once

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace c10d {
class Store;
}

namespace dpscope::comm {

// Thread-safety: as the c10d store it wraps (TCPStore and HashStore serialise their calls).
// Holds a reference to the store for its own lifetime only.
class GlooStore : public gloo::rendezvous::Store {
 public:
  // Every key Gloo uses becomes `prefix + key`; waits without a timeout of their own give up
  // after `timeout`.
  GlooStore(std::shared_ptr<c10d::Store> store, std::string prefix,
            std::chrono::milliseconds timeout);

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  std::vector<std::string> prefixed(const std::vector<std::string>& keys) const;

  std::shared_ptr<c10d::Store> store_;
  const std::string prefix_;
  const std::chrono::milliseconds timeout_;
};

}  // namespace dpscope::comm
