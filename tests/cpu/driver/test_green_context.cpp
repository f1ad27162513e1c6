// Green contexts (issue 25, capability 1) on the fake driver: the device's
// SMs split into groups by the driver's granularity (tests/fake/fake_green.cpp
// models cuda.h's rules: 8 SMs, a multiple of 8, on compute capability 9.0),
// bad input refused before the driver is asked, green contexts and their
// Contexts and Streams (ordinary ones: typed launches, events, graphs),
// destroyed once, after their last stream.
#include <doctest/doctest.h>

#include "../fixtures.hpp"

#include <string>
#include <vector>

using namespace oxicuda;

namespace {

bool says(const Error& e, const char* text) { return std::string(e.what()).find(text) != std::string::npos; }

// The fake's record of a live green context's SMs (-1: not live).
long green_sms(const GreenContext& g, bool first) {
  using Fn = long (*)(const void*, int);
  static const Fn fn = reinterpret_cast<Fn>(
      dlsym(dlopen(driver_info().library.c_str(), RTLD_NOW | RTLD_NOLOAD), "fake_green_sms"));
  const bool found = fn != nullptr;
  REQUIRE(found);
  return fn(g.raw(), first ? 1 : 0);
}

}  // namespace

TEST_CASE_FIXTURE(FakeTest, "green contexts: the device's SMs, split into groups rounded to the driver's granularity") {
  CHECK(green_contexts_available());
  const Device dev = Device::get(0);
  const SmResource all = SmResource::of(dev);
  REQUIRE(all);
  CHECK(all.sm_count() == 132);  // the fake's H100-like device
  CHECK(all.min_partition_size() == 8);
  CHECK(all.coscheduled_alignment() == 8);
  CHECK(all.device() == dev);
  CHECK(all.raw().type == ffi::CU_DEV_RESOURCE_TYPE_SM);

  // Two halves of at least 66 SMs: rounded up to 72, which two of do not fit.
  const Error too_many = error_of([&] { (void)all.split(2, 66); });
  CHECK(too_many.result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(says(too_many, "asked for 2 group(s) of at least 66 SMs of 132"));
  CHECK(says(too_many, "these SMs make 1 such group(s)"));
  // Halves of at least 64: exactly 64 each, 4 left over.
  const SmSplit halves = all.split(2, 64);
  REQUIRE(halves.size() == 2);
  CHECK(halves.groups().size() == 2);
  for (const SmResource& g : halves.groups()) {
    CHECK(g.sm_count() == 64);
    CHECK(g.device() == dev);
  }
  CHECK(halves.remainder().sm_count() == 4);
  // At least 5 SMs: the minimum and the alignment make groups of 8.
  const SmSplit small = all.split(3, 5);
  REQUIRE(small.size() == 3);
  CHECK(small.group(0).sm_count() == 8);
  CHECK(small.remainder().sm_count() == 132 - 24);
  // A group count of 0 asks the driver for its minimum.
  CHECK(all.split(16, 0).group(15).sm_count() == 8);
  // Ignoring co-scheduling: finer groups (2 SMs).
  CHECK(all.split(4, 1, {.ignore_coscheduling = true}).group(0).sm_count() == 2);

  // On compute capability 8.x: at least 4 SMs, a multiple of 2.
  fake.set_device_attribute(0, ffi::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 8);
  const SmResource ampere = SmResource::of(dev);
  CHECK(ampere.min_partition_size() == 4);
  CHECK(ampere.split(2, 5).group(1).sm_count() == 6);
  CHECK(ampere.split(2, 1).group(0).sm_count() == 4);
}

TEST_CASE_FIXTURE(FakeTest, "green contexts: bad input is an Error that names the rule, before the driver is asked") {
  const SmResource all = SmResource::of(Device::get(0));
  const long before = fake.calls("cuDevSmResourceSplitByCount");
  const Error none = error_of([&] { (void)all.split(0, 8); });
  CHECK(none.result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(says(none, "zero groups"));
  CHECK(says(error_of([&] { (void)all.split(33, 2); }), "more than SmSplit::max_groups (32)"));
  CHECK(says(error_of([&] { (void)all.split(1, 133); }), "the minimum is more SMs than there are"));
  CHECK(fake.calls("cuDevSmResourceSplitByCount") == before);
  // An empty resource, a moved-from green context, a group past the last.
  CHECK(error_of([&] { (void)SmResource().split(2, 8); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(error_of([&] { GreenContext g{SmResource()}; }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(SmResource().sm_count() == 0);
  const SmSplit two = all.split(2, 8);
  CHECK(says(error_of([&] { (void)two.group(2); }), "group 2 of a split of 2 group(s)"));
  GreenContext g(two.group(0));
  GreenContext moved = std::move(g);
  CHECK_FALSE(g);  // NOLINT(bugprone-use-after-move): a moved-from handle is empty
  const Error empty = error_of([&] { (void)g.stream(); });
  CHECK(empty.result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(says(empty, "oxicuda::GreenContext"));
  CHECK(error_of([&] { (void)g.sms(); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(error_of([&] { (void)g.device(); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK_FALSE(g.context());
  CHECK(g.use_count() == 0);
  // A group or the remainder of a split is not split again (the driver's
  // rule, checked before it is asked); a green context's SMs are.
  const long splits = fake.calls("cuDevSmResourceSplitByCount");
  const Error again = error_of([&] { (void)two.group(0).split(1, 8); });
  CHECK(again.result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(says(again, "a group or the remainder of an earlier split"));
  CHECK(says(again, "make a GreenContext of them and split its sms()"));
  CHECK(says(error_of([&] { (void)two.remainder().split(1, 8); }), "an earlier split"));
  CHECK(fake.calls("cuDevSmResourceSplitByCount") == splits);
  // (The fake driver refuses one that from_raw rebuilt, which no longer says where it came from.)
  CHECK(error_of([&] { (void)SmResource::from_raw(two.group(0).raw(), Device::get(0)).split(1, 8); }).result() ==
        ffi::CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION);
  CHECK(moved.sms().split(1, 8).group(0).sm_count() == 8);
  // Stream::own, which a green context's streams are made by, refuses a null stream.
  CHECK(says(error_of([&] { (void)Stream::own(nullptr, moved.context()); }), "oxicuda::Stream::own"));
  // A blocking stream is refused: the driver's green streams are non-blocking.
  CHECK(says(error_of([&] { (void)moved.stream({.non_blocking = false}); }), "non-blocking"));
}

TEST_CASE_FIXTURE(FakeTest, "green contexts: made from a group, each has its SMs; its streams are ordinary Streams") {
  const SmSplit halves = SmResource::of(Device::get(0)).split(2, 64);
  GreenContext left(halves.group(0)), right(halves.group(1));
  CHECK(left);
  CHECK(left != right);
  CHECK(left.device() == Device::get(0));
  CHECK(green_sms(left, false) == 64);
  CHECK(green_sms(right, false) == 64);
  CHECK(green_sms(left, true) != green_sms(right, true));  // disjoint
  CHECK(left.sms().sm_count() == 64);
  CHECK((fake.live("green") - at_start.green) == 2);

  // Its Context: a green one, usable where a Context is.
  const Context& lc = left.context();
  REQUIRE(lc);
  CHECK(lc.kind() == Context::Kind::green);
  CHECK(lc.green() == left.raw());
  CHECK(lc.device() == Device::get(0));
  CHECK(GreenContext::of(lc) == left);
  CHECK_FALSE(GreenContext::of(Context::primary(Device::get(0))));

  // Streams: typed launches, events, copies, as on any stream.
  Stream s = left.stream({.priority = -1});
  CHECK(s.owns());
  CHECK(s.non_blocking());
  CHECK(s.priority() == -1);
  CHECK(s.context() == lc);
  CHECK(fake.calls("cuGreenCtxStreamCreate") == 1);
  Module m = Module::from_ptx(lc, kFakePtx);
  auto dbl = m.kernel<void(float*, unsigned)>("dbl");
  std::vector<float> host{1, 2, 3, 4}, back(4);
  DeviceBuffer<float> buf(lc, 4);
  copy_async(s, buf, host);
  launch(s, dbl, {.grid = 1, .block = 4}, buf, 4u);
  Event done(lc);
  s.record(done);
  Stream other = right.stream();
  other.wait(done);
  copy_async(other, back, buf);
  other.synchronize();
  CHECK(back == std::vector<float>{2, 4, 6, 8});
  FakeLaunch last{};
  fake.last_launch(&last);
  CHECK(last.stream == s.raw());

  // A graph captured on a green stream, replayed there.
  Graph g = capture(s, [&](const Stream& q) { launch(q, dbl, {.grid = 1, .block = 4}, buf, 4u); });
  GraphExec exec{g};
  exec.launch(s);
  copy_async(s, back, buf);
  s.synchronize();
  CHECK(back == std::vector<float>{4, 8, 12, 16});

  // Which green context a stream runs on.
  CHECK(green_context_of(s) == left);
  const GreenContext found = green_context_of(s);
  CHECK(found.use_count() == left.use_count());  // (the result shares it)
  CHECK(green_context_of(other) == right);
  // A stream made with the green context's Context is the green context's too.
  Stream made(right.context());
  CHECK(green_context_of(made) == right);
  // An ordinary stream runs on none.
  Context primary = Context::primary(Device::get(0));
  Stream plain(primary);
  CHECK_FALSE(green_context_of(plain));
  // A borrowed green stream: the result borrows the green context.
  const GreenContext borrowed = green_context_of(Stream::borrow(s.raw()));
  CHECK(borrowed == left);
  CHECK(borrowed.context().kind() == Context::Kind::borrowed);
}

TEST_CASE_FIXTURE(FakeTest, "green contexts: destroyed once, after the last stream, Context or copy is gone") {
  const SmSplit halves = SmResource::of(Device::get(0)).split(2, 64);
  Stream s;
  Context ctx;
  CUstream raw_stream = nullptr;
  {
    GreenContext g(halves.group(0));
    CHECK(g.use_count() == 1);
    {
      GreenContext copy = g;
      CHECK(g.use_count() == 2);
    }
    s = g.stream();
    raw_stream = s.raw();
    ctx = g.context();
    CHECK(g.use_count() == 3);
  }
  // The GreenContext handles are gone; its stream and Context keep it.
  CHECK((fake.live("green") - at_start.green) == 1);
  CHECK(fake.calls("cuGreenCtxDestroy") == 0);
  {
    const Event e(ctx);  // (an Event keeps its Context too)
    s.record(e);
  }
  s = Stream();
  CHECK(fake.stream_destroys(raw_stream) == 1);
  CHECK(fake.calls("cuGreenCtxDestroy") == 0);
  ctx = Context();
  CHECK(fake.calls("cuGreenCtxDestroy") == 1);
  CHECK((fake.live("green") - at_start.green) == 0);

  // The stream is destroyed before its green context, whichever handle drops last.
  {
    GreenContext g(halves.group(1));
    s = g.stream();
  }
  CHECK((fake.live("green") - at_start.green) == 1);
  s = Stream();
  CHECK((fake.live("green") - at_start.green) == 0);
  CHECK(fake.calls("cuGreenCtxDestroy") == 2);
  CHECK(fake.calls("cuStreamDestroy") == 2);
}

TEST_CASE_FIXTURE(FakeTest, "green contexts: a failed conversion or creation leaks nothing; a failed destroy is reported, not thrown") {
  const SmResource group = SmResource::of(Device::get(0)).split(2, 64).group(0);
  fake.fail("cuCtxFromGreenCtx", 1, ffi::CUDA_ERROR_INVALID_CONTEXT);
  CHECK(error_of([&] { GreenContext g(group); }).call() == "cuCtxFromGreenCtx");
  CHECK(fake.calls("cuGreenCtxDestroy") == 1);  // the one made was destroyed
  fake.fail("cuGreenCtxStreamCreate", 1, ffi::CUDA_ERROR_OUT_OF_MEMORY);
  GreenContext g(group);
  const long streams = fake.live("stream");
  CHECK(error_of([&] { (void)g.stream(); }).result() == ffi::CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(fake.live("stream") == streams);
  static std::vector<Error> reported;
  reported.clear();
  const DiagnosticHook previous = set_diagnostic_hook([](const Error& e) { reported.push_back(e); });
  fake.fail("cuGreenCtxDestroy", 1, ffi::CUDA_ERROR_INVALID_CONTEXT);
  CUgreenCtx raw = g.raw();
  g = GreenContext();
  set_diagnostic_hook(previous);
  REQUIRE(reported.size() == 1);
  CHECK(reported[0].call() == "cuGreenCtxDestroy");
  // The fake kept it (the driver said no): destroy it for the balance check.
  REQUIRE(detail::api().GreenCtxDestroy(raw) == ffi::CUDA_SUCCESS);
}
