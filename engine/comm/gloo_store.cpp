// GlooStore (see gloo_store.h): Gloo's rendezvous store interface over a c10d store.
#include "engine/comm/gloo_store.h"

#include <torch/csrc/distributed/c10d/Store.hpp>

namespace dpscope::comm {

GlooStore::GlooStore(std::shared_ptr<c10d::Store> store, std::string prefix,
                     std::chrono::milliseconds timeout)
    : store_(std::move(store)), prefix_(std::move(prefix)), timeout_(timeout) {}

void GlooStore::set(const std::string& key, const std::vector<char>& data) {
  store_->set(prefix_ + key, std::vector<uint8_t>(data.begin(), data.end()));
}

std::vector<char> GlooStore::get(const std::string& key) {
  const std::vector<uint8_t> value = store_->get(prefix_ + key);
  return std::vector<char>(value.begin(), value.end());
}

void GlooStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void GlooStore::wait(const std::vector<std::string>& keys,
                     const std::chrono::milliseconds& timeout) {
  store_->wait(prefixed(keys), timeout);
}

std::vector<std::string> GlooStore::prefixed(const std::vector<std::string>& keys) const {
  std::vector<std::string> result;
  result.reserve(keys.size());
  for (const std::string& key : keys) result.push_back(prefix_ + key);
  return result;
}

}  // namespace dpscope::comm
