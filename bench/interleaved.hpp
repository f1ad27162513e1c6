// bench/interleaved.hpp: raw and oxicuda timed in turns inside one loop,
// the figure the median of the rounds' ratios (see the comment below).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

// Creation costs drift with the driver's state (its event and stream pools):
// on the H200 the same raw event create + destroy measured 224 ns in one
// run and 498 ns in another, which swamps a 10% difference between
// separate benchmarks. Here raw and oxicuda take turns inside one loop:
// each round times `batch` raw operations and `batch` oxicuda ones, the
// order alternating from round to round, and the figure is the median of
// the rounds' ratios. Printed to stderr (the XML report holds the pairs).
template <class Raw, class Ox>
inline void interleaved(const char* what, int rounds, int batch, Raw raw_op, Ox ox_op) {
  using clock = std::chrono::steady_clock;
  auto time = [batch](auto& op) {
    const auto t0 = clock::now();
    for (int i = 0; i < batch; ++i) op();
    return std::chrono::duration<double, std::nano>(clock::now() - t0).count() / batch;
  };
  for (int i = 0; i < batch; ++i) raw_op(), ox_op();  // warm both
  std::vector<double> ratios, raws, oxs;
  for (int r = 0; r < rounds; ++r) {
    double a = 0, b = 0;
    if (r % 2) {
      b = time(ox_op);
      a = time(raw_op);
    } else {
      a = time(raw_op);
      b = time(ox_op);
    }
    raws.push_back(a), oxs.push_back(b), ratios.push_back(b / a);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::fprintf(stderr, "interleaved | %s | raw %.1f ns | oxicuda %.1f ns | ratio median %.3f (rounds %d x %d)\n", what,
               median(raws), median(oxs), median(ratios), rounds, batch);
}

