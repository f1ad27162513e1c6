// The GPU suite, part: external memory and semaphores (issue 25, capability
// 5) against real Vulkan objects on the same GPU (vulkan_peer.hpp: the
// NVIDIA Vulkan driver, opened without a loader). Vulkan makes a timeline
// semaphore and a buffer of dedicated device memory and exports both as
// file descriptors; oxicuda imports them. Then the work goes both ways,
// each side waiting on the GPU for the other's signal:
//   - Vulkan fills the buffer and signals 1; a CUDA stream waits for 1 and
//     copies the buffer to the host: every word is Vulkan's;
//   - a CUDA stream waits for 2 (which nobody has signalled yet: the stream
//     is not done), fills the buffer with its own word and signals 3; the
//     host signals 2 through Vulkan; a Vulkan submission waits for 3,
//     copies the buffer into host-visible memory and signals 4: every word
//     is CUDA's;
//   - signal_all and wait_all, the batched forms, over the same semaphore.
// Where the machine has no Vulkan the case says so and passes without
// checking anything (a MESSAGE, as the other optional cases do).
#include <doctest/doctest.h>

#include "gpu_common.hpp"
#include "vulkan_peer.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

using namespace oxicuda;
using gpu::ctx;

namespace {

std::unique_ptr<vkpeer::Peer> vulkan_or_why(std::string& why) {
  try {
    return std::make_unique<vkpeer::Peer>(ctx().device().uuid().bytes);
  } catch (const vkpeer::Failure& e) {
    why = e.what();
    return nullptr;
  }
}

constexpr std::uint32_t kVulkanWord = 0xC0FFEEu;
constexpr std::uint32_t kCudaWord = 0x0DDBA11u;
constexpr std::uint64_t kTimeout = 10'000'000'000ull;  // 10 s, in ns

}  // namespace

TEST_CASE("issue 25 (5): a Vulkan timeline semaphore and Vulkan memory, imported: each side waits on the GPU for the other's signal and reads the other's bytes") {
  std::string why;
  const auto vk = vulkan_or_why(why);
  if (!vk) {
    MESSAGE("skipped: " << why);
    return;
  }
  MESSAGE("Vulkan from " << vk->source() << " on " << vk->device_name());
  constexpr std::size_t kWords = 256 * 1024;  // 1 MiB
  const VkSemaphore sem = vk->timeline_semaphore();
  const vkpeer::Peer::Buffer shared = vk->buffer(kWords * 4, true);
  const vkpeer::Peer::Buffer readback = vk->buffer(kWords * 4, false);
  {
    ExternalSemaphore cuda_sem =
        ExternalSemaphore::import_fd(ctx(), FileDescriptor(vk->export_semaphore(sem)), ExternalSemaphoreType::timeline_fd);
    CHECK(cuda_sem.type() == ExternalSemaphoreType::timeline_fd);
    ExternalMemory cuda_mem = ExternalMemory::import_fd(ctx(), FileDescriptor(vk->export_memory(shared)),
                                                        shared.allocation_size, ExternalMemoryType::opaque_fd,
                                                        {.dedicated = true});
    DeviceBuffer<std::uint32_t> words = cuda_mem.mapped_buffer<std::uint32_t>(0, kWords);
    Stream s(ctx());

    // Vulkan writes, then signals 1; CUDA waits for 1 on the GPU, then reads.
    const auto fill_buffer = vk->fn<PFN_vkCmdFillBuffer>("vkCmdFillBuffer");
    vk->submit([&](VkCommandBuffer cb) { fill_buffer(cb, shared.buffer, 0, VK_WHOLE_SIZE, kVulkanWord); },
               VK_NULL_HANDLE, 0, sem, 1);
    cuda_sem.wait(s, 1);
    std::vector<std::uint32_t> host(kWords, 0);
    copy_async(s, host, words);
    s.synchronize();
    CHECK(std::count(host.begin(), host.end(), kVulkanWord) == static_cast<long>(kWords));
    CHECK(vk->counter(sem) >= 1);

    // CUDA waits for 2, which nobody has signalled: the stream cannot finish.
    cuda_sem.wait(s, 2);
    fill_async(s, words, kCudaWord);
    cuda_sem.signal(s, 3);
    CHECK_FALSE(s.ready());
    CHECK(vk->counter(sem) == 1);
    vk->signal(sem, 2);  // from the host, through Vulkan
    // Vulkan waits for CUDA's 3 on the GPU, copies the buffer out, signals 4.
    const auto copy_buffer = vk->fn<PFN_vkCmdCopyBuffer>("vkCmdCopyBuffer");
    vk->submit(
        [&](VkCommandBuffer cb) {
          const VkBufferCopy region{0, 0, kWords * 4};
          copy_buffer(cb, shared.buffer, readback.buffer, 1, &region);
        },
        sem, 3, sem, 4);
    REQUIRE(vk->wait(sem, 4, kTimeout));
    s.synchronize();
    const auto* seen = static_cast<const std::uint32_t*>(vk->map(readback));
    CHECK(std::count(seen, seen + kWords, kCudaWord) == static_cast<long>(kWords));

    // The batched forms over the same semaphore: wait for 5 (the host's),
    // then signal 6.
    const SemaphoreValue five[] = {{cuda_sem, 5}};
    const SemaphoreValue six[] = {{cuda_sem, 6}};
    wait_all(s, five);
    signal_all(s, six);
    CHECK_FALSE(s.ready());
    vk->signal(sem, 5);
    REQUIRE(vk->wait(sem, 6, kTimeout));
    s.synchronize();
    CHECK(vk->counter(sem) == 6);
  }  // CUDA's imports go first, then Vulkan's objects
  vk->idle();
  vk->destroy(readback);
  vk->destroy(shared);
  vk->destroy(sem);
}
