// oxicuda/graph/graphed_step.hpp — GraphedStep: a function that enqueues
// work, turned into a graph captured once and replayed (one cuGraphLaunch a
// call), captured again when its arguments change, the exec updated in
// place when the graph's shape allows.
#pragma once

#include <cstddef>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

#include "capture.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

struct StepOptions {
  CaptureMode mode = CaptureMode::global;
  InstantiateOptions instantiate{};
};

// What a GraphedStep has done so far.
struct StepStats {
  long captures = 0;        // the callable was run under capture
  long instantiations = 0;  // a new exec was made (first call, or the topology changed)
  long updates = 0;         // the exec was updated in place (cuGraphExecUpdate)
  long launches = 0;        // the exec was launched
};

namespace detail {

// The part of GraphedStep that does not depend on the callable's type.
class StepCore {
 public:
  explicit StepCore(StepOptions options) noexcept : options_(std::move(options)) {}
  // Moved, the exec goes with the step; the step moved from is empty.
  StepCore(StepCore&& o) noexcept
      : graph_(std::move(o.graph_)), exec_(std::move(o.exec_)), stats_(o.stats_), options_(std::move(o.options_)),
        key_(std::move(o.key_)), captured_(std::exchange(o.captured_, false)), live_(std::exchange(o.live_, false)) {}
  StepCore& operator=(StepCore&& o) noexcept {
    if (this == &o) return *this;
    graph_ = std::move(o.graph_);
    exec_ = std::move(o.exec_);
    stats_ = o.stats_;
    options_ = std::move(o.options_);
    key_ = std::move(o.key_);
    captured_ = std::exchange(o.captured_, false);
    live_ = std::exchange(o.live_, false);
    return *this;
  }
  StepCore(const StepCore&) = delete;
  StepCore& operator=(const StepCore&) = delete;
  ~StepCore() = default;
  using Enqueue = void (*)(void* callable, const Stream& stream);
  void run(const Stream& stream, const unsigned char* key, std::size_t key_size, Enqueue enqueue, void* callable,
           SourceLocation where);
  void reset() noexcept { captured_ = false; }
  [[nodiscard]] const Graph& graph() const noexcept { return graph_; }
  [[nodiscard]] const GraphExec& exec() const noexcept { return exec_; }
  [[nodiscard]] const StepStats& stats() const noexcept { return stats_; }

 private:
  Graph graph_;
  GraphExec exec_;
  StepStats stats_;
  StepOptions options_;
  std::string key_;
  bool captured_ = false;
  bool live_ = true;  // false once moved from
};

// A tag whose address names the list of a step's argument types: the first
// bytes of its key, so that arguments of other types with the same bytes
// (1.0f and 0x3f800000) are another key.
template <class... A>
struct StepArgTypes {
  static constexpr char tag = 0;
};

inline void StepCore::run(const Stream& stream, const unsigned char* key, std::size_t key_size, Enqueue enqueue,
                          void* callable, SourceLocation where) {
  if (!live_) empty_handle("oxicuda::GraphedStep", "oxicuda::GraphedStep::operator()", where);
  const bool same = captured_ && key_.size() == key_size && (key_size == 0 || std::memcmp(key_.data(), key, key_size) == 0);
  if (!same) {
    Graph graph;
    {
      ScopedCapture scope(stream, options_.mode, where);
      enqueue(callable, stream);
      graph = scope.end(where);
    }
    ++stats_.captures;
    if (exec_ && !exec_.try_update(graph, where)) {
      ++stats_.updates;
    } else {
      exec_ = GraphExec(graph, options_.instantiate, where);
      ++stats_.instantiations;
    }
    graph_ = std::move(graph);
    key_.assign(reinterpret_cast<const char*>(key), key_size);
    captured_ = true;
  }
  exec_.launch(stream, where);
  ++stats_.launches;
}

}  // namespace detail

// A step of work graphed with one line: `enqueue(stream, args...)` is
// captured into a graph on the first call, and later calls launch that
// graph — one cuGraphLaunch for the whole step — instead of running the
// callable again:
//   GraphedStep step{[&](const Stream& s, float a) { launch(s, k1, cfg, x, a); launch(s, k2, cfg, x); }};
//   for (...) step(stream, a);
//
// What may change between calls, exactly:
// - The contents of device memory: always (the graph reads it when it runs).
// - `args...` (trivially copyable values, compared by their types and
//   bytes, so zero the padding of a struct): when they differ from the last capture's, the
//   callable is captured again with the new ones; a graph of the same
//   topology updates the exec in place (cuGraphExecUpdate), another topology
//   (other kernels, more or fewer nodes, other dependencies) is instantiated
//   anew.
// - The stream: each call launches on the stream it is given.
// Everything else the callable reads — sizes, pointers, buffers, scalars it
// captured by reference, which branch it takes — is fixed in the graph when
// it is captured: a change of it without a change of `args...` has no
// effect until reset() makes the next call capture again. Host functions
// the callable enqueues run on every launch (their callables live as long
// as the graph or exec that can run them).
template <class F>
class GraphedStep {
 public:
  explicit GraphedStep(F fn, StepOptions options = {}) : fn_(std::move(fn)), core_(std::move(options)) {}
  // Move-only: the step owns its exec, which an update rewrites in place,
  // so two copies would replay each other's arguments. A moved-from step is
  // empty (calling it is an Error); to run one step from two places, share
  // a reference to it, or make two steps (each captures for itself).
  GraphedStep(const GraphedStep&) = delete;
  GraphedStep& operator=(const GraphedStep&) = delete;
  GraphedStep(GraphedStep&&) noexcept(std::is_nothrow_move_constructible_v<F>) = default;
  GraphedStep& operator=(GraphedStep&&) = default;  // (deleted when F cannot be assigned: a lambda)
  ~GraphedStep() = default;

  template <class... A>
  void operator()(detail::Located<const Stream&> stream, const A&... args) {
    static_assert((std::is_trivially_copyable_v<A> && ...),
                  "GraphedStep: its arguments are compared by their bytes, so they must be trivially copyable");
    // The key: which types (a tag's address), then their bytes; every byte written.
    const void* const types = &detail::StepArgTypes<A...>::tag;
    unsigned char key[sizeof(types) + (sizeof(A) + ... + 0)];
    std::memcpy(key, &types, sizeof(types));
    std::size_t at = sizeof(types);
    ((std::memcpy(key + at, &args, sizeof(A)), at += sizeof(A)), ...);
    auto enqueue = [&](const Stream& s) { fn_(s, args...); };
    core_.run(
        stream.value, key, at,
        [](void* e, const Stream& s) { (*static_cast<decltype(enqueue)*>(e))(s); }, &enqueue, stream.where);
  }

  // The last captured graph and its exec (empty before the first call).
  [[nodiscard]] const Graph& graph() const noexcept { return core_.graph(); }
  [[nodiscard]] const GraphExec& exec() const noexcept { return core_.exec(); }
  [[nodiscard]] const StepStats& stats() const noexcept { return core_.stats(); }
  // The next call captures again (and updates the exec, or makes a new one).
  void reset() noexcept { core_.reset(); }

 private:
  F fn_;
  detail::StepCore core_;
};

OXICUDA_DETAIL_NAMESPACE_END
