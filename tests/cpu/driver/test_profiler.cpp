// ProfilerRange on the fake driver: one start and one stop per context
// however the ranges nest or overlap, across threads; the context current
// for both calls and the caller's restored; a failed start opens nothing; a
// failed stop reaches the diagnostic hook; moved-from and empty are safe.
#include <doctest/doctest.h>

#include "../fixtures.hpp"

#include <atomic>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace oxicuda;

TEST_CASE_FIXTURE(ContextTest, "profiler: nested ranges start once and stop once, with the context current for both") {
  REQUIRE(Context::current().raw() == nullptr);
  {
    ProfilerRange outer(ctx);
    CHECK(fake.calls("cuProfilerStart") == 1);
    CHECK(ProfilerRange::open_in(ctx) == 1);
    CHECK(Context::current().raw() == nullptr);  // restored after the start
    {
      ProfilerRange inner(ctx);
      CHECK(ProfilerRange::open_in(ctx) == 2);
    }
    CHECK(fake.calls("cuProfilerStart") == 1);
    CHECK(fake.calls("cuProfilerStop") == 0);  // the outer range is still open
  }
  CHECK(fake.calls("cuProfilerStop") == 1);
  CHECK(ProfilerRange::open_in(ctx) == 0);
  CHECK(Context::current().raw() == nullptr);
  // Without the guard's context the fake, as the driver, answers
  // CUDA_ERROR_INVALID_CONTEXT: both calls succeeded, so they had it.
}

TEST_CASE_FIXTURE(ContextTest, "profiler: overlapping ranges on several threads stop when the last one closes") {
  ProfilerRange first(ctx);
  std::atomic<int> opened{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        ProfilerRange r(ctx);
        opened.fetch_add(1);
      }
    });
  for (auto& t : threads) t.join();
  CHECK(opened.load() == 1600);
  CHECK(fake.calls("cuProfilerStart") == 1);  // `first` kept it on throughout
  CHECK(fake.calls("cuProfilerStop") == 0);
  ProfilerRange moved = std::move(first);
  CHECK_FALSE(first);  // NOLINT(bugprone-use-after-move)
  CHECK(moved);
  first = ProfilerRange(ctx);  // a second range, into the moved-from one
  CHECK(ProfilerRange::open_in(ctx) == 2);
  moved = std::move(first);  // closes what `moved` held: one left open
  CHECK(ProfilerRange::open_in(ctx) == 1);
  CHECK(fake.calls("cuProfilerStop") == 0);
  moved = ProfilerRange(ctx);
  { ProfilerRange done = std::move(moved); }
  CHECK(fake.calls("cuProfilerStop") == 1);
  CHECK(ProfilerRange::open_in(ctx) == 0);
}

TEST_CASE_FIXTURE(ContextTest, "profiler: two contexts keep their own count") {
  Context other = Context::create(Device::get(0));
  ProfilerRange a(ctx);
  {
    ProfilerRange b(other);
    CHECK(fake.calls("cuProfilerStart") == 2);
    CHECK(ProfilerRange::open_in(other) == 1);
  }
  CHECK(fake.calls("cuProfilerStop") == 1);
  CHECK(ProfilerRange::open_in(ctx) == 1);
}

TEST_CASE_FIXTURE(ContextTest, "profiler: a failed start is an Error and opens nothing; a failed stop reaches the hook") {
  fake.fail("cuProfilerStart", 1, ffi::CUDA_ERROR_NOT_INITIALIZED);
  const Error e = error_of([&] { ProfilerRange r(ctx); });
  CHECK(e.result() == ffi::CUDA_ERROR_NOT_INITIALIZED);
  CHECK(std::string(e.what()).find("cuProfilerStart") != std::string::npos);
  CHECK(ProfilerRange::open_in(ctx) == 0);
  CHECK(Context::current().raw() == nullptr);

  static std::vector<std::string> reported;
  reported.clear();
  const DiagnosticHook previous = set_diagnostic_hook([](const Error& err) noexcept { reported.emplace_back(err.what()); });
  fake.fail("cuProfilerStop", 1, ffi::CUDA_ERROR_UNKNOWN);
  { ProfilerRange r(ctx); }
  set_diagnostic_hook(previous);
  REQUIRE(reported.size() == 1);
  CHECK(reported[0].find("stopping the profiler (oxicuda::ProfilerRange)") != std::string::npos);
  CHECK(reported[0].find("cuProfilerStop") != std::string::npos);
  CHECK(ProfilerRange::open_in(ctx) == 0);  // closed all the same: the next range starts again
  { ProfilerRange r(ctx); }
  CHECK(fake.calls("cuProfilerStart") == 3);
}

TEST_CASE_FIXTURE(FakeTest, "profiler: an empty or moved-from Context is an Error before any driver call") {
  const Error e = error_of([] { ProfilerRange r{Context()}; });
  CHECK(e.result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(e.detail().find("oxicuda::Context") != std::string::npos);
  CHECK(fake.calls("cuProfilerStart") == 0);
  CHECK(ProfilerRange::open_in(Context()) == 0);
}
