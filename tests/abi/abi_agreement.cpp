// The driver ABI that ffi.hpp declares by hand agrees with the toolkit's:
// every table entry's function type is the toolkit's PFN_<name>_v<pinned
// version>, every enumerator has cuda.h's value, every struct cuda.h's size,
// alignment and field offsets. The checks themselves are generated from
// ffi.hpp (tools/gen_abi_checks.py), so none can be left out; they are
// static_asserts, so a disagreement fails the build of this test.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cudaProfilerTypedefs.h>

#include "oxicuda.hpp"

#include <cstddef>
#include <cstdio>
#include <type_traits>

// oxicuda::driver_entry_point takes cuda.h's PFN types (issue 30).
static_assert(std::is_same_v<decltype(oxicuda::driver_entry_point<PFN_cuCtxGetApiVersion_v3020>("cuCtxGetApiVersion",
                                                                                               3020)),
                             PFN_cuCtxGetApiVersion_v3020>);

// OXICUDA_DRIVER names everything fully qualified: it compiles outside
// namespace oxicuda, with no using-directive (issue 30).
[[maybe_unused]] static oxicuda::ffi::CUresult count_devices(int* n) {
  return OXICUDA_DRIVER(DeviceGetCount, n).result;
}

namespace abi {

// Types that must agree up to enums: our enums (fixed `int`) and cuda.h's
// (implementation-chosen) are the same ABI when they have the same size; a
// struct of ours stands for cuda.h's of the same name once its layout is
// checked (the generated `mapped` specializations).
template <std::size_t Size>
struct enum_of_size {};

template <class T>
struct mapped {
  using type = T;
};

template <class T, bool = std::is_enum_v<T>>
struct norm {
  using type = typename mapped<T>::type;
};
template <class T>
struct norm<T, true> {
  using type = enum_of_size<sizeof(T)>;
};
template <class T>
struct norm<const T, false> {
  using type = const typename norm<T>::type;
};
template <class T>
struct norm<T*, false> {
  using type = typename norm<T>::type*;
};
template <class R, class... A>
struct norm<R (*)(A...), false> {
  using type = typename norm<R>::type (*)(typename norm<A>::type...);
};

template <class A, class B>
inline constexpr bool same = std::is_same_v<typename norm<A>::type, typename norm<B>::type>;

}  // namespace abi

// Handle and scalar types are the toolkit's own.
static_assert(std::is_same_v<oxicuda::ffi::CUdevice, ::CUdevice>);
static_assert(std::is_same_v<oxicuda::ffi::CUdeviceptr, ::CUdeviceptr>);
static_assert(std::is_same_v<oxicuda::ffi::cuuint32_t, ::cuuint32_t>);
static_assert(std::is_same_v<oxicuda::ffi::cuuint64_t, ::cuuint64_t>);
static_assert(abi::same<oxicuda::ffi::CUhostFn, ::CUhostFn>);
static_assert(abi::same<oxicuda::ffi::CUoccupancyB2DSize, ::CUoccupancyB2DSize>);
static_assert(sizeof(oxicuda::ffi::CUresult) == sizeof(::CUresult));
// Constants that are macros in cuda.h.
static_assert(oxicuda::ffi::memhostalloc_portable == CU_MEMHOSTALLOC_PORTABLE);
static_assert(oxicuda::ffi::memhostalloc_devicemap == CU_MEMHOSTALLOC_DEVICEMAP);
static_assert(oxicuda::ffi::memhostalloc_writecombined == CU_MEMHOSTALLOC_WRITECOMBINED);
static_assert(oxicuda::ffi::mem_attach_global == CU_MEM_ATTACH_GLOBAL);
static_assert(oxicuda::ffi::mem_attach_host == CU_MEM_ATTACH_HOST);
static_assert(oxicuda::ffi::memhostregister_portable == CU_MEMHOSTREGISTER_PORTABLE);
static_assert(oxicuda::ffi::memhostregister_devicemap == CU_MEMHOSTREGISTER_DEVICEMAP);
static_assert(oxicuda::ffi::memhostregister_read_only == CU_MEMHOSTREGISTER_READ_ONLY);
static_assert(oxicuda::ffi::ipc_handle_size == CU_IPC_HANDLE_SIZE);
static_assert(oxicuda::ffi::graph_kernel_node_port_default == CU_GRAPH_KERNEL_NODE_PORT_DEFAULT);
static_assert(oxicuda::ffi::graph_kernel_node_port_programmatic == CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC);
static_assert(oxicuda::ffi::graph_kernel_node_port_launch_order == CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER);
static_assert(oxicuda::ffi::tensor_map_num_qwords == CU_TENSOR_MAP_NUM_QWORDS);

#include "abi_checks.inc"

int main() {
  // The special stream handles are macros in cuda.h; ours are functions.
  if (oxicuda::ffi::stream_legacy() != CU_STREAM_LEGACY || oxicuda::ffi::stream_per_thread() != CU_STREAM_PER_THREAD) {
    std::puts("ABI agreement: the special stream handles differ from cuda.h");
    return 1;
  }
  std::printf("ABI agreement with cuda.h (CUDA_VERSION %d): %d entry points, %d enumerators, %d structs\n",
              CUDA_VERSION, checked_entries, checked_enumerators, checked_structs);
  return checked_entries == static_cast<int>(oxicuda::ffi::entry_count) ? 0 : 1;
}
