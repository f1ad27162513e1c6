// oxicuda/driver/device_pool.hpp — DevicePool: the devices to spread work
// over, each with its primary context and a stream of its own, picked in
// turn or by free memory, and waited for together. A range, not a
// scheduler: what runs where is the caller's loop.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <vector>

#include "stream.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// One device of a pool: the device, its primary context, and the pool's
// stream there (non-blocking).
struct PoolMember {
  Device device;
  Context context;
  Stream stream;
};

// The devices to spread work over (the seed crate's DevicePool):
//   DevicePool pool = DevicePool::all();
//   for (auto& chunk : chunks) { const PoolMember& m = pool.next(); launch(m.stream, ...); }
//   pool.synchronize();
// With one GPU it is a pool of one and works the same way. next() is safe
// to call from several threads; copies of a pool share its members.
class DevicePool {
 public:
  // Every device the driver sees; an Error when it sees none.
  [[nodiscard]] static DevicePool all(SourceLocation where = SourceLocation::current());
  // These devices, in this order; an Error when empty.
  explicit DevicePool(const std::vector<Device>& devices, SourceLocation where = SourceLocation::current());
  // Copies share the members; a move copies too, so that no pool is ever
  // left without members.
  DevicePool(const DevicePool&) = default;
  DevicePool& operator=(const DevicePool&) = default;

  [[nodiscard]] std::size_t size() const noexcept { return state_->members.size(); }
  [[nodiscard]] const PoolMember& operator[](std::size_t i) const noexcept { return state_->members[i]; }
  [[nodiscard]] auto begin() const noexcept { return state_->members.cbegin(); }
  [[nodiscard]] auto end() const noexcept { return state_->members.cend(); }
  // The members in turn, round-robin.
  [[nodiscard]] const PoolMember& next() const noexcept {
    return state_->members[state_->turn.fetch_add(1, std::memory_order_relaxed) % state_->members.size()];
  }
  // The member whose device has the most free memory now (cuMemGetInfo in
  // each context); the first of equals.
  [[nodiscard]] const PoolMember& most_free_memory(SourceLocation where = SourceLocation::current()) const;
  // Waits for the work enqueued on every member's stream.
  void synchronize(SourceLocation where = SourceLocation::current()) const;

 private:
  // The members and the round-robin turn, shared by the pool's copies.
  struct State {
    std::vector<PoolMember> members;
    std::atomic<std::size_t> turn{0};
  };
  std::shared_ptr<State> state_;
};

inline DevicePool DevicePool::all(SourceLocation where) { return DevicePool(Device::all(where), where); }

inline DevicePool::DevicePool(const std::vector<Device>& devices, SourceLocation where)
    : state_(std::make_shared<State>()) {
  if (devices.empty())
    detail::raise(Error(ffi::CUDA_ERROR_NO_DEVICE, "oxicuda::DevicePool",
                        "a pool needs at least one device, and none was given (Device::all() is empty where the "
                        "driver sees no GPU)",
                        where));
  state_->members.reserve(devices.size());
  for (const Device& d : devices) {
    Context ctx = Context::primary(d, where);
    Stream s(ctx, {.non_blocking = true}, where);
    state_->members.push_back(PoolMember{d, std::move(ctx), std::move(s)});
  }
}

inline const PoolMember& DevicePool::most_free_memory(SourceLocation where) const {
  const PoolMember* best = &state_->members[0];
  std::size_t most = 0;
  for (const PoolMember& m : state_->members) {
    const std::size_t free = m.context.memory_info(where).free;
    if (free > most) most = free, best = &m;
  }
  return *best;
}

inline void DevicePool::synchronize(SourceLocation where) const {
  for (const PoolMember& m : state_->members) m.stream.synchronize(where);
}

OXICUDA_DETAIL_NAMESPACE_END
