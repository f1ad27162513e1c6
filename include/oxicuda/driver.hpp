// oxicuda/driver.hpp — the driver wing: ownership machinery; host callbacks; device; context; the current
// context's guards; the shared in-context handle; IPC handles' bytes; event; the stream view and the enqueue
// path; stream; SM resources and green contexts; profiler ranges; a context's limits and cache preference;
// peer access between devices; the device pool.
//
// Including this header costs this wing's parts and the parts below that they
// use, no more. Its parts include only parts of this wing and of the wings
// below it (core).
#pragma once

// clang-format off
#include "driver/callback.hpp"
#include "driver/destroyed_contexts.hpp"
#include "driver/device.hpp"
#include "driver/handle.hpp"
#include "driver/context.hpp"
#include "driver/current.hpp"
#include "driver/in_context.hpp"
#include "driver/ipc_handle.hpp"
#include "driver/event.hpp"
#include "driver/stream_ref.hpp"
#include "driver/stream.hpp"
#include "driver/sm_resource.hpp"
#include "driver/green_context.hpp"
#include "driver/access_policy.hpp"
#include "driver/profiler.hpp"
#include "driver/limits.hpp"
#include "driver/peer.hpp"
#include "driver/device_pool.hpp"
#include "driver/checkpoint.hpp"
// clang-format on
