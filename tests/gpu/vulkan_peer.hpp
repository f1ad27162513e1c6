// The GPU suite's Vulkan side, for the external memory and semaphore tests:
// a headless Vulkan device on the same GPU, made without the Vulkan loader.
// The GPU machine has no libvulkan.so.1, but the NVIDIA driver ships its
// Vulkan implementation (the ICD named in /usr/share/vulkan/icd.d,
// libGLX_nvidia.so.0): it is opened directly and its entry points found
// through vk_icdGetInstanceProcAddr, as the loader itself would. Where
// libvulkan.so.1 exists it is used instead. Everything here is test code:
// it owns its Vulkan objects and destroys them in its destructor.
#pragma once

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <dlfcn.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

namespace vkpeer {

struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A Vulkan structure of type `T`, zeroed, with its sType and pNext set.
template <class T>
T make(VkStructureType type, void* next = nullptr) {
  T v{};
  v.sType = type;
  v.pNext = next;
  return v;
}

inline void ok(VkResult r, const char* what) {
  if (r != VK_SUCCESS) throw Failure(std::string(what) + " failed: VkResult " + std::to_string(static_cast<int>(r)));
}

// A Vulkan device on the GPU whose UUID is `uuid`, with one queue that can
// transfer, and the external-fd and timeline-semaphore features. Construction
// throws Failure, saying why, where there is no Vulkan or no such device.
class Peer {
 public:
  explicit Peer(const std::array<unsigned char, 16>& uuid) {
    open_library();
    auto create_instance = reinterpret_cast<PFN_vkCreateInstance>(gipa_(nullptr, "vkCreateInstance"));
    if (create_instance == nullptr)
      throw Failure(source_ + " loads but gives no vkCreateInstance: the Vulkan driver could not initialize (the "
                    "NVIDIA driver answers so when its graphics part is missing, as in a compute-only container)");
    auto app = make<VkApplicationInfo>(VK_STRUCTURE_TYPE_APPLICATION_INFO);
    app.pApplicationName = "oxicuda-gpu-tests";
    app.apiVersion = VK_API_VERSION_1_2;
    auto ici = make<VkInstanceCreateInfo>(VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO);
    ici.pApplicationInfo = &app;
    ok(create_instance(&ici, nullptr, &instance_), "vkCreateInstance");
    load_instance_functions();
    pick_device(uuid);
    make_device();
  }
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;
  ~Peer() {
    if (device_ != VK_NULL_HANDLE) {
      device_wait_idle_(device_);
      if (pool_ != VK_NULL_HANDLE) destroy_command_pool_(device_, pool_, nullptr);
      destroy_device_(device_, nullptr);
    }
    if (instance_ != VK_NULL_HANDLE) destroy_instance_(instance_, nullptr);
    if (library_ != nullptr) ::dlclose(library_);
  }

  [[nodiscard]] const std::string& source() const noexcept { return source_; }
  [[nodiscard]] const std::string& device_name() const noexcept { return name_; }
  [[nodiscard]] VkDevice device() const noexcept { return device_; }

  // Device entry points, by name (typed by the caller).
  template <class Fn>
  Fn fn(const char* name) const {
    auto f = reinterpret_cast<Fn>(get_device_proc_(device_, name));
    if (f == nullptr) throw Failure(std::string("no Vulkan entry point ") + name);
    return f;
  }

  // A timeline semaphore (initial value 0) exportable as a file descriptor.
  VkSemaphore timeline_semaphore() const {
    auto exp = make<VkExportSemaphoreCreateInfo>(VK_STRUCTURE_TYPE_EXPORT_SEMAPHORE_CREATE_INFO);
    exp.handleTypes = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT;
    auto type = make<VkSemaphoreTypeCreateInfo>(VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO, &exp);
    type.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
    auto sci = make<VkSemaphoreCreateInfo>(VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, &type);
    VkSemaphore s = VK_NULL_HANDLE;
    ok(fn<PFN_vkCreateSemaphore>("vkCreateSemaphore")(device_, &sci, nullptr, &s), "vkCreateSemaphore");
    return s;
  }
  int export_semaphore(VkSemaphore s) const {
    auto info = make<VkSemaphoreGetFdInfoKHR>(VK_STRUCTURE_TYPE_SEMAPHORE_GET_FD_INFO_KHR);
    info.semaphore = s;
    info.handleType = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT;
    int fd = -1;
    ok(fn<PFN_vkGetSemaphoreFdKHR>("vkGetSemaphoreFdKHR")(device_, &info, &fd), "vkGetSemaphoreFdKHR");
    return fd;
  }
  std::uint64_t counter(VkSemaphore s) const {
    std::uint64_t v = 0;
    ok(fn<PFN_vkGetSemaphoreCounterValue>("vkGetSemaphoreCounterValue")(device_, s, &v), "vkGetSemaphoreCounterValue");
    return v;
  }
  // Waits on the host until `s` reaches `value`; false after `timeout_ns`.
  bool wait(VkSemaphore s, std::uint64_t value, std::uint64_t timeout_ns) const {
    auto info = make<VkSemaphoreWaitInfo>(VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO);
    info.semaphoreCount = 1;
    info.pSemaphores = &s;
    info.pValues = &value;
    const VkResult r = fn<PFN_vkWaitSemaphores>("vkWaitSemaphores")(device_, &info, timeout_ns);
    if (r == VK_TIMEOUT) return false;
    ok(r, "vkWaitSemaphores");
    return true;
  }
  void signal(VkSemaphore s, std::uint64_t value) const {
    auto info = make<VkSemaphoreSignalInfo>(VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO);
    info.semaphore = s;
    info.value = value;
    ok(fn<PFN_vkSignalSemaphore>("vkSignalSemaphore")(device_, &info), "vkSignalSemaphore");
  }
  void destroy(VkSemaphore s) const { fn<PFN_vkDestroySemaphore>("vkDestroySemaphore")(device_, s, nullptr); }

  // A buffer of `bytes` on dedicated device memory exportable as a file
  // descriptor (or, with host_visible, plain host-visible memory).
  struct Buffer {
    VkBuffer buffer = VK_NULL_HANDLE;
    VkDeviceMemory memory = VK_NULL_HANDLE;
    VkDeviceSize allocation_size = 0;
  };
  Buffer buffer(VkDeviceSize bytes, bool exportable) const {
    Buffer b;
    auto ext = make<VkExternalMemoryBufferCreateInfo>(VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO);
    ext.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT;
    auto bci = make<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, exportable ? &ext : nullptr);
    bci.size = bytes;
    bci.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    ok(fn<PFN_vkCreateBuffer>("vkCreateBuffer")(device_, &bci, nullptr, &b.buffer), "vkCreateBuffer");
    VkMemoryRequirements req{};
    fn<PFN_vkGetBufferMemoryRequirements>("vkGetBufferMemoryRequirements")(device_, b.buffer, &req);
    const VkMemoryPropertyFlags want = exportable ? VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
                                                  : VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    auto dedicated = make<VkMemoryDedicatedAllocateInfo>(VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO);
    dedicated.buffer = b.buffer;
    auto exp = make<VkExportMemoryAllocateInfo>(VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO, &dedicated);
    exp.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT;
    auto mai = make<VkMemoryAllocateInfo>(VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, exportable ? &exp : nullptr);
    mai.allocationSize = req.size;
    mai.memoryTypeIndex = memory_type(req.memoryTypeBits, want);
    ok(fn<PFN_vkAllocateMemory>("vkAllocateMemory")(device_, &mai, nullptr, &b.memory), "vkAllocateMemory");
    ok(fn<PFN_vkBindBufferMemory>("vkBindBufferMemory")(device_, b.buffer, b.memory, 0), "vkBindBufferMemory");
    b.allocation_size = req.size;
    return b;
  }
  int export_memory(const Buffer& b) const {
    auto info = make<VkMemoryGetFdInfoKHR>(VK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR);
    info.memory = b.memory;
    info.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT;
    int fd = -1;
    ok(fn<PFN_vkGetMemoryFdKHR>("vkGetMemoryFdKHR")(device_, &info, &fd), "vkGetMemoryFdKHR");
    return fd;
  }
  void* map(const Buffer& b) const {
    void* p = nullptr;
    ok(fn<PFN_vkMapMemory>("vkMapMemory")(device_, b.memory, 0, VK_WHOLE_SIZE, 0, &p), "vkMapMemory");
    return p;
  }
  void destroy(const Buffer& b) const {
    fn<PFN_vkDestroyBuffer>("vkDestroyBuffer")(device_, b.buffer, nullptr);
    fn<PFN_vkFreeMemory>("vkFreeMemory")(device_, b.memory, nullptr);
  }

  // Records `record(command_buffer)` and submits it: it waits (on the GPU)
  // for `wait` to reach `wait_value` when `wait` is given, and signals
  // `signal` with `signal_value` when done.
  template <class Record>
  void submit(Record&& record, VkSemaphore wait, std::uint64_t wait_value, VkSemaphore signal,
              std::uint64_t signal_value) const {
    auto cai = make<VkCommandBufferAllocateInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO);
    cai.commandPool = pool_;
    cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    cai.commandBufferCount = 1;
    VkCommandBuffer cb = VK_NULL_HANDLE;
    ok(fn<PFN_vkAllocateCommandBuffers>("vkAllocateCommandBuffers")(device_, &cai, &cb), "vkAllocateCommandBuffers");
    auto begin = make<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
    begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    ok(fn<PFN_vkBeginCommandBuffer>("vkBeginCommandBuffer")(cb, &begin), "vkBeginCommandBuffer");
    record(cb);
    ok(fn<PFN_vkEndCommandBuffer>("vkEndCommandBuffer")(cb), "vkEndCommandBuffer");
    auto values = make<VkTimelineSemaphoreSubmitInfo>(VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO);
    values.waitSemaphoreValueCount = wait != VK_NULL_HANDLE ? 1 : 0;
    values.pWaitSemaphoreValues = &wait_value;
    values.signalSemaphoreValueCount = 1;
    values.pSignalSemaphoreValues = &signal_value;
    const VkPipelineStageFlags stage = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
    auto si = make<VkSubmitInfo>(VK_STRUCTURE_TYPE_SUBMIT_INFO, &values);
    si.waitSemaphoreCount = values.waitSemaphoreValueCount;
    si.pWaitSemaphores = &wait;
    si.pWaitDstStageMask = &stage;
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cb;
    si.signalSemaphoreCount = 1;
    si.pSignalSemaphores = &signal;
    ok(fn<PFN_vkQueueSubmit>("vkQueueSubmit")(queue_, 1, &si, VK_NULL_HANDLE), "vkQueueSubmit");
  }
  void idle() const { ok(fn<PFN_vkDeviceWaitIdle>("vkDeviceWaitIdle")(device_), "vkDeviceWaitIdle"); }

 private:
  void open_library() {
    for (const char* name : {"libvulkan.so.1", "libGLX_nvidia.so.0"}) {
      library_ = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (library_ == nullptr) continue;
      source_ = name;
      if (std::string(name) == "libvulkan.so.1") {
        gipa_ = reinterpret_cast<PFN_vkGetInstanceProcAddr>(::dlsym(library_, "vkGetInstanceProcAddr"));
      } else {
        using Negotiate = VkResult (*)(std::uint32_t*);
        if (auto negotiate = reinterpret_cast<Negotiate>(::dlsym(library_, "vk_icdNegotiateLoaderICDInterfaceVersion"))) {
          std::uint32_t version = 5;
          negotiate(&version);
        }
        gipa_ = reinterpret_cast<PFN_vkGetInstanceProcAddr>(::dlsym(library_, "vk_icdGetInstanceProcAddr"));
      }
      if (gipa_ != nullptr) return;
      ::dlclose(library_);
      library_ = nullptr;
    }
    throw Failure("no Vulkan: neither libvulkan.so.1 nor the NVIDIA Vulkan driver (libGLX_nvidia.so.0) loads");
  }
  void load_instance_functions() {
    auto get = [&](const char* name) {
      PFN_vkVoidFunction f = gipa_(instance_, name);
      if (f == nullptr) throw Failure(std::string("no Vulkan entry point ") + name);
      return f;
    };
    destroy_instance_ = reinterpret_cast<PFN_vkDestroyInstance>(get("vkDestroyInstance"));
    enumerate_ = reinterpret_cast<PFN_vkEnumeratePhysicalDevices>(get("vkEnumeratePhysicalDevices"));
    properties2_ = reinterpret_cast<PFN_vkGetPhysicalDeviceProperties2>(get("vkGetPhysicalDeviceProperties2"));
    families_ = reinterpret_cast<PFN_vkGetPhysicalDeviceQueueFamilyProperties>(get("vkGetPhysicalDeviceQueueFamilyProperties"));
    memory_properties_ = reinterpret_cast<PFN_vkGetPhysicalDeviceMemoryProperties>(get("vkGetPhysicalDeviceMemoryProperties"));
    create_device_ = reinterpret_cast<PFN_vkCreateDevice>(get("vkCreateDevice"));
    get_device_proc_ = reinterpret_cast<PFN_vkGetDeviceProcAddr>(get("vkGetDeviceProcAddr"));
  }
  void pick_device(const std::array<unsigned char, 16>& uuid) {
    std::uint32_t n = 0;
    ok(enumerate_(instance_, &n, nullptr), "vkEnumeratePhysicalDevices");
    VkPhysicalDevice all[16];
    n = n > 16 ? 16 : n;
    ok(enumerate_(instance_, &n, all), "vkEnumeratePhysicalDevices");
    for (std::uint32_t i = 0; i < n; ++i) {
      auto id = make<VkPhysicalDeviceIDProperties>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES);
      auto p = make<VkPhysicalDeviceProperties2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &id);
      properties2_(all[i], &p);
      if (std::memcmp(id.deviceUUID, uuid.data(), 16) == 0) {
        physical_ = all[i];
        name_ = p.properties.deviceName;
        return;
      }
    }
    throw Failure("Vulkan sees " + std::to_string(n) + " devices, none with the CUDA device's UUID");
  }
  std::uint32_t memory_type(std::uint32_t bits, VkMemoryPropertyFlags want) const {
    VkPhysicalDeviceMemoryProperties mp{};
    memory_properties_(physical_, &mp);
    for (std::uint32_t i = 0; i < mp.memoryTypeCount; ++i)
      if ((bits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want) return i;
    throw Failure("no Vulkan memory type with the properties asked for");
  }
  void make_device() {
    std::uint32_t n = 0;
    families_(physical_, &n, nullptr);
    VkQueueFamilyProperties f[32];
    n = n > 32 ? 32 : n;
    families_(physical_, &n, f);
    std::uint32_t family = n;
    for (std::uint32_t i = 0; i < n && family == n; ++i)
      if (f[i].queueFlags & (VK_QUEUE_TRANSFER_BIT | VK_QUEUE_COMPUTE_BIT | VK_QUEUE_GRAPHICS_BIT)) family = i;
    if (family == n) throw Failure("no Vulkan queue family that can transfer");
    const float priority = 1.0f;
    auto q = make<VkDeviceQueueCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO);
    q.queueFamilyIndex = family;
    q.queueCount = 1;
    q.pQueuePriorities = &priority;
    auto v12 = make<VkPhysicalDeviceVulkan12Features>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES);
    v12.timelineSemaphore = VK_TRUE;
    const char* extensions[] = {"VK_KHR_external_memory_fd", "VK_KHR_external_semaphore_fd"};
    auto dci = make<VkDeviceCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, &v12);
    dci.queueCreateInfoCount = 1;
    dci.pQueueCreateInfos = &q;
    dci.enabledExtensionCount = 2;
    dci.ppEnabledExtensionNames = extensions;
    ok(create_device_(physical_, &dci, nullptr, &device_), "vkCreateDevice");
    destroy_device_ = fn<PFN_vkDestroyDevice>("vkDestroyDevice");
    device_wait_idle_ = fn<PFN_vkDeviceWaitIdle>("vkDeviceWaitIdle");
    destroy_command_pool_ = fn<PFN_vkDestroyCommandPool>("vkDestroyCommandPool");
    fn<PFN_vkGetDeviceQueue>("vkGetDeviceQueue")(device_, family, 0, &queue_);
    auto pci = make<VkCommandPoolCreateInfo>(VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO);
    pci.queueFamilyIndex = family;
    ok(fn<PFN_vkCreateCommandPool>("vkCreateCommandPool")(device_, &pci, nullptr, &pool_), "vkCreateCommandPool");
  }

  void* library_ = nullptr;
  std::string source_;
  std::string name_;
  PFN_vkGetInstanceProcAddr gipa_ = nullptr;
  PFN_vkDestroyInstance destroy_instance_ = nullptr;
  PFN_vkEnumeratePhysicalDevices enumerate_ = nullptr;
  PFN_vkGetPhysicalDeviceProperties2 properties2_ = nullptr;
  PFN_vkGetPhysicalDeviceQueueFamilyProperties families_ = nullptr;
  PFN_vkGetPhysicalDeviceMemoryProperties memory_properties_ = nullptr;
  PFN_vkCreateDevice create_device_ = nullptr;
  PFN_vkGetDeviceProcAddr get_device_proc_ = nullptr;
  PFN_vkDestroyDevice destroy_device_ = nullptr;
  PFN_vkDeviceWaitIdle device_wait_idle_ = nullptr;
  PFN_vkDestroyCommandPool destroy_command_pool_ = nullptr;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  VkCommandPool pool_ = VK_NULL_HANDLE;
};

}  // namespace vkpeer
