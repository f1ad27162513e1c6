// Checkpointing (issue 25, capability 6) on the fake driver, whose model is
// a state machine for its own process (tests/fake/fake_checkpoint.cpp):
// every transition in order, every call out of order refused without a
// change, GPU remaps, bad input; a driver without the calls is the loader
// test "checkpoint calls missing".
#include <doctest/doctest.h>

#include "../fixtures.hpp"

#include <chrono>
#include <string>
#include <vector>

#include <unistd.h>

using namespace oxicuda;

TEST_CASE_FIXTURE(FakeTest, "checkpoint: running, locked, checkpointed, locked again by the restore, running") {
  const int pid = static_cast<int>(::getpid());
  REQUIRE(checkpointing_available());
  CHECK(process_state(pid) == ProcessState::running);
  lock_process(pid);
  CHECK(process_state(pid) == ProcessState::locked);
  checkpoint_process(pid);
  CHECK(process_state(pid) == ProcessState::checkpointed);
  restore_process(pid);
  CHECK(process_state(pid) == ProcessState::locked);
  unlock_process(pid);
  CHECK(process_state(pid) == ProcessState::running);
  CHECK(restore_thread_id(pid) == pid);  // the fake's answer: the main thread
  // With a timeout, and a restore onto named GPUs.
  lock_process(pid, std::chrono::milliseconds(500));
  checkpoint_process(pid);
  const Uuid gpu = Device::get(0).uuid();
  const GpuRemap remap[] = {{gpu, gpu}};
  restore_process(pid, remap);
  unlock_process(pid);
  CHECK(process_state(pid) == ProcessState::running);
  CHECK(fake.calls("cuCheckpointProcessLock") == 2);
  CHECK(fake.calls("cuCheckpointProcessRestore") == 2);
  CHECK(std::string(to_string(ProcessState::checkpointed)) == "checkpointed");
  CHECK(std::string(to_string(ProcessState::failed)) == "failed");
}

TEST_CASE_FIXTURE(FakeTest, "checkpoint: a call out of order is the driver's CUDA_ERROR_ILLEGAL_STATE and changes nothing") {
  const int pid = static_cast<int>(::getpid());
  auto refused = [&](auto call, ProcessState stays) {
    const Error e = error_of(call);
    CHECK(e.result() == ffi::CUDA_ERROR_ILLEGAL_STATE);
    CHECK(process_state(pid) == stays);
  };
  refused([&] { unlock_process(pid); }, ProcessState::running);
  refused([&] { checkpoint_process(pid); }, ProcessState::running);
  refused([&] { restore_process(pid); }, ProcessState::running);
  lock_process(pid);
  refused([&] { lock_process(pid); }, ProcessState::locked);
  refused([&] { restore_process(pid); }, ProcessState::locked);
  checkpoint_process(pid);
  refused([&] { lock_process(pid); }, ProcessState::checkpointed);
  refused([&] { unlock_process(pid); }, ProcessState::checkpointed);
  refused([&] { checkpoint_process(pid); }, ProcessState::checkpointed);
  const Error e = error_of([&] { unlock_process(pid); });
  CHECK(e.call() == "cuCheckpointProcessUnlock");
  restore_process(pid);
  unlock_process(pid);
  CHECK(process_state(pid) == ProcessState::running);
}

TEST_CASE_FIXTURE(FakeTest, "checkpoint: bad input; another process; a failed restore leaves the process checkpointed") {
  const int pid = static_cast<int>(::getpid());
  // A process the (fake) driver does not know as a CUDA process.
  CHECK(error_of([&] { (void)process_state(pid + 100000); }).result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(error_of([&] { lock_process(pid + 100000); }).result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(error_of([&] { (void)restore_thread_id(-1); }).result() == ffi::CUDA_ERROR_INVALID_VALUE);
  // Timeouts out of the driver's range: refused before the driver.
  const Error t = error_of([&] { lock_process(pid, std::chrono::milliseconds(-1)); });
  CHECK(std::string(t.what()).find("a timeout below 0") != std::string::npos);
  CHECK_THROWS_AS(lock_process(pid, std::chrono::milliseconds(0x100000000ll)), Error);
  CHECK(fake.calls("cuCheckpointProcessLock") == 1);
  std::vector<GpuRemap> many(65);
  const Error m = error_of([&] { restore_process(pid, many); });
  CHECK(std::string(m.what()).find("65 GPU remaps; at most 64") != std::string::npos);
  CHECK(fake.calls("cuCheckpointProcessRestore") == 0);

  // A remap naming no GPU of the machine: the driver refuses, the process stays checkpointed.
  lock_process(pid);
  checkpoint_process(pid);
  const GpuRemap unknown[] = {{Uuid{}, Device::get(0).uuid()}};
  CHECK(error_of([&] { restore_process(pid, unknown); }).result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(process_state(pid) == ProcessState::checkpointed);
  restore_process(pid);
  unlock_process(pid);
  CHECK(process_state(pid) == ProcessState::running);
}
