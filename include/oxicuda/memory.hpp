// oxicuda/memory.hpp — the memory wing: device spans; copies; copies between devices; fills; device buffers;
// memory pools (the default one, and your own); 2D (pitched) memory and copies; managed memory; batched copies
// and managed-memory batches; registered host memory; pointer queries; memory shared between processes (IPC);
// virtual memory (physical memory, reserved ranges, mappings, growable buffers, memory shared by file
// descriptor or fabric handle).
//
// Including this header costs this wing's parts and the parts below that they
// use, no more. Its parts include only parts of this wing and of the wings
// below it (core, driver).
#pragma once

// clang-format off
#include "memory/span.hpp"
#include "memory/copy.hpp"
#include "memory/peer_copy.hpp"
#include "memory/fill.hpp"
#include "memory/pool.hpp"
#include "memory/buffer.hpp"
#include "memory/span_2d.hpp"
#include "memory/pitched.hpp"
#include "memory/managed.hpp"
#include "memory/copy_batch.hpp"
#include "memory/managed_batch.hpp"
#include "memory/registered.hpp"
#include "memory/pointer.hpp"
#include "memory/ipc.hpp"
#include "memory/physical_memory.hpp"
#include "memory/virtual_range.hpp"
#include "memory/memory_mapping.hpp"
#include "memory/shareable_memory.hpp"
#include "memory/growable_buffer.hpp"
#include "memory/external_memory.hpp"
#include "memory/external_semaphore.hpp"
// clang-format on
