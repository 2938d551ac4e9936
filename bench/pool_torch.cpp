// pool_torch: PyTorch's caching allocators running bench/pool_bench.c's two
// workloads through libtorch C++, for the side-by-side table of issue 10.
// Built on the GPU host by bench/pool_h200.sh (the build line is there); not
// built by Bazel (no libtorch here).
//
//   overhead torch_af  T: allocate(4096) on the thread's stream s1, free
//   overhead torch_2s  T: allocate(4096), recordStream(s2), free
//   serving  torch     T: per request a pinned staging tensor (the caching
//            host allocator) and a device tensor; copy in, add_(1) (the
//            kernel), copy back, all non_blocking on the thread's stream;
//            the device tensor is dropped at once (same stream: safe); a
//            cudaLaunchHostFunc after the copy back stamps completion; the
//            staging tensor is checked and dropped when its ring slot comes
//            round again (at most --inflight requests per thread), because
//            PyTorch cannot read a pinned tensor after dropping it.
//   --devices LIST (issue 13): the serving workload only, at each GPU count
//            g of LIST (e.g. 1,2,4,8), --threads threads PER GPU, each on
//            one GPU (grouped) or, with --spread, each with a stream on
//            every GPU sending its requests to them in turn; rows as
//            pool_bench's "multigpu" rows (no CPU split: "-").
// Rows print in pool_bench's format. Usage:
//   pool_torch [--threads 1,2,4,8,16] [--ms MS] [--bytes B] [--inflight N]
//              [--devices 1,2,4,8 [--spread]] [--pin (as pool_bench --pin)]
#include <ATen/ATen.h>
#ifndef NO_HOST_STATS  // pool_h200.sh retries with it if this fails
#include <ATen/core/CachingHostAllocator.h>
#endif
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

unsigned g_ms = 300, g_bytes = 65536, g_inflight = 32;
bool g_spread = false;  // --spread
bool g_pin = false;     // --pin: placed as pool_bench --pin places its threads

// --pin (bench/pool_bench.c says the same): request thread i on the i-th
// CPU the process may use (modulo their number); before CUDA starts, the
// main thread (so the threads it creates later) on the CPUs no request
// thread of the largest --threads uses, if any.
std::vector<int> g_pin_cpus;

void pin_to(const cpu_set_t &set, const char *who) {
  int e = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  if (e != 0) {
    std::fprintf(stderr, "FAILED: --pin: pthread_setaffinity_np (%s): %s\n",
                 who, std::strerror(e));
    std::exit(1);
  }
}

void pin_init(unsigned most) {
  cpu_set_t all;
  CPU_ZERO(&all);
  if (sched_getaffinity(0, sizeof(all), &all) != 0) {
    std::perror("FAILED: --pin: sched_getaffinity");
    std::exit(1);
  }
  for (int k = 0; k < CPU_SETSIZE; k++)
    if (CPU_ISSET(k, &all)) g_pin_cpus.push_back(k);
  unsigned n = unsigned(g_pin_cpus.size());
  if (most < n) {
    cpu_set_t rest;
    CPU_ZERO(&rest);
    for (unsigned i = most; i < n; i++) CPU_SET(g_pin_cpus[i], &rest);
    pin_to(rest, "main");
    std::printf("pinned: request thread i on CPU %d + i; the other threads "
                "on CPUs %d-%d\n", g_pin_cpus[0], g_pin_cpus[most],
                g_pin_cpus[n - 1]);
  } else {
    std::printf("pinned: request thread i on the i-th of %u CPUs (mod %u); "
                "the other threads unpinned\n", n, n);
  }
}

void pin_request(int id) {
  if (!g_pin) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(g_pin_cpus[size_t(id) % g_pin_cpus.size()], &one);
  pin_to(one, "request thread");
}
std::atomic<long> g_wrong{0};

uint64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             Clock::now().time_since_epoch())
      .count();
}

double process_cpu_ns() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e9 +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e3;
}

uint64_t thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

// A barrier: every worker and the main thread arrive, then all go.
struct Start {
  std::atomic<unsigned> arrived{0};
  unsigned n;
  void wait() {
    arrived.fetch_add(1);
    while (arrived.load() < n) std::this_thread::yield();
  }
};

struct Cell {
  std::string mode;
  unsigned gpus = 1;  // serving: GPUs 0..gpus-1
  Start start;
  std::atomic<uint64_t> deadline{0};
  std::atomic<uint64_t> iters{0}, req_cpu{0};
  std::vector<uint64_t> lat;  // filled under lat_mu
  std::mutex lat_mu;
};

void overhead_thread(Cell *c, int id) {
  c10::cuda::CUDAGuard dev(0);
  auto s1 = c10::cuda::getStreamFromPool(false, 0);
  auto s2 = c10::cuda::getStreamFromPool(false, 0);
  c10::cuda::CUDAStreamGuard on_s1(s1);  // allocations are on s1
  auto *alloc = c10::cuda::CUDACachingAllocator::get();
  bool two = c->mode == "torch_2s";
  pin_request(id);  // after its streams exist, as pool_bench
  c->start.wait();
  uint64_t n = 0, cpu0 = thread_cpu_ns();
  while ((n & 63) != 0 || now_ns() < c->deadline.load()) {
    c10::DataPtr p = alloc->allocate(4096);
    if (two) c10::cuda::CUDACachingAllocator::recordStream(p, s2);
    n++;
  }  // p is freed at the end of each iteration
  c->req_cpu += thread_cpu_ns() - cpu0;
  c->iters += n;
  s1.synchronize();
  s2.synchronize();
}

struct Slot {
  at::Tensor staging;
  int32_t seed = 0;
  uint64_t t0 = 0;
  std::atomic<uint64_t> done_ns{0};  // set by the host function
  bool busy = false;
};

void CUDART_CB stamp(void *arg) {  // no CUDA calls here
  static_cast<Slot *>(arg)->done_ns.store(now_ns(), std::memory_order_release);
}

// The slot's request completed: check the result, record the latency, drop
// the staging tensor.
void retire(Slot &s, std::vector<uint64_t> &lat, unsigned words) {
  uint64_t t;
  while ((t = s.done_ns.load(std::memory_order_acquire)) == 0)
    std::this_thread::yield();
  const int32_t *p = s.staging.data_ptr<int32_t>();
  for (unsigned i = 0; i < words; i++)
    if (p[i] != int32_t(s.seed + int32_t(i) + 1)) {
      g_wrong++;
      break;
    }
  lat.push_back(t - s.t0);
  s.staging = at::Tensor();
  s.busy = false;
}

void serving_thread(Cell *c, int id) {
  // The GPUs this thread serves, a stream on each: its own GPU (grouped)
  // or every GPU of the cell in turn (--spread).
  unsigned ns = g_spread ? c->gpus : 1;
  std::vector<int> devs(ns);
  std::vector<c10::cuda::CUDAStream> streams;
  std::vector<at::TensorOptions> gpu;
  for (unsigned k = 0; k < ns; k++) {
    devs[k] = g_spread ? int(k) : int(unsigned(id) % c->gpus);
    streams.push_back(c10::cuda::getStreamFromPool(false, devs[k]));
    gpu.push_back(at::TensorOptions().dtype(at::kInt).device(at::kCUDA,
                                                              devs[k]));
  }
  c10::cuda::CUDAGuard dev(devs[0]);
  c10::cuda::CUDAStreamGuard on_s(streams[0]);
  unsigned words = g_bytes / 4, K = g_inflight;
  std::vector<Slot> ring(K);
  std::vector<uint64_t> lat;
  lat.reserve(1 << 20);
  auto host = at::TensorOptions().dtype(at::kInt).pinned_memory(true);
  pin_request(id);  // after its streams exist, as pool_bench
  c->start.wait();
  uint64_t n = 0, cpu0 = thread_cpu_ns();
  while (now_ns() < c->deadline.load()) {
    Slot &sl = ring[n % K];
    if (sl.busy) retire(sl, lat, words);
    const unsigned k = unsigned(n % ns);
    c10::cuda::CUDAStreamGuard on_k(streams[k]);  // sets device and stream
    sl.seed = int32_t(id * 1000003 + n * 7);
    sl.t0 = now_ns();
    sl.done_ns.store(0, std::memory_order_relaxed);
    sl.busy = true;
    sl.staging = at::empty({int64_t(words)}, host);
    int32_t *p = sl.staging.data_ptr<int32_t>();
    for (unsigned i = 0; i < words; i++) p[i] = sl.seed + int32_t(i);
    at::Tensor d = at::empty({int64_t(words)}, gpu[k]);
    d.copy_(sl.staging, /*non_blocking=*/true);
    d.add_(1);
    sl.staging.copy_(d, /*non_blocking=*/true);
    if (cudaLaunchHostFunc(streams[k].stream(), stamp, &sl) != cudaSuccess) {
      std::fprintf(stderr, "FAILED: cudaLaunchHostFunc\n");
      std::exit(1);
    }
    d = at::Tensor();  // freed at once: its stream is streams[k]
    n++;
  }
  c->req_cpu += thread_cpu_ns() - cpu0;
  c->iters += n;
  for (auto &sl : ring)
    if (sl.busy) retire(sl, lat, words);
  for (auto &st : streams) st.synchronize();
  std::lock_guard<std::mutex> g(c->lat_mu);
  c->lat.insert(c->lat.end(), lat.begin(), lat.end());
}

// gpus: 0 for the single-GPU cells; else a --devices cell over GPUs
// 0..gpus-1 (threads in all).
void run_cell(const char *bench, const char *mode, unsigned threads,
              unsigned gpus = 0) {
  Cell c;
  c.mode = mode;
  c.gpus = gpus ? gpus : 1;
  c.start.n = threads + 1;
  bool serving = std::strcmp(bench, "serving") == 0;
  c10::cuda::CUDACachingAllocator::emptyCache();
  for (unsigned g = 0; g < c.gpus; g++)
    c10::cuda::CUDACachingAllocator::resetPeakStats(int(g));
#ifndef NO_HOST_STATS
  at::getHostAllocator(at::kCUDA)->empty_cache();
  at::getHostAllocator(at::kCUDA)->reset_peak_stats();
#endif
  std::vector<std::thread> th;
  for (unsigned i = 0; i < threads; i++)
    th.emplace_back(serving ? std::thread(serving_thread, &c, int(i))
                            : std::thread(overhead_thread, &c, int(i)));
  double cpu0 = process_cpu_ns();
  c.deadline = now_ns() + uint64_t(g_ms) * 1000000u;
  c.start.wait();
  uint64_t t0 = now_ns();
  for (auto &t : th) t.join();
  double wall = double(now_ns() - t0), cpu = process_cpu_ns() - cpu0;
  uint64_t n = c.iters.load();
  double resv = 0, used = 0;  // peaks summed over the GPUs
  for (unsigned g = 0; g < c.gpus; g++) {
    auto st = c10::cuda::CUDACachingAllocator::getDeviceStats(int(g));
    resv += double(st.reserved_bytes[0].peak) / 1048576;  // [0]: AGGREGATE
    used += double(st.allocated_bytes[0].peak) / 1048576;
  }
#ifndef NO_HOST_STATS
  auto hs = at::getHostAllocator(at::kCUDA)->get_stats();
  resv += double(hs.allocated_bytes.peak) / 1048576;  // free + in use
  used += double(hs.active_bytes.peak) / 1048576;
#endif
  if (serving) {
    std::sort(c.lat.begin(), c.lat.end());
    size_t k = c.lat.size();
    double p50 = k ? c.lat[size_t(0.50 * double(k - 1))] / 1e3 : 0;
    double p99 = k ? c.lat[size_t(0.99 * double(k - 1))] / 1e3 : 0;
    if (gpus != 0)
      std::printf("multigpu %-9s %4u %3u %-7s | %10.0f | %9.2f %9.2f | %7s "
                  "%5s | %8.1f %8.1f | %9.2f %9.2f\n",
                  mode, gpus, threads, g_spread ? "spread" : "grouped",
                  double(n) / wall * 1e9, n ? cpu / double(n) / 1e3 : 0,
                  n ? double(c.req_cpu.load()) / double(n) / 1e3 : 0, "-",
                  "-", p50, p99, resv, used);
    else
    std::printf("%-8s %-9s %3u | %10.0f | %9.2f %9.2f | %8.1f %8.1f | %9.2f "
                "%9.2f\n",
                bench, mode, threads, double(n) / wall * 1e9,
                n ? cpu / double(n) / 1e3 : 0,
                n ? double(c.req_cpu.load()) / double(n) / 1e3 : 0, p50, p99,
                resv, used);
  } else {
    std::printf("%-8s %-9s %3u | %10.3f | %9.0f %9.0f | %8s %8s | %9.2f "
                "%9.2f\n",
                bench, mode, threads, double(n) / wall * 1e3,
                n ? cpu / double(n) : 0,
                n ? double(c.req_cpu.load()) / double(n) : 0, "-", "-", resv,
                used);
  }
  std::fflush(stdout);
}

}  // namespace

std::vector<unsigned> parse_list(const std::string &l) {
  std::vector<unsigned> v;
  for (size_t p = 0; p < l.size();) {
    size_t q = l.find(',', p);
    v.push_back(unsigned(std::stoul(l.substr(p, q - p))));
    p = q == std::string::npos ? l.size() : q + 1;
  }
  return v;
}

int main(int argc, char **argv) {
  std::string threads = "1,2,4,8,16", devices;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--spread") {
      g_spread = true;
      continue;
    }
    if (a == "--pin") {
      g_pin = true;
      continue;
    }
    std::string v = i + 1 < argc ? argv[++i] : "";
    if (v.empty()) a = "?";
    if (a == "--threads") threads = v;
    else if (a == "--ms") g_ms = unsigned(std::stoul(v));
    else if (a == "--bytes") g_bytes = unsigned(std::stoul(v));
    else if (a == "--inflight") g_inflight = unsigned(std::stoul(v));
    else if (a == "--devices") devices = v;
    else {
      std::fprintf(stderr, "usage: pool_torch [--threads L] [--ms MS] "
                           "[--bytes B] [--inflight N] [--devices L "
                           "[--spread]] [--pin]\n");
      return 2;
    }
  }
  std::vector<unsigned> ts = parse_list(threads), gs;
  if (g_pin) {  // before CUDA's threads exist
    unsigned most = *std::max_element(ts.begin(), ts.end());
    if (!devices.empty()) {
      std::vector<unsigned> d = parse_list(devices);
      most *= *std::max_element(d.begin(), d.end());
    }
    pin_init(most);
  }
  if (!devices.empty()) {
    gs = parse_list(devices);
    int visible = int(c10::cuda::device_count());
    for (unsigned g : gs)
      if (g == 0 || int(g) > visible) {
        std::fprintf(stderr, "FAILED: --devices %u, but %d GPUs are visible\n",
                     g, visible);
        return 1;
      }
    unsigned most = *std::max_element(gs.begin(), gs.end());
    for (unsigned g = 0; g < most; g++)  // init CUDA on every GPU used
      at::empty({1}, at::TensorOptions().device(at::kCUDA, int(g)));
    std::printf("torch: several GPUs: %u ms per cell, %u bytes, %u in flight "
                "per thread, threads per GPU, %s\n",
                g_ms, g_bytes, g_inflight,
                g_spread ? "each thread spread over all GPUs"
                         : "each thread on one GPU");
    for (unsigned t : ts)
      for (unsigned g : gs) run_cell("serving", "torch", t * g, g);
  } else {
    at::empty({1}, at::TensorOptions().device(at::kCUDA, 0));  // init CUDA
    std::printf("torch: %u ms per cell; serving: %u bytes, %u in flight\n",
                g_ms, g_bytes, g_inflight);
    for (unsigned t : ts) {
      run_cell("overhead", "torch_af", t);
      run_cell("overhead", "torch_2s", t);
    }
    for (unsigned t : ts) run_cell("serving", "torch", t);
  }
  if (g_wrong.load() != 0) {
    std::fprintf(stderr, "FAILED: %ld wrong results\n", g_wrong.load());
    return 1;
  }
  std::printf("every result checked\n");
  return 0;
}
