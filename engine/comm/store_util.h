// Helpers for what ranks keep in the rendezvous store (c10d::Store): value conversions, the
// host name ranks announce, per-instance key prefixes and the leave-together handshake. Shared
// by the rendezvous, the process-group base and the backends.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace c10d {
class Store;
}

namespace dpscope::comm {

std::vector<uint8_t> to_bytes(std::string_view text);
std::string from_bytes(const std::vector<uint8_t>& bytes);

// This host's name, as ranks announce it at the rendezvous.
std::string host_name();

// "dpscope/pg<group_id>/<backend><n>/": the store keys of one group instance. Ranks create their
// groups in the same order, so a per-process count of the groups made with one backend and
// group_id is the same on every rank and keeps a re-created group from reading what its
// predecessor left in the store. Thread-safe.
std::string group_instance_prefix(std::string_view backend, int16_t group_id);

// The exit handshake of a group: marks `rank` as leaving under `prefix` and waits, at most
// min(timeout, 10 s), until all `size` ranks have. Returns whether they all did; never throws
// (a peer that crashed or a store host that is gone only makes it return false).
bool leave_together(c10d::Store& store, const std::string& prefix, int rank, int size,
                    std::chrono::milliseconds timeout);

}  // namespace dpscope::comm
