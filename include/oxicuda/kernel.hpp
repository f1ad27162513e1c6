// oxicuda/kernel.hpp — the kernel wing: module images; Module; Function; Module::global; Kernel<Sig> and its
// layout check; argument packing (shared by launches and graph nodes); launch config and launches.
//
// Including this header costs this wing's parts and the parts below that they
// use, no more. Its parts include only parts of this wing and of the wings
// below it (core, driver, memory).
#pragma once

// clang-format off
#include "kernel/image.hpp"
#include "kernel/module.hpp"
#include "kernel/function.hpp"
#include "kernel/global.hpp"
#include "kernel/kernel.hpp"
#include "kernel/kernel_args.hpp"
#include "kernel/launch.hpp"
// clang-format on
