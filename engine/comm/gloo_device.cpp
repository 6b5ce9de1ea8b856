// Network interface selection for the Gloo backend (see gloo_device.h).
#include "engine/comm/gloo_device.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gloo/transport/tcp/device.h>

#include <cstdlib>
#include <mutex>
#include <set>

#include "engine/comm/process_group.h"

namespace dpscope::comm {
namespace {

std::set<std::string> interface_names() {
  std::set<std::string> names;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return names;
  for (ifaddrs* it = list; it; it = it->ifa_next) names.insert(it->ifa_name);
  ::freeifaddrs(list);
  return names;
}

// The local address the kernel would send from to reach host:port. Connecting a UDP socket
// sends nothing; it only picks the route. Empty when there is no route.
std::string local_address_towards(const std::string& host, const std::string& port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) return "";
  std::string address;
  for (addrinfo* it = found; it && address.empty(); it = it->ai_next) {
    const int fd = ::socket(it->ai_family, it->ai_socktype, it->ai_protocol);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t length = sizeof(local);
    if (::connect(fd, it->ai_addr, it->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0) {
      char text[INET6_ADDRSTRLEN] = {};
      const void* raw = local.ss_family == AF_INET6
                            ? static_cast<const void*>(
                                  &reinterpret_cast<const sockaddr_in6*>(&local)->sin6_addr)
                            : static_cast<const void*>(
                                  &reinterpret_cast<const sockaddr_in*>(&local)->sin_addr);
      if (::inet_ntop(local.ss_family, raw, text, sizeof(text))) address = text;
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return address;
}

// See make_gloo_device in gloo_device.h. A program that installed a handler or chose SIG_IGN
// itself keeps its choice.
void ignore_sigpipe_unless_set() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction current {};
    if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
      ::signal(SIGPIPE, SIG_IGN);
    }
  });
}

}  // namespace

GlooDevice make_gloo_device(int rank, int size) {
  ignore_sigpipe_unless_set();
  gloo::transport::tcp::attr attr;
  std::string description;
  const std::string who = "rank " + std::to_string(rank) + ": ";
  const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
  const char* master = std::getenv("MASTER_ADDR");
  if (size == 1) {
    attr.hostname = "127.0.0.1";
    description = "address 127.0.0.1 (a single rank)";
  } else if (ifname && *ifname) {
    const std::set<std::string> names = interface_names();
    if (!names.count(ifname)) {
      std::string known;
      for (const std::string& name : names) known += (known.empty() ? "" : ", ") + name;
      throw CommError(who + "GLOO_SOCKET_IFNAME=" + ifname +
                      " names no network interface of this host (it has: " + known +
                      "); set it to the interface the ranks reach each other on, or unset it");
    }
    attr.iface = ifname;
    description = std::string("interface ") + ifname + " (GLOO_SOCKET_IFNAME)";
  } else if (master && *master) {
    const char* port = std::getenv("MASTER_PORT");
    // Any port will do to pick a route; 29500 is torchrun's default.
    attr.hostname = local_address_towards(master, port && *port ? port : "29500");
    if (attr.hostname.empty()) {
      throw CommError(who + "this host has no route to MASTER_ADDR=" + master +
                      ", so Gloo cannot pick an address the other ranks can reach; check "
                      "MASTER_ADDR or set GLOO_SOCKET_IFNAME to the interface to use");
    }
    description = "address " + attr.hostname + " (the route to MASTER_ADDR=" + master + ")";
  } else {
    attr.hostname = "127.0.0.1";
    description = "address 127.0.0.1 (no MASTER_ADDR: a single host)";
  }
  try {
    return {gloo::transport::tcp::CreateDevice(attr), description};
  } catch (const std::exception& error) {
    throw CommError(who + "cannot listen for Gloo on " + description + ": " + error.what() +
                    "; set GLOO_SOCKET_IFNAME to an interface with an address");
  }
}

}  // namespace dpscope::comm
