// TwoHosts: two network namespaces joined by a veth pair, so that tests can run `dpscope launch
// --nnodes 2` (or torchrun) as two hosts on one machine whose ranks meet over a real network link.
// Needs root for `ip netns`; a test skips when ready() is false.
#pragma once

#include <unistd.h>

#include <string>

#include "tests/test_util.h"

namespace dpscope::testing {

// Two namespaces, A (10.77.0.1) and B (10.77.0.2), named after this process so parallel runs do
// not meet; removed again (with their veth ends) when the object dies.
class TwoHosts {
 public:
  TwoHosts() : a_("dps" + std::to_string(::getpid()) + "a"), b_("dps" + std::to_string(::getpid()) + "b") {
    const std::string va = "v" + a_, vb = "v" + b_;
    const std::string setup = "ip netns add " + a_ + " && ip netns add " + b_ +
                              " && ip link add " + va + " type veth peer name " + vb +
                              " && ip link set " + va + " netns " + a_ + " && ip link set " + vb +
                              " netns " + b_ + " && ip -n " + a_ + " addr add 10.77.0.1/24 dev " +
                              va + " && ip -n " + b_ + " addr add 10.77.0.2/24 dev " + vb +
                              " && ip -n " + a_ + " link set " + va + " up && ip -n " + b_ +
                              " link set " + vb + " up && ip -n " + a_ + " link set lo up && ip -n " +
                              b_ + " link set lo up";
    auto result = run_command(setup);
    ready_ = result.exit_code == 0;
    error_ = result.output;
  }
  ~TwoHosts() { run_command("ip netns del " + a_ + "; ip netns del " + b_); }
  bool ready() const { return ready_; }
  const std::string& error() const { return error_; }
  const std::string& a() const { return a_; }
  const std::string& b() const { return b_; }

 private:
  std::string a_, b_;
  bool ready_ = false;
  std::string error_;
};

}  // namespace dpscope::testing
