// The C interface of basin-dist to libtorch's c10d: a TCPStore rendezvous, a Gloo process group,
// and the three collectives data-parallel training needs (all-reduce, broadcast, barrier).
// Every entry point catches C++ exceptions and returns them as a malloc'd message (freed by
// basin_dist_free_message), so no exception ever crosses into Rust.

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Group {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
  std::chrono::milliseconds timeout;
};

char* message(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p != nullptr) {
    std::memcpy(p, s.c_str(), s.size() + 1);
  }
  return p;
}

template <typename F>
int guarded(char** err, F&& body) {
  try {
    body();
    return 0;
  } catch (const c10::Error& e) {
    *err = message(e.what_without_backtrace());
  } catch (const std::exception& e) {
    *err = message(e.what());
  } catch (...) {
    *err = message("unknown C++ exception");
  }
  return 1;
}

bool loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1";
}

}  // namespace

extern "C" {

// Rendezvous at addr:port and connect a Gloo group of `world` ranks; `serve`: this rank serves
// the store (rank 0, unless a launcher's agent already does). `ifname`, if not empty, is the
// network interface Gloo binds (GLOO_SOCKET_IFNAME).
int basin_dist_new_gloo(const char* addr, uint16_t port, int rank, int world, int serve,
                        int64_t timeout_ms, const char* ifname, void** out, char** err) {
  return guarded(err, [&] {
    const std::string host(addr);
    const std::chrono::milliseconds timeout(timeout_ms);
    c10d::TCPStoreOptions opts;
    opts.port = port;
    opts.isServer = serve != 0;
    opts.numWorkers = static_cast<std::size_t>(world);
    opts.waitWorkers = true;
    opts.timeout = timeout;
    auto store = c10::make_intrusive<c10d::TCPStore>(host, opts);
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    const std::string iface(ifname);
    if (!iface.empty()) {
      options->devices.push_back(
          c10d::ProcessGroupGloo::createDeviceForInterface(iface));
    } else if (loopback(host)) {
      options->devices.push_back(
          c10d::ProcessGroupGloo::createDeviceForHostname(host));
    } else {
      options->devices.push_back(
          c10d::ProcessGroupGloo::createDefaultDevice());
    }
    auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, options);
    *out = new Group{store, pg, timeout};
  });
}

// In-place all-reduce of a dense CPU tensor; op is c10d::ReduceOp::RedOpType (0 sum, 3 min, 4 max).
int basin_dist_all_reduce(void* group, void* tensor, int op, char** err) {
  return guarded(err, [&] {
    auto* g = static_cast<Group*>(group);
    std::vector<at::Tensor> v{*static_cast<at::Tensor*>(tensor)};
    c10d::AllreduceOptions o;
    o.reduceOp = c10d::ReduceOp(static_cast<c10d::ReduceOp::RedOpType>(op));
    o.timeout = g->timeout;
    g->pg->allreduce(v, o)->wait(g->timeout);
  });
}

// In-place broadcast of a dense CPU tensor from `root`.
int basin_dist_broadcast(void* group, void* tensor, int root, char** err) {
  return guarded(err, [&] {
    auto* g = static_cast<Group*>(group);
    std::vector<at::Tensor> v{*static_cast<at::Tensor*>(tensor)};
    c10d::BroadcastOptions o;
    o.rootRank = root;
    o.timeout = g->timeout;
    g->pg->broadcast(v, o)->wait(g->timeout);
  });
}

int basin_dist_barrier(void* group, char** err) {
  return guarded(err, [&] {
    auto* g = static_cast<Group*>(group);
    c10d::BarrierOptions o;
    o.timeout = g->timeout;
    g->pg->barrier(o)->wait(g->timeout);
  });
}

void basin_dist_free(void* group) { delete static_cast<Group*>(group); }

void basin_dist_free_message(char* m) { std::free(m); }

}  // extern "C"
