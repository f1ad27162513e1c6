// The GPU suite, part: checkpointing (issue 25, capability 6) on a real
// driver. A child process (this binary again, exec'd fresh: a forked copy
// of a process that loaded the driver cannot use CUDA) makes a context and
// a device buffer of a known pattern, says so through a pipe and waits;
// this process locks it, checkpoints it (its device memory moves to the
// host), checks each state, restores it, unlocks it and lets it go on; the
// child then reads its buffer back and exits 0 only if the pattern is
// intact. A refusal the driver documents as a capability limit
// (CUDA_ERROR_NOT_SUPPORTED) skips, printing the driver's error; any other
// refusal fails, printing it.
#include <doctest/doctest.h>

#include "gpu_common.hpp"

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

using namespace oxicuda;
using gpu::ctx;

namespace {

// (No comma in the name: doctest splits a --test-case filter at commas, and
// the child runs this binary again with the name as its filter.)
constexpr const char* kCase = "issue 25 (6): a child process locked then checkpointed then restored then unlocked keeps its memory";
constexpr unsigned kCount = 1u << 22;  // 16 MiB of device memory to move to the host and back

// The child's part: a buffer of a pattern, "ready", wait for "go", check it.
void child(const std::string& spec) {
  const std::size_t colon = spec.find(':');
  REQUIRE(colon != std::string::npos);
  const int ready = std::stoi(spec.substr(0, colon));
  const int go = std::stoi(spec.substr(colon + 1));
  std::vector<unsigned> host(kCount);
  std::iota(host.begin(), host.end(), 12345u);
  DeviceBuffer<unsigned> buffer(ctx(), kCount);
  copy(buffer, host);
  ctx().synchronize();
  REQUIRE(::write(ready, "R", 1) == 1);
  char c = 0;
  REQUIRE(::read(go, &c, 1) == 1);  // (blocked here while the parent checkpoints this process)
  REQUIRE(c == 'G');
  std::vector<unsigned> back(kCount);
  copy(back, buffer);
  REQUIRE(back == host);
  MESSAGE("issue 25 (6) child ", ::getpid(), ": its ", kCount * sizeof(unsigned),
          " bytes of device memory are intact after the checkpoint and restore");
}

struct Child {
  pid_t pid = -1;
  int ready = -1;  // read end
  int go = -1;     // write end

  // Lets the child go on (back to running first, when it was left otherwise) and waits for its exit code.
  int finish() {
    if (pid < 0) return -1;
    try {
      if (process_state(pid) == ProcessState::checkpointed) restore_process(pid);
      if (process_state(pid) == ProcessState::locked) unlock_process(pid);
    } catch (const Error& e) {
      MESSAGE("issue 25 (6): could not bring the child back to running: ", e.what());
    }
    if (go >= 0) (void)::write(go, "G", 1);
    int status = 0;
    for (int i = 0; i < 600 && ::waitpid(pid, &status, WNOHANG) == 0; ++i) ::usleep(100000);
    if (::waitpid(pid, &status, WNOHANG) == 0) {  // still there after a minute: ours to end
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      pid = -1;
      return -2;
    }
    pid = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  Child() = default;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid >= 0) (void)finish();
    if (ready >= 0) ::close(ready);
    if (go >= 0) ::close(go);
  }
};

// This binary run again with the child's variable, its two pipe ends inherited.
void spawn(Child& c) {
  int to_parent[2], to_child[2];
  REQUIRE(::pipe2(to_parent, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(to_child, O_CLOEXEC) == 0);
  const std::string exe = "/proc/" + std::to_string(::getpid()) + "/exe";
  const std::string filter = gpu::test_case_filter(kCase);
  const std::string var = "OXICUDA_GPU_CHECKPOINT_CHILD=" + std::to_string(to_parent[1]) + ":" + std::to_string(to_child[0]);
  std::vector<char*> env;
  for (char** e = environ; *e; ++e) env.push_back(*e);
  env.push_back(const_cast<char*>(var.c_str()));
  env.push_back(nullptr);
  char* argv[] = {const_cast<char*>(exe.c_str()), const_cast<char*>(filter.c_str()), nullptr};
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {  // (async-signal-safe calls only)
    ::fcntl(to_parent[1], F_SETFD, 0);
    ::fcntl(to_child[0], F_SETFD, 0);
    ::execve(argv[0], argv, env.data());
    ::_exit(127);
  }
  ::close(to_parent[1]);
  ::close(to_child[0]);
  c.pid = pid;
  c.ready = to_parent[0];
  c.go = to_child[1];
}

}  // namespace

TEST_CASE("issue 25 (6): a child process locked then checkpointed then restored then unlocked keeps its memory") {
  if (const char* spec = std::getenv("OXICUDA_GPU_CHECKPOINT_CHILD")) {
    child(spec);
    return;
  }
  (void)ctx();  // cuInit in this process: the driver's condition for a restore
  if (!checkpointing_available()) {
    MESSAGE("skipped: the driver lacks cuCheckpointProcess* (CUDA 12.8)");
    return;
  }
  Child c;
  spawn(c);
  char r = 0;
  REQUIRE(::read(c.ready, &r, 1) == 1);
  REQUIRE(r == 'R');
  const int pid = static_cast<int>(c.pid);
  try {
    // (Outside CHECK, so that a refusal reaches the catch below: under
    // compute-sanitizer the driver answers CUDA_ERROR_NOT_SUPPORTED here.)
    const ProcessState first = process_state(pid);
    CHECK(first == ProcessState::running);
    const int tid = restore_thread_id(pid);
    MESSAGE("issue 25 (6): child ", pid, " is running; its restore thread is ", tid);
    auto t0 = std::chrono::steady_clock::now();
    lock_process(pid, std::chrono::seconds(10));
    CHECK(process_state(pid) == ProcessState::locked);
    checkpoint_process(pid);
    auto t1 = std::chrono::steady_clock::now();
    CHECK(process_state(pid) == ProcessState::checkpointed);
    restore_process(pid);
    CHECK(process_state(pid) == ProcessState::locked);
    unlock_process(pid);
    auto t2 = std::chrono::steady_clock::now();
    CHECK(process_state(pid) == ProcessState::running);
    MESSAGE("issue 25 (6): lock + checkpoint ", std::chrono::duration<double, std::milli>(t1 - t0).count(),
            " ms, restore + unlock ", std::chrono::duration<double, std::milli>(t2 - t1).count(), " ms (not asserted)");
  } catch (const Error& e) {
    const bool limit = e.result() == ffi::CUDA_ERROR_NOT_SUPPORTED;
    const int code = c.finish();
    if (limit) {
      MESSAGE("skipped: the driver does not support checkpointing here (a documented refusal): ", e.what(),
              " (the child exited ", code, ")");
      return;
    }
    FAIL("the driver refused a checkpoint step of child " << pid << ": " << std::string(e.what()) << " (the child exited " << code
                                                           << ")");
  }
  CHECK(c.finish() == 0);
}
