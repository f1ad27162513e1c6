// oxicuda/core/ffi.hpp — the part of the CUDA driver ABI that oxicuda uses,
// declared by hand so that no toolkit is needed to compile.
//
// Handle types are the toolkit's own incomplete structs at global scope, so a
// `CUstream` from oxicuda is the `CUstream` of cuda.h and of every library
// built on it. Everything else (results, enums, flags, structs) lives in
// oxicuda::ffi, where it cannot collide with cuda.h included before or after.
// The ABI test (tests/abi/abi_agreement.cpp) checks all of it against cuda.h.
#pragma once

#include <cstddef>
#include <cstdint>

#include "config.hpp"

// The toolkit's handle types, spelled exactly as cuda.h spells them (a
// typedef may be repeated when it names the same type).
typedef struct CUctx_st* CUcontext;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
typedef struct CUstream_st* CUstream;
typedef struct CUevent_st* CUevent;
typedef struct CUmemPoolHandle_st* CUmemoryPool;
typedef struct CUlinkState_st* CUlinkState;
typedef struct CUgraph_st* CUgraph;
typedef struct CUgraphNode_st* CUgraphNode;
typedef struct CUgraphExec_st* CUgraphExec;
typedef struct CUuserObject_st* CUuserObject;
typedef struct CUarray_st* CUarray;
typedef struct CUkern_st* CUkernel;
typedef struct CUlib_st* CUlibrary;
typedef struct CUgreenCtx_st* CUgreenCtx;
typedef struct CUdevResourceDesc_st* CUdevResourceDesc;
typedef struct CUextMemory_st* CUexternalMemory;
typedef struct CUextSemaphore_st* CUexternalSemaphore;

OXICUDA_DETAIL_NAMESPACE_BEGIN
namespace ffi {

using CUdevice = int;
using CUdeviceptr = unsigned long long;
using cuuint32_t = std::uint32_t;
using cuuint64_t = std::uint64_t;
using CUhostFn = void(OXICUDA_DETAIL_CUDAAPI*)(void* user_data);
using CUoccupancyB2DSize = std::size_t(OXICUDA_DETAIL_CUDAAPI*)(int block_size);
using CUgraphConditionalHandle = cuuint64_t;

// CUresult: every value of the toolkit's enum (tools/gen_ffi.py).
enum CUresult : int {
  // clang-format off
  // <gen:results>
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_DEINITIALIZED = 4,
  CUDA_ERROR_PROFILER_DISABLED = 5,
  CUDA_ERROR_PROFILER_NOT_INITIALIZED = 6,
  CUDA_ERROR_PROFILER_ALREADY_STARTED = 7,
  CUDA_ERROR_PROFILER_ALREADY_STOPPED = 8,
  CUDA_ERROR_STUB_LIBRARY = 34,
  CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER = 36,
  CUDA_ERROR_DEVICE_UNAVAILABLE = 46,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_DEVICE_NOT_LICENSED = 102,
  CUDA_ERROR_INVALID_IMAGE = 200,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_CONTEXT_ALREADY_CURRENT = 202,
  CUDA_ERROR_MAP_FAILED = 205,
  CUDA_ERROR_UNMAP_FAILED = 206,
  CUDA_ERROR_ARRAY_IS_MAPPED = 207,
  CUDA_ERROR_ALREADY_MAPPED = 208,
  CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
  CUDA_ERROR_ALREADY_ACQUIRED = 210,
  CUDA_ERROR_NOT_MAPPED = 211,
  CUDA_ERROR_NOT_MAPPED_AS_ARRAY = 212,
  CUDA_ERROR_NOT_MAPPED_AS_POINTER = 213,
  CUDA_ERROR_ECC_UNCORRECTABLE = 214,
  CUDA_ERROR_UNSUPPORTED_LIMIT = 215,
  CUDA_ERROR_CONTEXT_ALREADY_IN_USE = 216,
  CUDA_ERROR_PEER_ACCESS_UNSUPPORTED = 217,
  CUDA_ERROR_INVALID_PTX = 218,
  CUDA_ERROR_INVALID_GRAPHICS_CONTEXT = 219,
  CUDA_ERROR_NVLINK_UNCORRECTABLE = 220,
  CUDA_ERROR_JIT_COMPILER_NOT_FOUND = 221,
  CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
  CUDA_ERROR_JIT_COMPILATION_DISABLED = 223,
  CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY = 224,
  CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC = 225,
  CUDA_ERROR_CONTAINED = 226,
  CUDA_ERROR_INVALID_SOURCE = 300,
  CUDA_ERROR_FILE_NOT_FOUND = 301,
  CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND = 302,
  CUDA_ERROR_SHARED_OBJECT_INIT_FAILED = 303,
  CUDA_ERROR_OPERATING_SYSTEM = 304,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_ILLEGAL_STATE = 401,
  CUDA_ERROR_LOSSY_QUERY = 402,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_ILLEGAL_ADDRESS = 700,
  CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
  CUDA_ERROR_LAUNCH_TIMEOUT = 702,
  CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING = 703,
  CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704,
  CUDA_ERROR_PEER_ACCESS_NOT_ENABLED = 705,
  CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE = 708,
  CUDA_ERROR_CONTEXT_IS_DESTROYED = 709,
  CUDA_ERROR_ASSERT = 710,
  CUDA_ERROR_TOO_MANY_PEERS = 711,
  CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
  CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713,
  CUDA_ERROR_HARDWARE_STACK_ERROR = 714,
  CUDA_ERROR_ILLEGAL_INSTRUCTION = 715,
  CUDA_ERROR_MISALIGNED_ADDRESS = 716,
  CUDA_ERROR_INVALID_ADDRESS_SPACE = 717,
  CUDA_ERROR_INVALID_PC = 718,
  CUDA_ERROR_LAUNCH_FAILED = 719,
  CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE = 720,
  CUDA_ERROR_TENSOR_MEMORY_LEAK = 721,
  CUDA_ERROR_NOT_PERMITTED = 800,
  CUDA_ERROR_NOT_SUPPORTED = 801,
  CUDA_ERROR_SYSTEM_NOT_READY = 802,
  CUDA_ERROR_SYSTEM_DRIVER_MISMATCH = 803,
  CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE = 804,
  CUDA_ERROR_MPS_CONNECTION_FAILED = 805,
  CUDA_ERROR_MPS_RPC_FAILURE = 806,
  CUDA_ERROR_MPS_SERVER_NOT_READY = 807,
  CUDA_ERROR_MPS_MAX_CLIENTS_REACHED = 808,
  CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED = 809,
  CUDA_ERROR_MPS_CLIENT_TERMINATED = 810,
  CUDA_ERROR_CDP_NOT_SUPPORTED = 811,
  CUDA_ERROR_CDP_VERSION_MISMATCH = 812,
  CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
  CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
  CUDA_ERROR_STREAM_CAPTURE_MERGE = 902,
  CUDA_ERROR_STREAM_CAPTURE_UNMATCHED = 903,
  CUDA_ERROR_STREAM_CAPTURE_UNJOINED = 904,
  CUDA_ERROR_STREAM_CAPTURE_ISOLATION = 905,
  CUDA_ERROR_STREAM_CAPTURE_IMPLICIT = 906,
  CUDA_ERROR_CAPTURED_EVENT = 907,
  CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD = 908,
  CUDA_ERROR_TIMEOUT = 909,
  CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE = 910,
  CUDA_ERROR_EXTERNAL_DEVICE = 911,
  CUDA_ERROR_INVALID_CLUSTER_SIZE = 912,
  CUDA_ERROR_FUNCTION_NOT_LOADED = 913,
  CUDA_ERROR_INVALID_RESOURCE_TYPE = 914,
  CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION = 915,
  CUDA_ERROR_KEY_ROTATION = 916,
  CUDA_ERROR_UNKNOWN = 999,
  // </gen:results>
  // clang-format on
};

struct ResultText {
  int code;
  const char* name;
  const char* text;
};

// Names and texts of every CUresult. The driver's own text is preferred when
// a driver is loaded; this table answers when none is (or it is the stub).
inline constexpr ResultText result_texts[] = {
    // clang-format off
    // <gen:result_texts>
  {0, "CUDA_SUCCESS", "the API call returned with no errors"},
  {1, "CUDA_ERROR_INVALID_VALUE", "one or more of the parameters passed to the API call is not within an acceptable range of values"},
  {2, "CUDA_ERROR_OUT_OF_MEMORY", "the API call failed because it was unable to allocate enough memory or other resources to perform the requested operation"},
  {3, "CUDA_ERROR_NOT_INITIALIZED", "the CUDA driver has not been initialized with cuInit() or that initialization has failed"},
  {4, "CUDA_ERROR_DEINITIALIZED", "the CUDA driver is in the process of shutting down"},
  {5, "CUDA_ERROR_PROFILER_DISABLED", "profiler is not initialized for this run"},
  {6, "CUDA_ERROR_PROFILER_NOT_INITIALIZED", "this error return is deprecated as of CUDA 5.0"},
  {7, "CUDA_ERROR_PROFILER_ALREADY_STARTED", "this error return is deprecated as of CUDA 5.0"},
  {8, "CUDA_ERROR_PROFILER_ALREADY_STOPPED", "this error return is deprecated as of CUDA 5.0"},
  {34, "CUDA_ERROR_STUB_LIBRARY", "the CUDA driver that the application has loaded is a stub library"},
  {36, "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER", "the API call requires a newer CUDA driver than the one currently installed"},
  {46, "CUDA_ERROR_DEVICE_UNAVAILABLE", "requested CUDA device is unavailable at the current time"},
  {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable devices were detected by the installed CUDA driver"},
  {101, "CUDA_ERROR_INVALID_DEVICE", "the device ordinal supplied by the user does not correspond to a valid CUDA device or that the action requested is invalid for the specified device"},
  {102, "CUDA_ERROR_DEVICE_NOT_LICENSED", "the Grid license is not applied"},
  {200, "CUDA_ERROR_INVALID_IMAGE", "the device kernel image is invalid"},
  {201, "CUDA_ERROR_INVALID_CONTEXT", "this most frequently indicates that there is no context bound to the current thread"},
  {202, "CUDA_ERROR_CONTEXT_ALREADY_CURRENT", "this indicated that the context being supplied as a parameter to the API call was already the active context"},
  {205, "CUDA_ERROR_MAP_FAILED", "a map or register operation has failed"},
  {206, "CUDA_ERROR_UNMAP_FAILED", "an unmap or unregister operation has failed"},
  {207, "CUDA_ERROR_ARRAY_IS_MAPPED", "the specified array is currently mapped and thus cannot be destroyed"},
  {208, "CUDA_ERROR_ALREADY_MAPPED", "the resource is already mapped"},
  {209, "CUDA_ERROR_NO_BINARY_FOR_GPU", "there is no kernel image available that is suitable for the device"},
  {210, "CUDA_ERROR_ALREADY_ACQUIRED", "a resource has already been acquired"},
  {211, "CUDA_ERROR_NOT_MAPPED", "a resource is not mapped"},
  {212, "CUDA_ERROR_NOT_MAPPED_AS_ARRAY", "a mapped resource is not available for access as an array"},
  {213, "CUDA_ERROR_NOT_MAPPED_AS_POINTER", "a mapped resource is not available for access as a pointer"},
  {214, "CUDA_ERROR_ECC_UNCORRECTABLE", "an uncorrectable ECC error was detected during execution"},
  {215, "CUDA_ERROR_UNSUPPORTED_LIMIT", "the CUlimit passed to the API call is not supported by the active device"},
  {216, "CUDA_ERROR_CONTEXT_ALREADY_IN_USE", "the CUcontext passed to the API call can only be bound to a single CPU thread at a time but is already bound to a CPU thread"},
  {217, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", "peer access is not supported across the given devices"},
  {218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
  {219, "CUDA_ERROR_INVALID_GRAPHICS_CONTEXT", "an error with OpenGL or DirectX context"},
  {220, "CUDA_ERROR_NVLINK_UNCORRECTABLE", "an uncorrectable NVLink error was detected during the execution"},
  {221, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND", "the PTX JIT compiler library was not found"},
  {222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "the provided PTX was compiled with an unsupported toolchain"},
  {223, "CUDA_ERROR_JIT_COMPILATION_DISABLED", "the PTX JIT compilation was disabled"},
  {224, "CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY", "the CUexecAffinityType passed to the API call is not supported by the active device"},
  {225, "CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC", "the code to be compiled by the PTX JIT contains unsupported call to cudaDeviceSynchronize"},
  {226, "CUDA_ERROR_CONTAINED", "an exception occurred on the device that is now contained by the GPU's error containment capability"},
  {300, "CUDA_ERROR_INVALID_SOURCE", "the device kernel source is invalid"},
  {301, "CUDA_ERROR_FILE_NOT_FOUND", "the file specified was not found"},
  {302, "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND", "a link to a shared object failed to resolve"},
  {303, "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED", "initialization of a shared object failed"},
  {304, "CUDA_ERROR_OPERATING_SYSTEM", "an OS call failed"},
  {400, "CUDA_ERROR_INVALID_HANDLE", "a resource handle passed to the API call was not valid"},
  {401, "CUDA_ERROR_ILLEGAL_STATE", "a resource required by the API call is not in a valid state to perform the requested operation"},
  {402, "CUDA_ERROR_LOSSY_QUERY", "an attempt was made to introspect an object in a way that would discard semantically important information"},
  {500, "CUDA_ERROR_NOT_FOUND", "a named symbol was not found"},
  {600, "CUDA_ERROR_NOT_READY", "asynchronous operations issued previously have not completed yet"},
  {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "while executing a kernel, the device encountered a load or store instruction on an invalid memory address"},
  {701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "a launch did not occur because it did not have appropriate resources"},
  {702, "CUDA_ERROR_LAUNCH_TIMEOUT", "the device kernel took too long to execute"},
  {703, "CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING", "this error indicates a kernel launch that uses an incompatible texturing mode"},
  {704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "a call to cuCtxEnablePeerAccess() is trying to re-enable peer access to a context which has already had peer access to it enabled"},
  {705, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", "cuCtxDisablePeerAccess() is trying to disable peer access which has not been enabled yet via cuCtxEnablePeerAccess()"},
  {708, "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE", "the primary context for the specified device has already been initialized"},
  {709, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "the context current to the calling thread has been destroyed using cuCtxDestroy, or is a primary context which has not yet been initialized"},
  {710, "CUDA_ERROR_ASSERT", "a device-side assert triggered during kernel execution"},
  {711, "CUDA_ERROR_TOO_MANY_PEERS", "the hardware resources required to enable peer access have been exhausted for one or more of the devices passed to cuCtxEnablePeerAccess()"},
  {712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", "the memory range passed to cuMemHostRegister() has already been registered"},
  {713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", "the pointer passed to cuMemHostUnregister() does not correspond to any currently registered memory region"},
  {714, "CUDA_ERROR_HARDWARE_STACK_ERROR", "while executing a kernel, the device encountered a stack error"},
  {715, "CUDA_ERROR_ILLEGAL_INSTRUCTION", "while executing a kernel, the device encountered an illegal instruction"},
  {716, "CUDA_ERROR_MISALIGNED_ADDRESS", "while executing a kernel, the device encountered a load or store instruction on a memory address which is not aligned"},
  {717, "CUDA_ERROR_INVALID_ADDRESS_SPACE", "while executing a kernel, the device encountered an instruction which can only operate on memory locations in certain address spaces (global, shared, or local), but was supplied a memory address not belonging to an allowed address space"},
  {718, "CUDA_ERROR_INVALID_PC", "while executing a kernel, the device program counter wrapped its address space"},
  {719, "CUDA_ERROR_LAUNCH_FAILED", "an exception occurred on the device while executing a kernel"},
  {720, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE", "the number of blocks launched per grid for a kernel that was launched via either cuLaunchCooperativeKernel or cuLaunchCooperativeKernelMultiDevice exceeds the maximum number of blocks as allowed by cuOccupancyMaxActiveBlocksPerMultiprocessor or cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags times the number of multiprocessors as specified by the device attribute CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"},
  {721, "CUDA_ERROR_TENSOR_MEMORY_LEAK", "an exception occurred on the device while exiting a kernel using tensor memory: the tensor memory was not completely deallocated"},
  {800, "CUDA_ERROR_NOT_PERMITTED", "the attempted operation is not permitted"},
  {801, "CUDA_ERROR_NOT_SUPPORTED", "the attempted operation is not supported on the current system or device"},
  {802, "CUDA_ERROR_SYSTEM_NOT_READY", "the system is not yet ready to start any CUDA work"},
  {803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "there is a mismatch between the versions of the display driver and the CUDA driver"},
  {804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", "the system was upgraded to run with forward compatibility but the visible hardware detected by CUDA does not support this configuration"},
  {805, "CUDA_ERROR_MPS_CONNECTION_FAILED", "the MPS client failed to connect to the MPS control daemon or the MPS server"},
  {806, "CUDA_ERROR_MPS_RPC_FAILURE", "the remote procedural call between the MPS server and the MPS client failed"},
  {807, "CUDA_ERROR_MPS_SERVER_NOT_READY", "the MPS server is not ready to accept new MPS client requests"},
  {808, "CUDA_ERROR_MPS_MAX_CLIENTS_REACHED", "the hardware resources required to create MPS client have been exhausted"},
  {809, "CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED", "this error indicates the the hardware resources required to support device connections have been exhausted"},
  {810, "CUDA_ERROR_MPS_CLIENT_TERMINATED", "the MPS client has been terminated by the server"},
  {811, "CUDA_ERROR_CDP_NOT_SUPPORTED", "the module is using CUDA Dynamic Parallelism, but the current configuration, like MPS, does not support it"},
  {812, "CUDA_ERROR_CDP_VERSION_MISMATCH", "a module contains an unsupported interaction between different versions of CUDA Dynamic Parallelism"},
  {900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "the operation is not permitted when the stream is capturing"},
  {901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "the current capture sequence on the stream has been invalidated due to a previous error"},
  {902, "CUDA_ERROR_STREAM_CAPTURE_MERGE", "the operation would have resulted in a merge of two independent capture sequences"},
  {903, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED", "the capture was not initiated in this stream"},
  {904, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED", "the capture sequence contains a fork that was not joined to the primary stream"},
  {905, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION", "a dependency would have been created which crosses the capture sequence boundary"},
  {906, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT", "this error indicates a disallowed implicit dependency on a current capture sequence from cudaStreamLegacy"},
  {907, "CUDA_ERROR_CAPTURED_EVENT", "the operation is not permitted on an event which was last recorded in a capturing stream"},
  {908, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", "a stream capture sequence not initiated with the CU_STREAM_CAPTURE_MODE_RELAXED argument to cuStreamBeginCapture was passed to cuStreamEndCapture in a different thread"},
  {909, "CUDA_ERROR_TIMEOUT", "the timeout specified for the wait operation has lapsed"},
  {910, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE", "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update"},
  {911, "CUDA_ERROR_EXTERNAL_DEVICE", "an async error has occurred in a device outside of CUDA"},
  {912, "CUDA_ERROR_INVALID_CLUSTER_SIZE", "indicates a kernel launch error due to cluster misconfiguration"},
  {913, "CUDA_ERROR_FUNCTION_NOT_LOADED", "indiciates a function handle is not loaded when calling an API that requires a loaded function"},
  {914, "CUDA_ERROR_INVALID_RESOURCE_TYPE", "this error indicates one or more resources passed in are not valid resource types for the operation"},
  {915, "CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION", "this error indicates one or more resources are insufficient or non-applicable for the operation"},
  {916, "CUDA_ERROR_KEY_ROTATION", "an error happened during the key rotation sequence"},
  {999, "CUDA_ERROR_UNKNOWN", "an unknown internal error has occurred"},
    // </gen:result_texts>
    // clang-format on
};

enum CUdevice_attribute : int {
  // clang-format off
  // <gen:device_attr>
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y = 3,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z = 4,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y = 6,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z = 7,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
  CU_DEVICE_ATTRIBUTE_SHARED_MEMORY_PER_BLOCK = 8,
  CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY = 9,
  CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
  CU_DEVICE_ATTRIBUTE_MAX_PITCH = 11,
  CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK = 12,
  CU_DEVICE_ATTRIBUTE_REGISTERS_PER_BLOCK = 12,
  CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13,
  CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT = 14,
  CU_DEVICE_ATTRIBUTE_GPU_OVERLAP = 15,
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT = 17,
  CU_DEVICE_ATTRIBUTE_INTEGRATED = 18,
  CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY = 19,
  CU_DEVICE_ATTRIBUTE_COMPUTE_MODE = 20,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH = 21,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH = 22,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT = 23,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH = 24,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT = 25,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH = 26,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_WIDTH = 27,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_HEIGHT = 28,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_LAYERS = 29,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_ARRAY_WIDTH = 27,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_ARRAY_HEIGHT = 28,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_ARRAY_NUMSLICES = 29,
  CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT = 30,
  CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS = 31,
  CU_DEVICE_ATTRIBUTE_ECC_ENABLED = 32,
  CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
  CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34,
  CU_DEVICE_ATTRIBUTE_TCC_DRIVER = 35,
  CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36,
  CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH = 37,
  CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39,
  CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT = 40,
  CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_WIDTH = 42,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_LAYERS = 43,
  CU_DEVICE_ATTRIBUTE_CAN_TEX2D_GATHER = 44,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_WIDTH = 45,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_HEIGHT = 46,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE = 47,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE = 48,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE = 49,
  CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50,
  CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT = 51,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_WIDTH = 52,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH = 53,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS = 54,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_WIDTH = 55,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_WIDTH = 56,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_HEIGHT = 57,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_WIDTH = 58,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_HEIGHT = 59,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_DEPTH = 60,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_WIDTH = 61,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_LAYERS = 62,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_WIDTH = 63,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_HEIGHT = 64,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_LAYERS = 65,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_WIDTH = 66,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH = 67,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS = 68,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LINEAR_WIDTH = 69,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_WIDTH = 70,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_HEIGHT = 71,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_PITCH = 72,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH = 73,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT = 74,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH = 77,
  CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED = 78,
  CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED = 79,
  CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED = 80,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81,
  CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR = 82,
  CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY = 83,
  CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD = 84,
  CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID = 85,
  CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED = 86,
  CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO = 87,
  CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS = 88,
  CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS = 89,
  CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED = 90,
  CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM = 91,
  CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1 = 92,
  CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS_V1 = 93,
  CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR_V1 = 94,
  CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH = 95,
  CU_DEVICE_ATTRIBUTE_COOPERATIVE_MULTI_DEVICE_LAUNCH = 96,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
  CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES = 98,
  CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED = 99,
  CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES = 100,
  CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST = 101,
  CU_DEVICE_ATTRIBUTE_VIRTUAL_ADDRESS_MANAGEMENT_SUPPORTED = 102,
  CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102,
  CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED = 103,
  CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_HANDLE_SUPPORTED = 104,
  CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED = 105,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR = 106,
  CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED = 107,
  CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE = 108,
  CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE = 109,
  CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED = 110,
  CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK = 111,
  CU_DEVICE_ATTRIBUTE_SPARSE_CUDA_ARRAY_SUPPORTED = 112,
  CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED = 113,
  CU_DEVICE_ATTRIBUTE_TIMELINE_SEMAPHORE_INTEROP_SUPPORTED = 114,
  CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 115,
  CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED = 116,
  CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS = 117,
  CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING = 118,
  CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES = 119,
  CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH = 120,
  CU_DEVICE_ATTRIBUTE_DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED = 121,
  CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS = 122,
  CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR = 123,
  CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 124,
  CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED = 125,
  CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT = 126,
  CU_DEVICE_ATTRIBUTE_TENSOR_MAP_ACCESS_SUPPORTED = 127,
  CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED = 128,
  CU_DEVICE_ATTRIBUTE_UNIFIED_FUNCTION_POINTERS = 129,
  CU_DEVICE_ATTRIBUTE_NUMA_CONFIG = 130,
  CU_DEVICE_ATTRIBUTE_NUMA_ID = 131,
  CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED = 132,
  CU_DEVICE_ATTRIBUTE_MPS_ENABLED = 133,
  CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID = 134,
  CU_DEVICE_ATTRIBUTE_D3D12_CIG_SUPPORTED = 135,
  CU_DEVICE_ATTRIBUTE_MEM_DECOMPRESS_ALGORITHM_MASK = 136,
  CU_DEVICE_ATTRIBUTE_MEM_DECOMPRESS_MAXIMUM_LENGTH = 137,
  CU_DEVICE_ATTRIBUTE_VULKAN_CIG_SUPPORTED = 138,
  CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID = 139,
  CU_DEVICE_ATTRIBUTE_GPU_PCI_SUBSYSTEM_ID = 140,
  CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 141,
  CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED = 142,
  CU_DEVICE_ATTRIBUTE_HOST_NUMA_MULTINODE_IPC_SUPPORTED = 143,
  CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED = 144,
  CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 145,
  CU_DEVICE_ATTRIBUTE_HOST_ALLOC_DMA_BUF_SUPPORTED = 146,
  CU_DEVICE_ATTRIBUTE_ONLY_PARTIAL_HOST_NATIVE_ATOMIC_SUPPORTED = 147,
  // </gen:device_attr>
  // clang-format on
};

enum CUfunction_attribute : int {
  CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
  CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
  CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES = 2,
  CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3,
  CU_FUNC_ATTRIBUTE_NUM_REGS = 4,
  CU_FUNC_ATTRIBUTE_PTX_VERSION = 5,
  CU_FUNC_ATTRIBUTE_BINARY_VERSION = 6,
  CU_FUNC_ATTRIBUTE_CACHE_MODE_CA = 7,
  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
  CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT = 9,
};

enum CUjit_option : int {
  CU_JIT_MAX_REGISTERS = 0,
  CU_JIT_THREADS_PER_BLOCK = 1,
  CU_JIT_WALL_TIME = 2,
  CU_JIT_INFO_LOG_BUFFER = 3,
  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
  CU_JIT_ERROR_LOG_BUFFER = 5,
  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
  CU_JIT_OPTIMIZATION_LEVEL = 7,
  CU_JIT_TARGET_FROM_CUCONTEXT = 8,
  CU_JIT_TARGET = 9,
  CU_JIT_FALLBACK_STRATEGY = 10,
  CU_JIT_GENERATE_DEBUG_INFO = 11,
  CU_JIT_LOG_VERBOSE = 12,
  CU_JIT_GENERATE_LINE_INFO = 13,
};

enum CUlibraryOption : int {
  CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE = 0,
  CU_LIBRARY_BINARY_IS_PRESERVED = 1,
};

enum CUjitInputType : int {
  CU_JIT_INPUT_CUBIN = 0,
  CU_JIT_INPUT_PTX = 1,
  CU_JIT_INPUT_FATBINARY = 2,
  CU_JIT_INPUT_OBJECT = 3,
  CU_JIT_INPUT_LIBRARY = 4,
};

enum CUdriverProcAddressQueryResult : int {
  CU_GET_PROC_ADDRESS_SUCCESS = 0,
  CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
  CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2,
};

enum CUdriverProcAddress_flags : int {
  CU_GET_PROC_ADDRESS_DEFAULT = 0,
  CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1,
  CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 2,
};

enum CUctx_flags : unsigned {
  CU_CTX_SCHED_AUTO = 0x00,
  CU_CTX_SCHED_SPIN = 0x01,
  CU_CTX_SCHED_YIELD = 0x02,
  CU_CTX_SCHED_BLOCKING_SYNC = 0x04,
  CU_CTX_SCHED_MASK = 0x07,
  CU_CTX_LMEM_RESIZE_TO_MAX = 0x10,
};

enum CUstream_flags : unsigned {
  CU_STREAM_DEFAULT = 0x0,
  CU_STREAM_NON_BLOCKING = 0x1,
};

enum CUevent_flags : unsigned {
  CU_EVENT_DEFAULT = 0x0,
  CU_EVENT_BLOCKING_SYNC = 0x1,
  CU_EVENT_DISABLE_TIMING = 0x2,
  CU_EVENT_INTERPROCESS = 0x4,
};

enum CUmemPool_attribute : int {
  CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES = 1,
  CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC = 2,
  CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES = 3,
  CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4,
  CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT = 5,
  CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH = 6,
  CU_MEMPOOL_ATTR_USED_MEM_CURRENT = 7,
  CU_MEMPOOL_ATTR_USED_MEM_HIGH = 8,
};

enum CUlaunchAttributeID : int {
  CU_LAUNCH_ATTRIBUTE_IGNORE = 0,
  CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW = 1,
  CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 2,
  CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4,
  CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6,
  CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT = 7,
  CU_LAUNCH_ATTRIBUTE_PRIORITY = 8,
};

enum CUaccessProperty : int {
  CU_ACCESS_PROPERTY_NORMAL = 0,
  CU_ACCESS_PROPERTY_STREAMING = 1,
  CU_ACCESS_PROPERTY_PERSISTING = 2,
};

struct CUaccessPolicyWindow {
  void* base_ptr;
  std::size_t num_bytes;
  float hitRatio;
  CUaccessProperty hitProp;
  CUaccessProperty missProp;
};

// The members of cuda.h's 64-byte union that oxicuda sets, and one that
// gives it cuda.h's 8-byte alignment.
union CUlaunchAttributeValue {
  char pad[64];
  CUaccessPolicyWindow accessPolicyWindow;
  int cooperative;
  struct {
    unsigned int x;
    unsigned int y;
    unsigned int z;
  } clusterDim;
  int programmaticStreamSerializationAllowed;
  struct {
    CUevent event;
    int flags;
    int triggerAtBlockStart;
  } programmaticEvent;
  struct {
    CUevent event;
    int flags;
  } launchCompletionEvent;
  int priority;
};

struct CUlaunchAttribute {
  CUlaunchAttributeID id;
  char pad[8 - sizeof(CUlaunchAttributeID)];
  CUlaunchAttributeValue value;
};

struct CUlaunchConfig {
  unsigned int gridDimX;
  unsigned int gridDimY;
  unsigned int gridDimZ;
  unsigned int blockDimX;
  unsigned int blockDimY;
  unsigned int blockDimZ;
  unsigned int sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute* attrs;
  unsigned int numAttrs;
};

// cuMemHostAlloc flags (macros in cuda.h, hence the lower-case names).
inline constexpr unsigned int memhostalloc_portable = 0x01;
inline constexpr unsigned int memhostalloc_devicemap = 0x02;
inline constexpr unsigned int memhostalloc_writecombined = 0x04;

// cuda.h's CU_STREAM_LEGACY and CU_STREAM_PER_THREAD are macros; these are
// the same handles under names that a macro cannot rewrite.
inline CUstream stream_legacy() noexcept { return reinterpret_cast<CUstream>(0x1); }
inline CUstream stream_per_thread() noexcept { return reinterpret_cast<CUstream>(0x2); }

struct CUuuid {
  char bytes[16];
};

// --- graphs and stream capture ----------------------------------------------

enum CUstreamCaptureStatus : int {
  CU_STREAM_CAPTURE_STATUS_NONE = 0,
  CU_STREAM_CAPTURE_STATUS_ACTIVE = 1,
  CU_STREAM_CAPTURE_STATUS_INVALIDATED = 2,
};

enum CUstreamCaptureMode : int {
  CU_STREAM_CAPTURE_MODE_GLOBAL = 0,
  CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
  CU_STREAM_CAPTURE_MODE_RELAXED = 2,
};

// cuStreamUpdateCaptureDependencies' flags.
enum CUstreamUpdateCaptureDependencies_flags : int {
  CU_STREAM_ADD_CAPTURE_DEPENDENCIES = 0x0,
  CU_STREAM_SET_CAPTURE_DEPENDENCIES = 0x1,
};

// A graph edge's type (CUgraphEdgeData::type).
enum CUgraphDependencyType : int {
  CU_GRAPH_DEPENDENCY_TYPE_DEFAULT = 0,
  CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC = 1,
};

// A kernel node's outgoing ports (CUgraphEdgeData::from_port): cuda.h's
// CU_GRAPH_KERNEL_NODE_PORT_* macros.
inline constexpr unsigned char graph_kernel_node_port_default = 0;
inline constexpr unsigned char graph_kernel_node_port_programmatic = 1;
inline constexpr unsigned char graph_kernel_node_port_launch_order = 2;

enum CUgraphNodeType : int {
  CU_GRAPH_NODE_TYPE_KERNEL = 0,
  CU_GRAPH_NODE_TYPE_MEMCPY = 1,
  CU_GRAPH_NODE_TYPE_MEMSET = 2,
  CU_GRAPH_NODE_TYPE_HOST = 3,
  CU_GRAPH_NODE_TYPE_GRAPH = 4,
  CU_GRAPH_NODE_TYPE_EMPTY = 5,
  CU_GRAPH_NODE_TYPE_WAIT_EVENT = 6,
  CU_GRAPH_NODE_TYPE_EVENT_RECORD = 7,
  CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL = 8,
  CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT = 9,
  CU_GRAPH_NODE_TYPE_MEM_ALLOC = 10,
  CU_GRAPH_NODE_TYPE_MEM_FREE = 11,
  CU_GRAPH_NODE_TYPE_BATCH_MEM_OP = 12,
  CU_GRAPH_NODE_TYPE_CONDITIONAL = 13,
};

enum CUgraphInstantiateResult : int {
  CUDA_GRAPH_INSTANTIATE_SUCCESS = 0,
  CUDA_GRAPH_INSTANTIATE_ERROR = 1,
  CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE = 2,
  CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED = 3,
  CUDA_GRAPH_INSTANTIATE_MULTIPLE_CTXS_NOT_SUPPORTED = 4,
  CUDA_GRAPH_INSTANTIATE_CONDITIONAL_HANDLE_UNUSED = 5,
};

enum CUgraphInstantiate_flags : int {
  CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH = 1,
  CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD = 2,
  CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH = 4,
  CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY = 8,
};

enum CUgraphExecUpdateResult : int {
  CU_GRAPH_EXEC_UPDATE_SUCCESS = 0,
  CU_GRAPH_EXEC_UPDATE_ERROR = 1,
  CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED = 2,
  CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED = 3,
  CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED = 4,
  CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED = 5,
  CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED = 6,
  CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE = 7,
  CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED = 8,
};

enum CUgraphConditionalNodeType : int {
  CU_GRAPH_COND_TYPE_IF = 0,
  CU_GRAPH_COND_TYPE_WHILE = 1,
  CU_GRAPH_COND_TYPE_SWITCH = 2,
};

enum CUgraphDebugDot_flags : int {
  CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE = 1 << 0,
  CU_GRAPH_DEBUG_DOT_FLAGS_KERNEL_NODE_PARAMS = 1 << 2,
  CU_GRAPH_DEBUG_DOT_FLAGS_MEMCPY_NODE_PARAMS = 1 << 3,
  CU_GRAPH_DEBUG_DOT_FLAGS_MEMSET_NODE_PARAMS = 1 << 4,
  CU_GRAPH_DEBUG_DOT_FLAGS_HOST_NODE_PARAMS = 1 << 5,
  CU_GRAPH_DEBUG_DOT_FLAGS_EVENT_NODE_PARAMS = 1 << 6,
  CU_GRAPH_DEBUG_DOT_FLAGS_HANDLES = 1 << 10,
  CU_GRAPH_DEBUG_DOT_FLAGS_CONDITIONAL_NODE_PARAMS = 1 << 15,
};

enum CUmemorytype : int {
  CU_MEMORYTYPE_HOST = 0x01,
  CU_MEMORYTYPE_DEVICE = 0x02,
  CU_MEMORYTYPE_ARRAY = 0x03,
  CU_MEMORYTYPE_UNIFIED = 0x04,
};

enum CUmemAllocationType : int {
  CU_MEM_ALLOCATION_TYPE_INVALID = 0x0,
  CU_MEM_ALLOCATION_TYPE_PINNED = 0x1,
};

enum CUmemAllocationHandleType : int {
  CU_MEM_HANDLE_TYPE_NONE = 0x0,
  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 0x1,
  CU_MEM_HANDLE_TYPE_WIN32 = 0x2,
  CU_MEM_HANDLE_TYPE_WIN32_KMT = 0x4,
  CU_MEM_HANDLE_TYPE_FABRIC = 0x8,
};

// --- virtual memory management (cuMemCreate, cuMemMap, ...) -------------------

using CUmemGenericAllocationHandle = unsigned long long;

enum CUmemAllocationGranularity_flags : int {
  CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0x0,
  CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 0x1,
};

enum CUmemLocationType : int {
  CU_MEM_LOCATION_TYPE_INVALID = 0x0,
  CU_MEM_LOCATION_TYPE_DEVICE = 0x1,
  CU_MEM_LOCATION_TYPE_HOST = 0x2,
};

// --- limits, cache preferences, managed memory, pointer queries ------------

enum CUlimit : int {
  CU_LIMIT_STACK_SIZE = 0x00,
  CU_LIMIT_PRINTF_FIFO_SIZE = 0x01,
  CU_LIMIT_MALLOC_HEAP_SIZE = 0x02,
  CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH = 0x03,
  CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT = 0x04,
  CU_LIMIT_MAX_L2_FETCH_GRANULARITY = 0x05,
  CU_LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06,
  CU_LIMIT_SHMEM_SIZE = 0x07,
  CU_LIMIT_CIG_ENABLED = 0x08,
  CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED = 0x09,
};

enum CUfunc_cache : int {
  CU_FUNC_CACHE_PREFER_NONE = 0x00,
  CU_FUNC_CACHE_PREFER_SHARED = 0x01,
  CU_FUNC_CACHE_PREFER_L1 = 0x02,
  CU_FUNC_CACHE_PREFER_EQUAL = 0x03,
};

enum CUmem_advise : int {
  CU_MEM_ADVISE_SET_READ_MOSTLY = 1,
  CU_MEM_ADVISE_UNSET_READ_MOSTLY = 2,
  CU_MEM_ADVISE_SET_PREFERRED_LOCATION = 3,
  CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION = 4,
  CU_MEM_ADVISE_SET_ACCESSED_BY = 5,
  CU_MEM_ADVISE_UNSET_ACCESSED_BY = 6,
};

enum CUpointer_attribute : int {
  CU_POINTER_ATTRIBUTE_CONTEXT = 1,
  CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
  CU_POINTER_ATTRIBUTE_DEVICE_POINTER = 3,
  CU_POINTER_ATTRIBUTE_HOST_POINTER = 4,
  CU_POINTER_ATTRIBUTE_BUFFER_ID = 7,
  CU_POINTER_ATTRIBUTE_IS_MANAGED = 8,
  CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
  CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11,
  CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12,
  CU_POINTER_ATTRIBUTE_MAPPED = 13,
  CU_POINTER_ATTRIBUTE_MAPPING_SIZE = 18,
  CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR = 19,
};

enum CUdevice_P2PAttribute : int {
  CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK = 0x01,
  CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED = 0x02,
  CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED = 0x03,
  CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED = 0x04,
};

// cuMemAllocManaged's and cuMemHostRegister's flags (macros in cuda.h).
inline constexpr unsigned int mem_attach_global = 0x1;
inline constexpr unsigned int mem_attach_host = 0x2;
inline constexpr unsigned int memhostregister_portable = 0x01;
inline constexpr unsigned int memhostregister_devicemap = 0x02;
inline constexpr unsigned int memhostregister_read_only = 0x08;

enum CUmemAccess_flags : int {
  CU_MEM_ACCESS_FLAGS_PROT_NONE = 0x0,
  CU_MEM_ACCESS_FLAGS_PROT_READ = 0x1,
  CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 0x3,
};

enum CUuserObject_flags : int {
  CU_USER_OBJECT_NO_DESTRUCTOR_SYNC = 1,
};

enum CUuserObjectRetain_flags : int {
  CU_GRAPH_USER_OBJECT_MOVE = 1,
};

// --- interprocess handles (cuIpc*) --------------------------------------------

// CU_IPC_HANDLE_SIZE (a macro in cuda.h): the bytes of an IPC handle.
inline constexpr std::size_t ipc_handle_size = 64;

struct CUipcMemHandle {
  char reserved[ipc_handle_size];
};

struct CUipcEventHandle {
  char reserved[ipc_handle_size];
};

enum CUipcMem_flags : int {
  CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 0x1,
};

// cuGraphConditionalHandleCreate's flag (a macro in cuda.h).
inline constexpr unsigned int graph_cond_assign_default = 0x1;

struct CUDA_KERNEL_NODE_PARAMS_v2 {
  CUfunction func;
  unsigned int gridDimX;
  unsigned int gridDimY;
  unsigned int gridDimZ;
  unsigned int blockDimX;
  unsigned int blockDimY;
  unsigned int blockDimZ;
  unsigned int sharedMemBytes;
  void** kernelParams;
  void** extra;
  CUkernel kern;
  CUcontext ctx;
};

struct CUDA_MEMCPY3D {
  std::size_t srcXInBytes;
  std::size_t srcY;
  std::size_t srcZ;
  std::size_t srcLOD;
  CUmemorytype srcMemoryType;
  const void* srcHost;
  CUdeviceptr srcDevice;
  CUarray srcArray;
  void* reserved0;
  std::size_t srcPitch;
  std::size_t srcHeight;
  std::size_t dstXInBytes;
  std::size_t dstY;
  std::size_t dstZ;
  std::size_t dstLOD;
  CUmemorytype dstMemoryType;
  void* dstHost;
  CUdeviceptr dstDevice;
  CUarray dstArray;
  void* reserved1;
  std::size_t dstPitch;
  std::size_t dstHeight;
  std::size_t WidthInBytes;
  std::size_t Height;
  std::size_t Depth;
};

struct CUDA_MEMCPY2D {
  std::size_t srcXInBytes;
  std::size_t srcY;
  CUmemorytype srcMemoryType;
  const void* srcHost;
  CUdeviceptr srcDevice;
  CUarray srcArray;
  std::size_t srcPitch;
  std::size_t dstXInBytes;
  std::size_t dstY;
  CUmemorytype dstMemoryType;
  void* dstHost;
  CUdeviceptr dstDevice;
  CUarray dstArray;
  std::size_t dstPitch;
  std::size_t WidthInBytes;
  std::size_t Height;
};

struct CUDA_MEMSET_NODE_PARAMS {
  CUdeviceptr dst;
  std::size_t pitch;
  unsigned int value;
  unsigned int elementSize;
  std::size_t width;
  std::size_t height;
};

struct CUDA_HOST_NODE_PARAMS {
  CUhostFn fn;
  void* userData;
};

struct CUmemLocation {
  CUmemLocationType type;
  int id;
};

// Batched copies (cuMemcpyBatchAsync): how a copy may read its source, and
// its attributes (one entry applies to a run of consecutive copies).
enum CUmemcpySrcAccessOrder : int {
  CU_MEMCPY_SRC_ACCESS_ORDER_INVALID = 0x0,
  CU_MEMCPY_SRC_ACCESS_ORDER_STREAM = 0x1,
  CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL = 0x2,
  CU_MEMCPY_SRC_ACCESS_ORDER_ANY = 0x3,
};

enum CUmemcpyFlags : int {
  CU_MEMCPY_FLAG_DEFAULT = 0x0,
  CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE = 0x1,
};

struct CUmemcpyAttributes {
  CUmemcpySrcAccessOrder srcAccessOrder;
  CUmemLocation srcLocHint;
  CUmemLocation dstLocHint;
  unsigned int flags;
};

struct CUmemAccessDesc {
  CUmemLocation location;
  CUmemAccess_flags flags;
};

struct CUmemAllocationProp {
  CUmemAllocationType type;
  CUmemAllocationHandleType requestedHandleTypes;
  CUmemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
};

// What cuMemExportToShareableHandle gives for CU_MEM_HANDLE_TYPE_FABRIC.
struct CUmemFabricHandle {
  unsigned char data[ipc_handle_size];
};

struct CUmemPoolProps {
  CUmemAllocationType allocType;
  CUmemAllocationHandleType handleTypes;
  CUmemLocation location;
  void* win32SecurityAttributes;
  std::size_t maxSize;
  unsigned short usage;
  unsigned char reserved[54];
};

struct CUDA_MEM_ALLOC_NODE_PARAMS {
  CUmemPoolProps poolProps;
  const CUmemAccessDesc* accessDescs;
  std::size_t accessDescCount;
  std::size_t bytesize;
  CUdeviceptr dptr;
};

struct CUDA_CONDITIONAL_NODE_PARAMS {
  CUgraphConditionalHandle handle;
  CUgraphConditionalNodeType type;
  unsigned int size;
  CUgraph* phGraph_out;
  CUcontext ctx;
};

// cuda.h's node parameters for cuGraphAddNode: the union's member that
// oxicuda sets (a conditional node's), and its size.
struct CUgraphNodeParams {
  CUgraphNodeType type;
  int reserved0[3];
  union {
    long long reserved1[29];
    CUDA_CONDITIONAL_NODE_PARAMS conditional;
  };
  long long reserved2;
};

struct CUgraphEdgeData {
  unsigned char from_port;
  unsigned char to_port;
  unsigned char type;
  unsigned char reserved[5];
};

struct CUDA_GRAPH_INSTANTIATE_PARAMS {
  cuuint64_t flags;
  CUstream hUploadStream;
  CUgraphNode hErrNode_out;
  CUgraphInstantiateResult result_out;
};

struct CUgraphExecUpdateResultInfo {
  CUgraphExecUpdateResult result;
  CUgraphNode errorNode;
  CUgraphNode errorFromNode;
};

// --- green contexts (cuGreenCtxCreate, cuDevSmResourceSplitByCount, ...) ------

enum CUdevResourceType : int {
  CU_DEV_RESOURCE_TYPE_INVALID = 0,
  CU_DEV_RESOURCE_TYPE_SM = 1,
};

enum CUgreenCtxCreate_flags : int {
  CU_GREEN_CTX_DEFAULT_STREAM = 0x1,
};

enum CUdevSmResourceSplit_flags : int {
  CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING = 0x1,
  CU_DEV_SM_RESOURCE_SPLIT_MAX_POTENTIAL_CLUSTER_SIZE = 0x2,
};

struct CUdevSmResource {
  unsigned int smCount;
  unsigned int minSmPartitionSize;
  unsigned int smCoscheduledAlignment;
};

// cuda.h's CUdevResource (RESOURCE_ABI_VERSION 1): 92 bytes of the
// driver's own before the union of 48 (RESOURCE_ABI_EXTERNAL_BYTES).
struct CUdevResource {
  CUdevResourceType type;
  unsigned char _internal_padding[92];
  union {
    CUdevSmResource sm;
    unsigned char _oversize[48];
  };
};
static_assert(sizeof(CUdevResource) == 144 && alignof(CUdevResource) == 4, "cuda.h's CUdevResource is 144 bytes");

// --- external memory and semaphores (another API's, imported) ------------------

enum CUexternalMemoryHandleType : int {
  CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD = 1,
  CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_WIN32 = 2,
  CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_WIN32_KMT = 3,
  CU_EXTERNAL_MEMORY_HANDLE_TYPE_D3D12_HEAP = 4,
  CU_EXTERNAL_MEMORY_HANDLE_TYPE_D3D12_RESOURCE = 5,
  CU_EXTERNAL_MEMORY_HANDLE_TYPE_D3D11_RESOURCE = 6,
  CU_EXTERNAL_MEMORY_HANDLE_TYPE_D3D11_RESOURCE_KMT = 7,
  CU_EXTERNAL_MEMORY_HANDLE_TYPE_NVSCIBUF = 8,
  CU_EXTERNAL_MEMORY_HANDLE_TYPE_DMABUF_FD = 9,
};

enum CUexternalSemaphoreHandleType : int {
  CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD = 1,
  CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_WIN32 = 2,
  CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_WIN32_KMT = 3,
  CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_D3D12_FENCE = 4,
  CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_D3D11_FENCE = 5,
  CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_NVSCISYNC = 6,
  CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_D3D11_KEYED_MUTEX = 7,
  CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_D3D11_KEYED_MUTEX_KMT = 8,
  CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD = 9,
  CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_WIN32 = 10,
};

inline constexpr unsigned external_memory_dedicated = 0x1;  // CUDA_EXTERNAL_MEMORY_DEDICATED

// The OS handle of a handle description (cuda.h's anonymous union, named
// here): a file descriptor, a Win32 handle or name, or an NvSci object.
union ExternalHandle {
  int fd;
  struct {
    void* handle;
    const void* name;
  } win32;
  const void* nvSciObject;
};

struct CUDA_EXTERNAL_MEMORY_HANDLE_DESC {
  CUexternalMemoryHandleType type;
  ExternalHandle handle;
  unsigned long long size;
  unsigned int flags;
  unsigned int reserved[16];
};

struct CUDA_EXTERNAL_MEMORY_BUFFER_DESC {
  unsigned long long offset;
  unsigned long long size;
  unsigned int flags;
  unsigned int reserved[16];
};

struct CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC {
  CUexternalSemaphoreHandleType type;
  ExternalHandle handle;
  unsigned int flags;
  unsigned int reserved[16];
};

// The signal and wait parameters' `params` (cuda.h's anonymous structs, named here).
struct ExternalSemaphoreSignalValues {
  unsigned long long fenceValue;
  union {
    void* fence;
    unsigned long long reserved;
  } nvSciSync;
  unsigned long long keyedMutexKey;
  unsigned int reserved[12];
};
struct ExternalSemaphoreWaitValues {
  unsigned long long fenceValue;
  union {
    void* fence;
    unsigned long long reserved;
  } nvSciSync;
  unsigned long long keyedMutexKey;
  unsigned int keyedMutexTimeoutMs;
  unsigned int reserved[10];
};

struct CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS {
  ExternalSemaphoreSignalValues params;
  unsigned int flags;
  unsigned int reserved[16];
};

struct CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS {
  ExternalSemaphoreWaitValues params;
  unsigned int flags;
  unsigned int reserved[16];
};

// --- checkpointing (CUDA 12.8) -------------------------------------------------

enum CUprocessState : int {
  CU_PROCESS_STATE_RUNNING = 0,
  CU_PROCESS_STATE_LOCKED = 1,
  CU_PROCESS_STATE_CHECKPOINTED = 2,
  CU_PROCESS_STATE_FAILED = 3,
};

struct CUcheckpointLockArgs {
  unsigned int timeoutMs;
  unsigned int reserved0;
  cuuint64_t reserved1[7];
};

struct CUcheckpointCheckpointArgs {
  cuuint64_t reserved[8];
};

struct CUcheckpointGpuPair {
  CUuuid oldUuid;
  CUuuid newUuid;
};

struct CUcheckpointRestoreArgs {
  CUcheckpointGpuPair* gpuPairs;
  unsigned int gpuPairsCount;
  char reserved[52 - sizeof(CUcheckpointGpuPair*)];
  cuuint64_t reserved1;
};

struct CUcheckpointUnlockArgs {
  cuuint64_t reserved[8];
};

static_assert(sizeof(CUDA_EXTERNAL_MEMORY_HANDLE_DESC) == 104 && sizeof(CUDA_EXTERNAL_MEMORY_BUFFER_DESC) == 88 &&
              sizeof(CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC) == 96 && sizeof(CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS) == 144 &&
              sizeof(CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS) == 144 && sizeof(CUcheckpointLockArgs) == 64 &&
              sizeof(CUcheckpointRestoreArgs) == 64 && sizeof(CUcheckpointUnlockArgs) == 64,
              "the external-memory and checkpoint structs are laid out as cuda.h's (64-bit)");

// --- tensor maps (TMA descriptors) -------------------------------------------

enum CUtensorMapDataType : int {
  CU_TENSOR_MAP_DATA_TYPE_UINT8 = 0,
  CU_TENSOR_MAP_DATA_TYPE_UINT16 = 1,
  CU_TENSOR_MAP_DATA_TYPE_UINT32 = 2,
  CU_TENSOR_MAP_DATA_TYPE_INT32 = 3,
  CU_TENSOR_MAP_DATA_TYPE_UINT64 = 4,
  CU_TENSOR_MAP_DATA_TYPE_INT64 = 5,
  CU_TENSOR_MAP_DATA_TYPE_FLOAT16 = 6,
  CU_TENSOR_MAP_DATA_TYPE_FLOAT32 = 7,
  CU_TENSOR_MAP_DATA_TYPE_FLOAT64 = 8,
  CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 = 9,
  CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ = 10,
  CU_TENSOR_MAP_DATA_TYPE_TFLOAT32 = 11,
  CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ = 12,
};

enum CUtensorMapInterleave : int {
  CU_TENSOR_MAP_INTERLEAVE_NONE = 0,
  CU_TENSOR_MAP_INTERLEAVE_16B = 1,
  CU_TENSOR_MAP_INTERLEAVE_32B = 2,
};

enum CUtensorMapSwizzle : int {
  CU_TENSOR_MAP_SWIZZLE_NONE = 0,
  CU_TENSOR_MAP_SWIZZLE_32B = 1,
  CU_TENSOR_MAP_SWIZZLE_64B = 2,
  CU_TENSOR_MAP_SWIZZLE_128B = 3,
  CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B = 4,
  CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B_FLIP_8B = 5,
  CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B = 6,
};

enum CUtensorMapL2promotion : int {
  CU_TENSOR_MAP_L2_PROMOTION_NONE = 0,
  CU_TENSOR_MAP_L2_PROMOTION_L2_64B = 1,
  CU_TENSOR_MAP_L2_PROMOTION_L2_128B = 2,
  CU_TENSOR_MAP_L2_PROMOTION_L2_256B = 3,
};

enum CUtensorMapFloatOOBfill : int {
  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0,
  CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA = 1,
};

// The opaque descriptor, 128 bytes. Aligned as CUDA 13's cuda.h aligns it
// (128 bytes; CUDA 12's said 64, which is what the driver requires of the
// address it writes to).
inline constexpr std::size_t tensor_map_num_qwords = 16;
struct CUtensorMap {
  alignas(128) cuuint64_t opaque[tensor_map_num_qwords];
};

// The one table of driver entry points oxicuda calls:
//   X(member, pinned version, exported symbol, parameters)
// Every entry returns CUresult. `member` is the name without its `cu` prefix
// (cuda.h defines `cuStreamDestroy` and friends as macros); the pinned
// version is what cuGetProcAddress_v2 is asked for, so a newer driver never
// hands us a newer ABI; the exported symbol is the dlsym fallback, spelled out
// per entry because it cannot be derived from the name (cuGraphInstantiate).
// Expand it inside namespace oxicuda::ffi.
#define OXICUDA_DETAIL_DRIVER_API(X)                                                                                          \
  X(GetProcAddress, 12000, "cuGetProcAddress_v2",                                                                      \
    (const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags, CUdriverProcAddressQueryResult* symbolStatus)) \
  X(Init, 2000, "cuInit", (unsigned int Flags))                                                                        \
  X(DriverGetVersion, 2020, "cuDriverGetVersion", (int* driverVersion))                                                \
  X(GetErrorString, 6000, "cuGetErrorString", (CUresult error, const char** pStr))                                     \
  X(DeviceGetCount, 2000, "cuDeviceGetCount", (int* count))                                                            \
  X(DeviceGet, 2000, "cuDeviceGet", (CUdevice * device, int ordinal))                                                  \
  X(DeviceGetName, 2000, "cuDeviceGetName", (char* name, int len, CUdevice dev))                                       \
  X(DeviceGetAttribute, 2000, "cuDeviceGetAttribute", (int* pi, CUdevice_attribute attrib, CUdevice dev))              \
  X(DeviceTotalMem, 3020, "cuDeviceTotalMem_v2", (std::size_t * bytes, CUdevice dev))                                  \
  X(DeviceGetUuid, 11040, "cuDeviceGetUuid_v2", (CUuuid * uuid, CUdevice dev))                                         \
  X(DeviceGetPCIBusId, 4010, "cuDeviceGetPCIBusId", (char* pciBusId, int len, CUdevice dev))                           \
  X(DeviceCanAccessPeer, 4000, "cuDeviceCanAccessPeer", (int* canAccessPeer, CUdevice dev, CUdevice peerDev))        \
  X(DeviceGetP2PAttribute, 8000, "cuDeviceGetP2PAttribute",                                                            \
    (int* value, CUdevice_P2PAttribute attrib, CUdevice srcDevice, CUdevice dstDevice))                               \
  X(CtxEnablePeerAccess, 4000, "cuCtxEnablePeerAccess", (CUcontext peerContext, unsigned int Flags))                  \
  X(CtxDisablePeerAccess, 4000, "cuCtxDisablePeerAccess", (CUcontext peerContext))                                    \
  X(DevicePrimaryCtxRetain, 7000, "cuDevicePrimaryCtxRetain", (CUcontext * pctx, CUdevice dev))                        \
  X(DevicePrimaryCtxRelease, 11000, "cuDevicePrimaryCtxRelease_v2", (CUdevice dev))                                    \
  X(DevicePrimaryCtxReset, 11000, "cuDevicePrimaryCtxReset_v2", (CUdevice dev))                                        \
  X(CtxCreate, 3020, "cuCtxCreate_v2", (CUcontext * pctx, unsigned int flags, CUdevice dev))                           \
  X(CtxDestroy, 4000, "cuCtxDestroy_v2", (CUcontext ctx))                                                              \
  X(CtxGetCurrent, 4000, "cuCtxGetCurrent", (CUcontext * pctx))                                                        \
  X(CtxSetCurrent, 4000, "cuCtxSetCurrent", (CUcontext ctx))                                                           \
  X(CtxPopCurrent, 4000, "cuCtxPopCurrent_v2", (CUcontext * pctx))                                                     \
  X(CtxSynchronize, 2000, "cuCtxSynchronize", ())                                                                      \
  X(ProfilerStart, 4000, "cuProfilerStart", ())                                                                        \
  X(ProfilerStop, 4000, "cuProfilerStop", ())                                                                          \
  X(CtxGetDevice, 2000, "cuCtxGetDevice", (CUdevice * device))                                                         \
  X(CtxGetId, 12000, "cuCtxGetId", (CUcontext ctx, unsigned long long* ctxId))                                         \
  X(CtxSetLimit, 3010, "cuCtxSetLimit", (CUlimit limit, std::size_t value))                                            \
  X(CtxGetLimit, 3010, "cuCtxGetLimit", (std::size_t * pvalue, CUlimit limit))                                         \
  X(CtxSetCacheConfig, 3020, "cuCtxSetCacheConfig", (CUfunc_cache config))                                             \
  X(CtxGetCacheConfig, 3020, "cuCtxGetCacheConfig", (CUfunc_cache * pconfig))                                          \
  X(CtxGetStreamPriorityRange, 5050, "cuCtxGetStreamPriorityRange", (int* leastPriority, int* greatestPriority))       \
  X(StreamCreate, 2000, "cuStreamCreate", (CUstream * phStream, unsigned int Flags))                                   \
  X(StreamCreateWithPriority, 5050, "cuStreamCreateWithPriority",                                                      \
    (CUstream * phStream, unsigned int flags, int priority))                                                           \
  X(StreamDestroy, 4000, "cuStreamDestroy_v2", (CUstream hStream))                                                     \
  X(StreamSynchronize, 2000, "cuStreamSynchronize", (CUstream hStream))                                                \
  X(StreamQuery, 2000, "cuStreamQuery", (CUstream hStream))                                                            \
  X(StreamWaitEvent, 3020, "cuStreamWaitEvent", (CUstream hStream, CUevent hEvent, unsigned int Flags))                \
  X(StreamGetPriority, 5050, "cuStreamGetPriority", (CUstream hStream, int* priority))                                 \
  X(StreamGetFlags, 5050, "cuStreamGetFlags", (CUstream hStream, unsigned int* flags))                                 \
  X(StreamGetCtx, 9020, "cuStreamGetCtx", (CUstream hStream, CUcontext * pctx))                                        \
  X(StreamGetGreenCtx, 12040, "cuStreamGetGreenCtx", (CUstream hStream, CUgreenCtx * phCtx))                           \
  X(DeviceGetDevResource, 12040, "cuDeviceGetDevResource",                                                             \
    (CUdevice device, CUdevResource * resource, CUdevResourceType type))                                               \
  X(DevSmResourceSplitByCount, 12040, "cuDevSmResourceSplitByCount",                                                   \
    (CUdevResource * result, unsigned int* nbGroups, const CUdevResource* input, CUdevResource* remaining,             \
     unsigned int useFlags, unsigned int minCount))                                                                    \
  X(DevResourceGenerateDesc, 12040, "cuDevResourceGenerateDesc",                                                       \
    (CUdevResourceDesc * phDesc, CUdevResource * resources, unsigned int nbResources))                                 \
  X(GreenCtxCreate, 12040, "cuGreenCtxCreate",                                                                         \
    (CUgreenCtx * phCtx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags))                                    \
  X(GreenCtxDestroy, 12040, "cuGreenCtxDestroy", (CUgreenCtx hCtx))                                                    \
  X(CtxFromGreenCtx, 12040, "cuCtxFromGreenCtx", (CUcontext * pContext, CUgreenCtx hCtx))                              \
  X(GreenCtxGetDevResource, 12040, "cuGreenCtxGetDevResource",                                                         \
    (CUgreenCtx hCtx, CUdevResource * resource, CUdevResourceType type))                                               \
  X(GreenCtxStreamCreate, 12050, "cuGreenCtxStreamCreate",                                                             \
    (CUstream * phStream, CUgreenCtx greenCtx, unsigned int flags, int priority))                                      \
  X(StreamSetAttribute, 11000, "cuStreamSetAttribute",                                                                 \
    (CUstream hStream, CUlaunchAttributeID attr, const CUlaunchAttributeValue* param))                                 \
  X(StreamGetAttribute, 11000, "cuStreamGetAttribute",                                                                 \
    (CUstream hStream, CUlaunchAttributeID attr, CUlaunchAttributeValue* value))                                       \
  X(LaunchHostFunc, 10000, "cuLaunchHostFunc", (CUstream hStream, CUhostFn fn, void* userData))                        \
  X(EventCreate, 2000, "cuEventCreate", (CUevent * phEvent, unsigned int Flags))                                       \
  X(EventDestroy, 4000, "cuEventDestroy_v2", (CUevent hEvent))                                                         \
  X(EventRecord, 2000, "cuEventRecord", (CUevent hEvent, CUstream hStream))                                            \
  X(EventSynchronize, 2000, "cuEventSynchronize", (CUevent hEvent))                                                    \
  X(EventQuery, 2000, "cuEventQuery", (CUevent hEvent))                                                                \
  X(EventElapsedTime, 2000, "cuEventElapsedTime", (float* pMilliseconds, CUevent hStart, CUevent hEnd))                \
  X(ModuleLoadDataEx, 2010, "cuModuleLoadDataEx",                                                                      \
    (CUmodule * module, const void* image, unsigned int numOptions, CUjit_option* options, void** optionValues))       \
  X(ModuleUnload, 2000, "cuModuleUnload", (CUmodule hmod))                                                             \
  X(LinkCreate, 6050, "cuLinkCreate_v2",                                                                               \
    (unsigned int numOptions, CUjit_option* options, void** optionValues, CUlinkState* stateOut))                      \
  X(LinkAddData, 6050, "cuLinkAddData_v2",                                                                             \
    (CUlinkState state, CUjitInputType type, void* data, std::size_t size, const char* name, unsigned int numOptions,  \
     CUjit_option* options, void** optionValues))                                                                      \
  X(LinkAddFile, 6050, "cuLinkAddFile_v2",                                                                             \
    (CUlinkState state, CUjitInputType type, const char* path, unsigned int numOptions, CUjit_option* options,         \
     void** optionValues))                                                                                             \
  X(LinkComplete, 5050, "cuLinkComplete", (CUlinkState state, void** cubinOut, std::size_t* sizeOut))                  \
  X(LinkDestroy, 5050, "cuLinkDestroy", (CUlinkState state))                                                             \
  X(ModuleGetFunction, 2000, "cuModuleGetFunction", (CUfunction * hfunc, CUmodule hmod, const char* name))             \
  X(ModuleGetGlobal, 3020, "cuModuleGetGlobal_v2",                                                                     \
    (CUdeviceptr * dptr, std::size_t * bytes, CUmodule hmod, const char* name))                                        \
  X(FuncSetCacheConfig, 3000, "cuFuncSetCacheConfig", (CUfunction hfunc, CUfunc_cache config))                        \
  X(FuncGetAttribute, 2020, "cuFuncGetAttribute", (int* pi, CUfunction_attribute attrib, CUfunction hfunc))            \
  X(FuncSetAttribute, 9000, "cuFuncSetAttribute", (CUfunction hfunc, CUfunction_attribute attrib, int value))          \
  X(FuncGetParamInfo, 12040, "cuFuncGetParamInfo",                                                                     \
    (CUfunction func, std::size_t paramIndex, std::size_t * paramOffset, std::size_t * paramSize))                     \
  X(ModuleGetFunctionCount, 12040, "cuModuleGetFunctionCount", (unsigned int* count, CUmodule mod))                    \
  X(ModuleEnumerateFunctions, 12040, "cuModuleEnumerateFunctions",                                                     \
    (CUfunction * functions, unsigned int numFunctions, CUmodule mod))                                                 \
  X(FuncGetName, 12030, "cuFuncGetName", (const char** name, CUfunction hfunc))                                        \
  X(LibraryLoadData, 12000, "cuLibraryLoadData",                                                                      \
    (CUlibrary * library, const void* code, CUjit_option* jitOptions, void** jitOptionsValues,                         \
     unsigned int numJitOptions, CUlibraryOption* libraryOptions, void** libraryOptionValues,                          \
     unsigned int numLibraryOptions))                                                                                  \
  X(LibraryLoadFromFile, 12000, "cuLibraryLoadFromFile",                                                              \
    (CUlibrary * library, const char* fileName, CUjit_option* jitOptions, void** jitOptionsValues,                     \
     unsigned int numJitOptions, CUlibraryOption* libraryOptions, void** libraryOptionValues,                          \
     unsigned int numLibraryOptions))                                                                                  \
  X(LibraryUnload, 12000, "cuLibraryUnload", (CUlibrary library))                                                      \
  X(LibraryGetKernel, 12000, "cuLibraryGetKernel", (CUkernel * pKernel, CUlibrary library, const char* name))          \
  X(LibraryGetKernelCount, 12040, "cuLibraryGetKernelCount", (unsigned int* count, CUlibrary lib))                     \
  X(LibraryEnumerateKernels, 12040, "cuLibraryEnumerateKernels",                                                       \
    (CUkernel * kernels, unsigned int numKernels, CUlibrary lib))                                                      \
  X(LibraryGetModule, 12000, "cuLibraryGetModule", (CUmodule * pMod, CUlibrary library))                               \
  X(LibraryGetGlobal, 12000, "cuLibraryGetGlobal",                                                                     \
    (CUdeviceptr * dptr, std::size_t * bytes, CUlibrary library, const char* name))                                    \
  X(LibraryGetManaged, 12000, "cuLibraryGetManaged",                                                                   \
    (CUdeviceptr * dptr, std::size_t * bytes, CUlibrary library, const char* name))                                    \
  X(KernelGetFunction, 12000, "cuKernelGetFunction", (CUfunction * pFunc, CUkernel kernel))                            \
  X(KernelGetName, 12030, "cuKernelGetName", (const char** name, CUkernel hfunc))                                      \
  X(KernelGetParamInfo, 12040, "cuKernelGetParamInfo",                                                                 \
    (CUkernel kernel, std::size_t paramIndex, std::size_t * paramOffset, std::size_t * paramSize))                     \
  X(OccupancyMaxActiveBlocksPerMultiprocessor, 6050, "cuOccupancyMaxActiveBlocksPerMultiprocessor",                    \
    (int* numBlocks, CUfunction func, int blockSize, std::size_t dynamicSMemSize))                                     \
  X(OccupancyMaxPotentialBlockSize, 6050, "cuOccupancyMaxPotentialBlockSize",                                          \
    (int* minGridSize, int* blockSize, CUfunction func, CUoccupancyB2DSize blockSizeToDynamicSMemSize,                 \
     std::size_t dynamicSMemSize, int blockSizeLimit))                                                                 \
  X(LaunchKernelEx, 11060, "cuLaunchKernelEx",                                                                         \
    (const CUlaunchConfig* config, CUfunction f, void** kernelParams, void** extra))                                   \
  X(LaunchKernel, 4000, "cuLaunchKernel",                                                                              \
    (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, unsigned int blockDimX,        \
     unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,                    \
     void** kernelParams, void** extra))                                                                               \
  X(MemGetInfo, 3020, "cuMemGetInfo_v2", (std::size_t * freeBytes, std::size_t * total))                               \
  X(MemAlloc, 3020, "cuMemAlloc_v2", (CUdeviceptr * dptr, std::size_t bytesize))                                       \
  X(MemFree, 3020, "cuMemFree_v2", (CUdeviceptr dptr))                                                                 \
  X(MemAllocPitch, 3020, "cuMemAllocPitch_v2",                                                                       \
    (CUdeviceptr * dptr, std::size_t * pPitch, std::size_t WidthInBytes, std::size_t Height,                         \
     unsigned int ElementSizeBytes))                                                                                   \
  X(MemcpyHtoDAsync, 3020, "cuMemcpyHtoDAsync_v2",                                                                     \
    (CUdeviceptr dstDevice, const void* srcHost, std::size_t ByteCount, CUstream hStream))                             \
  X(MemcpyDtoHAsync, 3020, "cuMemcpyDtoHAsync_v2",                                                                     \
    (void* dstHost, CUdeviceptr srcDevice, std::size_t ByteCount, CUstream hStream))                                   \
  X(MemcpyDtoDAsync, 3020, "cuMemcpyDtoDAsync_v2",                                                                     \
    (CUdeviceptr dstDevice, CUdeviceptr srcDevice, std::size_t ByteCount, CUstream hStream))                           \
  X(Memcpy2DAsync, 3020, "cuMemcpy2DAsync_v2", (const CUDA_MEMCPY2D* pCopy, CUstream hStream))                       \
  X(MemcpyPeerAsync, 4000, "cuMemcpyPeerAsync",                                                                        \
    (CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext, std::size_t ByteCount,   \
     CUstream hStream))                                                                                                \
  X(MemsetD8Async, 3020, "cuMemsetD8Async",                                                                            \
    (CUdeviceptr dstDevice, unsigned char uc, std::size_t N, CUstream hStream))                                        \
  X(MemsetD32Async, 3020, "cuMemsetD32Async",                                                                          \
    (CUdeviceptr dstDevice, unsigned int ui, std::size_t N, CUstream hStream))                                         \
  X(MemsetD16Async, 3020, "cuMemsetD16Async",                                                                          \
    (CUdeviceptr dstDevice, unsigned short us, std::size_t N, CUstream hStream))                                       \
  X(MemsetD2D32Async, 3020, "cuMemsetD2D32Async",                                                                      \
    (CUdeviceptr dstDevice, std::size_t dstPitch, unsigned int ui, std::size_t Width, std::size_t Height,              \
     CUstream hStream))                                                                                                \
  X(MemHostAlloc, 2020, "cuMemHostAlloc", (void** pp, std::size_t bytesize, unsigned int Flags))                       \
  X(MemFreeHost, 2000, "cuMemFreeHost", (void* p))                                                                     \
  X(MemHostGetDevicePointer, 3020, "cuMemHostGetDevicePointer_v2", (CUdeviceptr * pdptr, void* p, unsigned int Flags)) \
  X(MemAllocManaged, 6000, "cuMemAllocManaged", (CUdeviceptr * dptr, std::size_t bytesize, unsigned int flags))       \
  X(MemPrefetchAsync, 12020, "cuMemPrefetchAsync_v2",                                                                  \
    (CUdeviceptr devPtr, std::size_t count, CUmemLocation location, unsigned int flags, CUstream hStream))             \
  X(MemcpyBatchAsync, 13000, "cuMemcpyBatchAsync_v2",                                                                 \
    (CUdeviceptr * dsts, CUdeviceptr * srcs, std::size_t * sizes, std::size_t count, CUmemcpyAttributes * attrs,       \
     std::size_t * attrsIdxs, std::size_t numAttrs, CUstream hStream))                                                 \
  X(MemPrefetchBatchAsync, 13000, "cuMemPrefetchBatchAsync",                                                           \
    (CUdeviceptr * dptrs, std::size_t * sizes, std::size_t count, CUmemLocation * prefetchLocs,                        \
     std::size_t * prefetchLocIdxs, std::size_t numPrefetchLocs, unsigned long long flags, CUstream hStream))          \
  X(MemDiscardBatchAsync, 13000, "cuMemDiscardBatchAsync",                                                             \
    (CUdeviceptr * dptrs, std::size_t * sizes, std::size_t count, unsigned long long flags, CUstream hStream))         \
  X(MemDiscardAndPrefetchBatchAsync, 13000, "cuMemDiscardAndPrefetchBatchAsync",                                       \
    (CUdeviceptr * dptrs, std::size_t * sizes, std::size_t count, CUmemLocation * prefetchLocs,                        \
     std::size_t * prefetchLocIdxs, std::size_t numPrefetchLocs, unsigned long long flags, CUstream hStream))          \
  X(MemAdvise, 12020, "cuMemAdvise_v2",                                                                                \
    (CUdeviceptr devPtr, std::size_t count, CUmem_advise advice, CUmemLocation location))                              \
  X(MemHostRegister, 6050, "cuMemHostRegister_v2", (void* p, std::size_t bytesize, unsigned int Flags))                 \
  X(MemHostUnregister, 4000, "cuMemHostUnregister", (void* p))                                                         \
  X(PointerGetAttributes, 7000, "cuPointerGetAttributes",                                                              \
    (unsigned int numAttributes, CUpointer_attribute* attributes, void** data, CUdeviceptr ptr))                       \
  X(IpcGetMemHandle, 4010, "cuIpcGetMemHandle", (CUipcMemHandle * pHandle, CUdeviceptr dptr))                        \
  X(IpcOpenMemHandle, 11000, "cuIpcOpenMemHandle_v2",                                                                  \
    (CUdeviceptr * pdptr, CUipcMemHandle handle, unsigned int Flags))                                                  \
  X(IpcCloseMemHandle, 4010, "cuIpcCloseMemHandle", (CUdeviceptr dptr))                                                \
  X(IpcGetEventHandle, 4010, "cuIpcGetEventHandle", (CUipcEventHandle * pHandle, CUevent event))                       \
  X(IpcOpenEventHandle, 4010, "cuIpcOpenEventHandle", (CUevent * phEvent, CUipcEventHandle handle))                    \
  X(MemAllocAsync, 11020, "cuMemAllocAsync", (CUdeviceptr * dptr, std::size_t bytesize, CUstream hStream))             \
  X(MemFreeAsync, 11020, "cuMemFreeAsync", (CUdeviceptr dptr, CUstream hStream))                                       \
  X(DeviceGetDefaultMemPool, 11020, "cuDeviceGetDefaultMemPool", (CUmemoryPool * pool_out, CUdevice dev))              \
  X(MemPoolSetAttribute, 11020, "cuMemPoolSetAttribute", (CUmemoryPool pool, CUmemPool_attribute attr, void* value))   \
  X(MemPoolGetAttribute, 11020, "cuMemPoolGetAttribute", (CUmemoryPool pool, CUmemPool_attribute attr, void* value))   \
  X(MemPoolTrimTo, 11020, "cuMemPoolTrimTo", (CUmemoryPool pool, std::size_t minBytesToKeep))                      \
  X(MemPoolCreate, 11020, "cuMemPoolCreate", (CUmemoryPool * pool, const CUmemPoolProps* poolProps))               \
  X(MemPoolDestroy, 11020, "cuMemPoolDestroy", (CUmemoryPool pool))                                                   \
  X(MemPoolSetAccess, 11020, "cuMemPoolSetAccess", (CUmemoryPool pool, const CUmemAccessDesc* map, std::size_t count)) \
  X(MemPoolGetAccess, 11020, "cuMemPoolGetAccess",                                                                     \
    (CUmemAccess_flags * flags, CUmemoryPool memPool, CUmemLocation * location))                                       \
  X(MemAllocFromPoolAsync, 11020, "cuMemAllocFromPoolAsync",                                                           \
    (CUdeviceptr * dptr, std::size_t bytesize, CUmemoryPool pool, CUstream hStream))                                   \
  X(MemGetAllocationGranularity, 10020, "cuMemGetAllocationGranularity",                                               \
    (std::size_t * granularity, const CUmemAllocationProp* prop, CUmemAllocationGranularity_flags option))             \
  X(MemAddressReserve, 10020, "cuMemAddressReserve",                                                                   \
    (CUdeviceptr * ptr, std::size_t size, std::size_t alignment, CUdeviceptr addr, unsigned long long flags))          \
  X(MemAddressFree, 10020, "cuMemAddressFree", (CUdeviceptr ptr, std::size_t size))                                    \
  X(MemCreate, 10020, "cuMemCreate",                                                                                   \
    (CUmemGenericAllocationHandle * handle, std::size_t size, const CUmemAllocationProp* prop,                         \
     unsigned long long flags))                                                                                        \
  X(MemRelease, 10020, "cuMemRelease", (CUmemGenericAllocationHandle handle))                                          \
  X(MemMap, 10020, "cuMemMap",                                                                                         \
    (CUdeviceptr ptr, std::size_t size, std::size_t offset, CUmemGenericAllocationHandle handle,                       \
     unsigned long long flags))                                                                                        \
  X(MemUnmap, 10020, "cuMemUnmap", (CUdeviceptr ptr, std::size_t size))                                                \
  X(MemSetAccess, 10020, "cuMemSetAccess",                                                                             \
    (CUdeviceptr ptr, std::size_t size, const CUmemAccessDesc* desc, std::size_t count))                               \
  X(MemGetAccess, 10020, "cuMemGetAccess",                                                                             \
    (unsigned long long* flags, const CUmemLocation* location, CUdeviceptr ptr))                                       \
  X(MemExportToShareableHandle, 10020, "cuMemExportToShareableHandle",                                                 \
    (void* shareableHandle, CUmemGenericAllocationHandle handle, CUmemAllocationHandleType handleType,                 \
     unsigned long long flags))                                                                                        \
  X(MemImportFromShareableHandle, 10020, "cuMemImportFromShareableHandle",                                             \
    (CUmemGenericAllocationHandle * handle, void* osHandle, CUmemAllocationHandleType shHandleType))                   \
  X(MemGetAllocationPropertiesFromHandle, 10020, "cuMemGetAllocationPropertiesFromHandle",                             \
    (CUmemAllocationProp * prop, CUmemGenericAllocationHandle handle))                                                 \
  X(ImportExternalMemory, 10000, "cuImportExternalMemory",                                                             \
    (CUexternalMemory * extMem_out, const CUDA_EXTERNAL_MEMORY_HANDLE_DESC* memHandleDesc))                            \
  X(ExternalMemoryGetMappedBuffer, 10000, "cuExternalMemoryGetMappedBuffer",                                           \
    (CUdeviceptr * devPtr, CUexternalMemory extMem, const CUDA_EXTERNAL_MEMORY_BUFFER_DESC* bufferDesc))               \
  X(DestroyExternalMemory, 10000, "cuDestroyExternalMemory", (CUexternalMemory extMem))                                \
  X(ImportExternalSemaphore, 10000, "cuImportExternalSemaphore",                                                       \
    (CUexternalSemaphore * extSem_out, const CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC* semHandleDesc))                      \
  X(SignalExternalSemaphoresAsync, 10000, "cuSignalExternalSemaphoresAsync",                                           \
    (const CUexternalSemaphore* extSemArray, const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS* paramsArray,                 \
     unsigned int numExtSems, CUstream stream))                                                                        \
  X(WaitExternalSemaphoresAsync, 10000, "cuWaitExternalSemaphoresAsync",                                               \
    (const CUexternalSemaphore* extSemArray, const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS* paramsArray,                   \
     unsigned int numExtSems, CUstream stream))                                                                        \
  X(DestroyExternalSemaphore, 10000, "cuDestroyExternalSemaphore", (CUexternalSemaphore extSem))                       \
  X(CheckpointProcessGetRestoreThreadId, 12080, "cuCheckpointProcessGetRestoreThreadId", (int pid, int* tid))          \
  X(CheckpointProcessGetState, 12080, "cuCheckpointProcessGetState", (int pid, CUprocessState* state))                 \
  X(CheckpointProcessLock, 12080, "cuCheckpointProcessLock", (int pid, CUcheckpointLockArgs* args))                    \
  X(CheckpointProcessCheckpoint, 12080, "cuCheckpointProcessCheckpoint", (int pid, CUcheckpointCheckpointArgs* args))  \
  X(CheckpointProcessRestore, 12080, "cuCheckpointProcessRestore", (int pid, CUcheckpointRestoreArgs* args))           \
  X(CheckpointProcessUnlock, 12080, "cuCheckpointProcessUnlock", (int pid, CUcheckpointUnlockArgs* args))              \
  X(StreamBeginCapture, 10010, "cuStreamBeginCapture_v2", (CUstream hStream, CUstreamCaptureMode mode))                \
  X(StreamEndCapture, 10000, "cuStreamEndCapture", (CUstream hStream, CUgraph * phGraph))                              \
  X(ThreadExchangeStreamCaptureMode, 10010, "cuThreadExchangeStreamCaptureMode", (CUstreamCaptureMode * mode))         \
  X(StreamIsCapturing, 10000, "cuStreamIsCapturing", (CUstream hStream, CUstreamCaptureStatus * captureStatus))        \
  X(StreamGetCaptureInfo, 12030, "cuStreamGetCaptureInfo_v3",                                                          \
    (CUstream hStream, CUstreamCaptureStatus * captureStatus_out, cuuint64_t * id_out, CUgraph * graph_out,            \
     const CUgraphNode** dependencies_out, const CUgraphEdgeData** edgeData_out, std::size_t* numDependencies_out))   \
  X(StreamBeginCaptureToGraph, 12030, "cuStreamBeginCaptureToGraph",                                                  \
    (CUstream hStream, CUgraph hGraph, const CUgraphNode* dependencies, const CUgraphEdgeData* dependencyData,         \
     std::size_t numDependencies, CUstreamCaptureMode mode))                                                           \
  X(StreamUpdateCaptureDependencies, 12030, "cuStreamUpdateCaptureDependencies_v2",                                    \
    (CUstream hStream, CUgraphNode * dependencies, const CUgraphEdgeData* dependencyData, std::size_t numDependencies, \
     unsigned int flags))                                                                                              \
  X(GraphCreate, 10000, "cuGraphCreate", (CUgraph * phGraph, unsigned int flags))                                      \
  X(GraphDestroy, 10000, "cuGraphDestroy", (CUgraph hGraph))                                                           \
  X(GraphClone, 10000, "cuGraphClone", (CUgraph * phGraphClone, CUgraph originalGraph))                                \
  X(GraphGetNodes, 10000, "cuGraphGetNodes", (CUgraph hGraph, CUgraphNode * nodes, std::size_t * numNodes))            \
  X(GraphNodeGetType, 10000, "cuGraphNodeGetType", (CUgraphNode hNode, CUgraphNodeType * type))                        \
  X(GraphNodeGetDependencies, 10000, "cuGraphNodeGetDependencies",                                                     \
    (CUgraphNode hNode, CUgraphNode * dependencies, std::size_t * numDependencies))                                    \
  X(GraphNodeGetDependentNodes, 10000, "cuGraphNodeGetDependentNodes",                                                 \
    (CUgraphNode hNode, CUgraphNode * dependentNodes, std::size_t * numDependentNodes))                                \
  X(GraphKernelNodeSetAttribute, 11000, "cuGraphKernelNodeSetAttribute",                                               \
    (CUgraphNode hNode, CUlaunchAttributeID attr, const CUlaunchAttributeValue* value))                                \
  X(GraphChildGraphNodeGetGraph, 10000, "cuGraphChildGraphNodeGetGraph", (CUgraphNode hNode, CUgraph * phGraph))       \
  X(GraphAddDependencies, 10000, "cuGraphAddDependencies",                                                             \
    (CUgraph hGraph, const CUgraphNode* from, const CUgraphNode* to, std::size_t numDependencies))                     \
  X(GraphAddKernelNode, 12000, "cuGraphAddKernelNode_v2",                                                              \
    (CUgraphNode * phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies, std::size_t numDependencies,          \
     const CUDA_KERNEL_NODE_PARAMS_v2* nodeParams))                                                                    \
  X(GraphAddMemcpyNode, 10000, "cuGraphAddMemcpyNode",                                                                 \
    (CUgraphNode * phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies, std::size_t numDependencies,          \
     const CUDA_MEMCPY3D* copyParams, CUcontext ctx))                                                                  \
  X(GraphAddMemsetNode, 10000, "cuGraphAddMemsetNode",                                                                 \
    (CUgraphNode * phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies, std::size_t numDependencies,          \
     const CUDA_MEMSET_NODE_PARAMS* memsetParams, CUcontext ctx))                                                      \
  X(GraphAddHostNode, 10000, "cuGraphAddHostNode",                                                                     \
    (CUgraphNode * phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies, std::size_t numDependencies,          \
     const CUDA_HOST_NODE_PARAMS* nodeParams))                                                                         \
  X(GraphAddEmptyNode, 10000, "cuGraphAddEmptyNode",                                                                   \
    (CUgraphNode * phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies, std::size_t numDependencies))         \
  X(GraphAddChildGraphNode, 10000, "cuGraphAddChildGraphNode",                                                         \
    (CUgraphNode * phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies, std::size_t numDependencies,          \
     CUgraph childGraph))                                                                                              \
  X(GraphAddEventRecordNode, 11010, "cuGraphAddEventRecordNode",                                                       \
    (CUgraphNode * phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies, std::size_t numDependencies,          \
     CUevent event))                                                                                                   \
  X(GraphAddEventWaitNode, 11010, "cuGraphAddEventWaitNode",                                                           \
    (CUgraphNode * phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies, std::size_t numDependencies,          \
     CUevent event))                                                                                                   \
  X(GraphAddMemAllocNode, 11040, "cuGraphAddMemAllocNode",                                                             \
    (CUgraphNode * phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies, std::size_t numDependencies,          \
     CUDA_MEM_ALLOC_NODE_PARAMS* nodeParams))                                                                          \
  X(GraphAddMemFreeNode, 11040, "cuGraphAddMemFreeNode",                                                               \
    (CUgraphNode * phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies, std::size_t numDependencies,          \
     CUdeviceptr dptr))                                                                                                \
  X(GraphAddNode, 12020, "cuGraphAddNode",                                                                             \
    (CUgraphNode * phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies, std::size_t numDependencies,          \
     CUgraphNodeParams* nodeParams))                                                                                   \
  X(GraphConditionalHandleCreate, 12030, "cuGraphConditionalHandleCreate",                                             \
    (CUgraphConditionalHandle * pHandle_out, CUgraph hGraph, CUcontext ctx, unsigned int defaultLaunchValue,           \
     unsigned int flags))                                                                                              \
  X(GraphDebugDotPrint, 11030, "cuGraphDebugDotPrint", (CUgraph hGraph, const char* path, unsigned int flags))         \
  X(GraphInstantiateWithParams, 12000, "cuGraphInstantiateWithParams",                                                 \
    (CUgraphExec * phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams))                     \
  X(GraphExecDestroy, 10000, "cuGraphExecDestroy", (CUgraphExec hGraphExec))                                           \
  X(GraphLaunch, 10000, "cuGraphLaunch", (CUgraphExec hGraphExec, CUstream hStream))                                   \
  X(GraphUpload, 11010, "cuGraphUpload", (CUgraphExec hGraphExec, CUstream hStream))                                   \
  X(GraphExecUpdate, 12000, "cuGraphExecUpdate_v2",                                                                    \
    (CUgraphExec hGraphExec, CUgraph hGraph, CUgraphExecUpdateResultInfo * resultInfo))                                \
  X(GraphExecKernelNodeSetParams, 12000, "cuGraphExecKernelNodeSetParams_v2",                                          \
    (CUgraphExec hGraphExec, CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS_v2* nodeParams))                         \
  X(GraphExecMemcpyNodeSetParams, 10020, "cuGraphExecMemcpyNodeSetParams",                                             \
    (CUgraphExec hGraphExec, CUgraphNode hNode, const CUDA_MEMCPY3D* copyParams, CUcontext ctx))                       \
  X(GraphExecMemsetNodeSetParams, 10020, "cuGraphExecMemsetNodeSetParams",                                             \
    (CUgraphExec hGraphExec, CUgraphNode hNode, const CUDA_MEMSET_NODE_PARAMS* memsetParams, CUcontext ctx))           \
  X(UserObjectCreate, 11030, "cuUserObjectCreate",                                                                     \
    (CUuserObject * object_out, void* ptr, CUhostFn destroy, unsigned int initialRefcount, unsigned int flags))        \
  X(UserObjectRelease, 11030, "cuUserObjectRelease", (CUuserObject object, unsigned int count))                        \
  X(GraphRetainUserObject, 11030, "cuGraphRetainUserObject",                                                           \
    (CUgraph graph, CUuserObject object, unsigned int count, unsigned int flags))                                      \
  X(TensorMapEncodeTiled, 12000, "cuTensorMapEncodeTiled",                                                             \
    (CUtensorMap * tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank, void* globalAddress,          \
     const cuuint64_t* globalDim, const cuuint64_t* globalStrides, const cuuint32_t* boxDim,                          \
     const cuuint32_t* elementStrides, CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,                  \
     CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill))                                            \
  X(TensorMapEncodeIm2col, 12000, "cuTensorMapEncodeIm2col",                                                           \
    (CUtensorMap * tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank, void* globalAddress,          \
     const cuuint64_t* globalDim, const cuuint64_t* globalStrides, const int* pixelBoxLowerCorner,                    \
     const int* pixelBoxUpperCorner, cuuint32_t channelsPerPixel, cuuint32_t pixelsPerColumn,                          \
     const cuuint32_t* elementStrides, CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,                  \
     CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill))

struct EntryInfo {
  const char* name;    // "cuStreamDestroy": what cuGetProcAddress_v2 is asked for
  int version;         // the pinned version (0 for a library without versioned lookups)
  const char* symbol;  // "cuStreamDestroy_v2": the dlsym fallback
};

// A table's Entry enumeration (one enumerator per entry, in table order) and
// its EntryInfo array, named OXICUDA_TABLE_PREFIX + member. Every library's
// table (the driver's here, NVRTC's and nvJitLink's in their own parts) is
// expanded by this one macro, in the library's namespace.
#define OXICUDA_DETAIL_X_ENUM(member, version, symbol, params) member,
#define OXICUDA_DETAIL_X_INFO(member, version, symbol, params) {OXICUDA_TABLE_PREFIX #member, version, symbol},
#define OXICUDA_DETAIL_TABLE_ENTRIES(TABLE)                                                  \
  enum class Entry : int { TABLE(OXICUDA_DETAIL_X_ENUM) };                                   \
  inline constexpr ::oxicuda::ffi::EntryInfo entries[] = {TABLE(OXICUDA_DETAIL_X_INFO)};     \
  inline constexpr std::size_t entry_count = sizeof(entries) / sizeof(entries[0]);   \
  constexpr const ::oxicuda::ffi::EntryInfo& entry_info(Entry e) noexcept { return entries[static_cast<int>(e)]; }

#define OXICUDA_TABLE_PREFIX "cu"
OXICUDA_DETAIL_TABLE_ENTRIES(OXICUDA_DETAIL_DRIVER_API)
#undef OXICUDA_TABLE_PREFIX

}  // namespace ffi
OXICUDA_DETAIL_NAMESPACE_END
