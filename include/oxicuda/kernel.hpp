// oxicuda/kernel.hpp — the kernel wing: module images; Module; Library; Function; Module::global; Kernel<Sig> and its
// layout check; argument packing (shared by launches and graph nodes); launch config and launches;
// tensor maps (TMA descriptors) and their rules.
//
// Including this header costs this wing's parts and the parts below that they
// use, no more. Its parts include only parts of this wing and of the wings
// below it (core, driver, memory).
#pragma once

// clang-format off
#include "kernel/image.hpp"
#include "kernel/module.hpp"
#include "kernel/library.hpp"
#include "kernel/kernel_names.hpp"
#include "kernel/function.hpp"
#include "kernel/global.hpp"
#include "kernel/kernel.hpp"
#include "kernel/library_kernel.hpp"
#include "kernel/kernel_args.hpp"
#include "kernel/launch.hpp"
#include "kernel/tensor_map_rules.hpp"
#include "kernel/tensor_map.hpp"
// clang-format on
