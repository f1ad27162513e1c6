// oxicuda-bench-cache-scaling: what the kernel cache's storage costs as the
// directory fills (BENCHMARKS.md). CPU only: it exercises cache.hpp's
// cache_read and cache_write, with no driver and no compiler. For each
// count of entries (8 KiB each, last used one second apart), in a fresh
// directory under TMPDIR:
//   hit          cache_read of one entry (open, read, checksum, time of use set)
//   store        cache_write of a new entry that leaves the total under the limit
//   evict one    cache_write with the limit at the total: the entry used
//                longest ago goes
//   evict half   one cache_write with the limit at half the total (a lowered
//                OXICUDA_CACHE_MAX_BYTES): about half the entries go
// Each figure but the last is a median: the hits of 9 rounds of 300, taken
// across all the counts in turn, the stores of 7 batches.
//   build/bench/oxicuda-bench-cache-scaling [count,count,...]   (default 10,1000,6000,20000)
// OXICUDA_BENCH_HALF_MAX=n skips "evict half" above n entries.
#include "oxicuda.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace {

using Clock = std::chrono::steady_clock;
namespace detail = oxicuda::detail;

constexpr std::size_t payload_size = 8 << 10;

std::string key_of(long i) { return detail::KeyHash().add("cache-scaling").add(std::to_string(i)).hex(); }

// An entry as cache_write makes it, written directly (no fsync: setting up
// 20,000 entries would otherwise take minutes).
void plant(const std::string& dir, const std::string& key, const std::string& payload, std::time_t t) {
  const std::string path = dir + "/" + key + ".bin";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) {
    std::perror(path.c_str());
    std::exit(1);
  }
  char header[32];
  const std::uint64_t size = payload.size(), sum = detail::checksum(key, payload);
  std::memcpy(header, detail::cache_magic, 16);
  std::memcpy(header + 16, &size, 8);
  std::memcpy(header + 24, &sum, 8);
  if (::write(fd, header, 32) != 32 || ::write(fd, payload.data(), payload.size()) != static_cast<::ssize_t>(payload.size()))
    std::exit(1);
  ::close(fd);
  const timespec times[2] = {{t, 0}, {t, 0}};
  ::utimensat(AT_FDCWD, path.c_str(), times, 0);
}

template <class F>
double median_us(int batches, int per_batch, F&& f) {
  std::vector<double> v;
  for (int b = 0; b < batches; ++b) {
    const auto t0 = Clock::now();
    for (int i = 0; i < per_batch; ++i) f();
    v.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / per_batch);
  }
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<long> counts = {10, 1000, 6000, 20000};
  if (argc > 1) {
    counts.clear();
    for (const char* p = argv[1]; *p;) {
      char* end = nullptr;
      counts.push_back(std::strtol(p, &end, 10));
      p = *end == ',' ? end + 1 : end;
      if (end == p && *p) break;
    }
  }
  const char* half_max_env = std::getenv("OXICUDA_BENCH_HALF_MAX");
  const long half_max = half_max_env ? std::atol(half_max_env) : -1;
  const char* tmp = std::getenv("TMPDIR");
  const std::string base = std::string(tmp ? tmp : "/tmp") + "/oxicuda-cache-scaling-" + std::to_string(::getpid());
  const std::string payload(payload_size, 'p');
  std::string note, read;

  // Every directory first, then the hits measured round by round across
  // them, so that a busy moment of the machine falls on every count alike.
  std::vector<std::string> dirs;
  std::vector<long> next(counts.size());
  std::system(("rm -rf '" + base + "'").c_str());
  ::mkdir(base.c_str(), 0700);
  ::unsetenv("OXICUDA_CACHE_MAX_BYTES");
  for (std::size_t c = 0; c < counts.size(); ++c) {
    const long n = counts[c];
    dirs.push_back(base + "/" + std::to_string(n));
    ::mkdir(dirs[c].c_str(), 0700);
    const std::time_t t0 = std::time(nullptr) - n - 100;
    for (long i = 0; i < n; ++i) plant(dirs[c], key_of(i), payload, t0 + i);
    next[c] = n;
    // A first store: the running total is counted (one scan), as after an upgrade.
    if (!detail::cache_write(dirs[c], key_of(next[c]++), payload, note)) {
      std::fprintf(stderr, "store failed: %s\n", note.c_str());
      return 1;
    }
    for (int i = 0; i < 50; ++i) (void)detail::cache_read(dirs[c], key_of(n / 2), read, note);
  }
  std::vector<std::vector<double>> hits(counts.size());
  for (int round = 0; round < 9; ++round)
    for (std::size_t c = 0; c < counts.size(); ++c) {
      const std::string key = key_of(counts[c] / 2);
      hits[c].push_back(median_us(1, 300, [&] {
        if (!detail::cache_read(dirs[c], key, read, note)) std::exit(2);
      }));
    }

  std::printf("| entries | hit (us) | hit / hit at %ld | store (us) | evict one (us) | evict half (ms) |\n", counts[0]);
  std::printf("|--------:|---------:|--------:|-----------:|---------------:|----------------:|\n");
  double first_hit = 0;
  for (std::size_t c = 0; c < counts.size(); ++c) {
    const long n = counts[c];
    const std::string& dir = dirs[c];
    std::sort(hits[c].begin(), hits[c].end());
    const double hit = hits[c][hits[c].size() / 2];
    if (c == 0) first_hit = hit;

    const double store = median_us(7, 10, [&] { (void)detail::cache_write(dir, key_of(next[c]++), payload, note); });

    // The limit at the total: each store evicts the entry used longest ago.
    const std::uint64_t entry_bytes = payload_size + 32;
    const std::uint64_t total = static_cast<std::uint64_t>(n + 1 + 70) * entry_bytes;
    ::setenv("OXICUDA_CACHE_MAX_BYTES", std::to_string(total).c_str(), 1);
    (void)detail::cache_write(dir, key_of(next[c]++), payload, note);  // settles the total at the limit
    const double evict_one = median_us(7, 5, [&] { (void)detail::cache_write(dir, key_of(next[c]++), payload, note); });

    double evict_half = -1;
    if (half_max < 0 || n <= half_max) {
      ::setenv("OXICUDA_CACHE_MAX_BYTES", std::to_string(total / 2).c_str(), 1);
      const auto a = Clock::now();
      (void)detail::cache_write(dir, key_of(next[c]++), payload, note);
      evict_half = std::chrono::duration<double, std::milli>(Clock::now() - a).count();
    }
    ::unsetenv("OXICUDA_CACHE_MAX_BYTES");
    char half[32] = "(skipped)";
    if (evict_half >= 0) std::snprintf(half, sizeof half, "%.1f", evict_half);
    std::printf("| %7ld | %8.1f | %7.2f | %10.1f | %14.1f | %15s |\n", n, hit, hit / first_hit, store, evict_one, half);
    std::fflush(stdout);
  }
  std::system(("rm -rf '" + base + "'").c_str());
  return 0;
}
