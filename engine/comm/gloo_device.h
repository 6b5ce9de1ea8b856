// Which network interface a Gloo group listens on: GLOO_SOCKET_IFNAME when set (as in
// PyTorch), else the local address that routes to MASTER_ADDR, else loopback.
#pragma once

#include <gloo/transport/device.h>

#include <memory>
#include <string>

namespace dpscope::comm {

struct GlooDevice {
  std::shared_ptr<gloo::transport::Device> device;
  // Where it listens and why, for error messages: "interface eth1 (GLOO_SOCKET_IFNAME)".
  std::string description;
};

// Creates a Gloo TCP device for `rank` of a group of `size` ranks, from the environment:
//   GLOO_SOCKET_IFNAME=NAME  the address of interface NAME (a CommError lists the interfaces this
//                            host has when NAME is not one of them);
//   MASTER_ADDR[/MASTER_PORT] the local address of the route to MASTER_ADDR, so that ranks on
//                            other hosts can reach this one (a CommError when there is none);
//   neither                  127.0.0.1 (a single host).
// A group of one rank never connects and always listens on 127.0.0.1.
//
// Also makes the process ignore SIGPIPE, unless the program set its own disposition: Gloo's TCP
// pairs send with writev, which raises SIGPIPE when the peer's end is already closed, and the
// default action kills the process without a word. A peer rank that died must fail this one's
// collective with a CommError that names it instead (Python, and so PyTorch, ignores SIGPIPE).
// Thread-safe (reads the environment; sets the disposition once).
GlooDevice make_gloo_device(int rank, int size);

}  // namespace dpscope::comm
