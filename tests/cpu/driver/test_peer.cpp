// Several GPUs (issue 23, item 1) on the fake driver with two devices:
// peer queries, peer access on and off, copies between the devices'
// memory, and the errors for devices that cannot reach each other.
#include <doctest/doctest.h>

#include "../fixtures.hpp"

#include <numeric>
#include <string>
#include <vector>

using namespace oxicuda;

TEST_CASE_FIXTURE(TwoDevices, "issue 23 (1): Device::all, can_access_peer, the link's attributes") {
  const std::vector<Device> all = Device::all();
  REQUIRE(all.size() == 2);
  CHECK(all[0] == Device::get(0));
  CHECK(all[1] == Device::get(1));
  CHECK(can_access_peer(all[0], all[1]));
  CHECK(!can_access_peer(all[0], all[0]));
  const PeerAttributes a = peer_attributes(all[0], all[1]);
  CHECK(a.access_supported);
  CHECK(a.native_atomics);
  CHECK(a.performance_rank == 0);
  fake.set_peer_access(0, 1, 0);
  CHECK(!can_access_peer(all[0], all[1]));
  CHECK(can_access_peer(all[1], all[0]));
  CHECK(!peer_attributes(all[0], all[1]).access_supported);
  CHECK(error_of([&] { (void)peer_attributes(all[0], all[0]); }).result() == ffi::CUDA_ERROR_INVALID_DEVICE);
}

TEST_CASE_FIXTURE(TwoDevices, "issue 23 (1): peer access on twice is not an error, off twice is; copies between the devices") {
  {
    Context c0 = Context::primary(Device::get(0));
    Context c1 = Context::primary(Device::get(1));
    enable_peer_access(c0, c1);
    CHECK_NOTHROW(enable_peer_access(c0, c1));  // already on: not an error
    enable_peer_access(c1, c0);
    CHECK(Context::current().raw() == nullptr);
    disable_peer_access(c0, c1);
    const Error off = error_of([&] { disable_peer_access(c0, c1); });
    CHECK(off.result() == ffi::CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
    CHECK(std::string(off.what()).find("from device 0 to device 1") != std::string::npos);
    // One device's two contexts.
    Context other0 = Context::create(Device::get(0));
    const Error same = error_of([&] { enable_peer_access(c0, other0); });
    CHECK(same.result() == ffi::CUDA_ERROR_INVALID_DEVICE);
    CHECK(std::string(same.what()).find("one device") != std::string::npos);
    // Devices that cannot reach each other.
    fake.set_peer_access(0, 1, 0);
    const Error no = error_of([&] { enable_peer_access(c0, c1); });
    CHECK(no.result() == ffi::CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
    CHECK(std::string(no.what()).find("cannot reach each other") != std::string::npos);
    CHECK(error_of([&] { enable_peer_access(Context(), c1); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);

    // Copies between the devices' buffers: stream-ordered on either side's stream, and synchronous.
    std::vector<int> host(256);
    std::iota(host.begin(), host.end(), 0);
    DeviceBuffer<int> a(c0, 256), b(c1, 256);
    copy(a, host);
    Stream s1(c1);
    copy_peer_async(s1, b, a);
    s1.synchronize();
    std::vector<int> back(256);
    copy(back, b);
    CHECK(back == host);
    fill(a, 0);
    copy_peer(a.subspan(0, 16), b.subspan(240, 16));
    copy(back, a);
    CHECK(back[0] == 240);
    CHECK(back[15] == 255);
    CHECK(back[16] == 0);
    CHECK(fake.calls("cuMemcpyPeerAsync") == 2);
    // Checked as copy(): sizes, and each side's context.
    CHECK(error_of([&] { copy_peer(a, b.subspan(0, 8)); }).result() == ffi::CUDA_ERROR_INVALID_VALUE);
    const Error no_ctx = error_of([&] { copy_peer(DeviceSpan<int>(a.device_ptr(), 256), b); });
    CHECK(no_ctx.result() == ffi::CUDA_ERROR_INVALID_CONTEXT);
    CHECK(std::string(no_ctx.what()).find("destination") != std::string::npos);
    CHECK(fake.calls("cuMemcpyPeerAsync") == 2);
    CHECK(Context::current().raw() == nullptr);
  }
}

TEST_CASE_FIXTURE(TwoDevices, "issue 23 (11): DevicePool: every device with its context and stream, in turn or by free memory") {
  {
    const DevicePool pool = DevicePool::all();
    REQUIRE(pool.size() == 2);
    CHECK(pool[0].device == Device::get(0));
    CHECK(pool[1].device == Device::get(1));
    CHECK(pool[1].context.device() == Device::get(1));
    CHECK(pool[1].stream.context() == pool[1].context);
    CHECK(&pool.next() == &pool[0]);
    CHECK(&pool.next() == &pool[1]);
    CHECK(&pool.next() == &pool[0]);
    const DevicePool copy = pool;  // shares members and turn
    CHECK(&copy.next() == &pool[1]);
    std::size_t n = 0;
    for (const PoolMember& m : pool) n += m.stream.raw() != nullptr;
    CHECK(n == 2);
    // Device 0's memory used: device 1 has the most free.
    DeviceBuffer<char> big(pool[0].context, std::size_t{64} << 20);
    CHECK(&pool.most_free_memory() == &pool[1]);
    pool.synchronize();
    CHECK(fake.calls("cuStreamSynchronize") >= 2);
    const DevicePool one{std::vector<Device>{Device::get(1)}};
    CHECK(one.size() == 1);
    CHECK(&one.next() == &one[0]);
    CHECK(error_of([] { DevicePool none{std::vector<Device>{}}; }).result() == ffi::CUDA_ERROR_NO_DEVICE);
  }
  CHECK(Context::current().raw() == nullptr);
}
