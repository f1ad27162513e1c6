// oxicuda/all.hpp — every part of oxicuda; the modular form of oxicuda.hpp.
#pragma once

// The order is the layering, bottom up (tools/amalgamate.py follows it).
// clang-format off
#include "config.hpp"
#include "ffi.hpp"
#include "loader.hpp"
#include "error.hpp"
#include "callback.hpp"
#include "device.hpp"
#include "handle.hpp"
#include "context.hpp"
#include "in_context.hpp"
#include "event.hpp"
#include "stream.hpp"
#include "image.hpp"
#include "module.hpp"
#include "kernel.hpp"
#include "span.hpp"
#include "copy.hpp"
#include "buffer.hpp"
#include "pool.hpp"
#include "kernel_args.hpp"
#include "launch.hpp"
#include "graph.hpp"
#include "graph_exec.hpp"
#include "capture.hpp"
// clang-format on
