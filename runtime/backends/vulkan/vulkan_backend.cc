// The Vulkan backend: finds the loader (libvulkan.so.1) with dlopen, creates
// an instance (API 1.1+) and describes every physical device: apiVersion,
// the SPIR-V version it accepts, compute limits, subgroup size range,
// supported features and extensions as tokens ("vk.feature.shaderFloat16",
// "vk.ext.VK_KHR_cooperative_matrix"), the subgroup operations compute
// shaders may use ("vk.subgroup.shuffle") and the cooperative-matrix shapes it
// runs ("vk.coopmat.f16.f16.f32.f32.16x16x16", VULKAN_CONTRACT.md).
// Launch, buffers and streams: vulkan_device.h (CreateVulkanDevice).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "../../src/backend.h"
#include "../../src/dynamic_library.h"
#include "vulkan_api.h"
#include "vulkan_device.h"

namespace tl::rt {

namespace {

void AddFeatureTokens(const VkPhysicalDeviceFeatures2& f2, const VkPhysicalDeviceVulkan11Features& f11,
                      const VkPhysicalDeviceVulkan12Features& f12, std::vector<std::string>* out) {
  auto add = [&](bool on, const char* name) {
    if (on) out->push_back(std::string("vk.feature.") + name);
  };
  add(f2.features.shaderInt64, "shaderInt64");
  add(f2.features.shaderInt16, "shaderInt16");
  add(f2.features.shaderFloat64, "shaderFloat64");
  add(f11.storageBuffer16BitAccess, "storageBuffer16BitAccess");
  add(f12.shaderFloat16, "shaderFloat16");
  add(f12.shaderInt8, "shaderInt8");
  add(f12.storageBuffer8BitAccess, "storageBuffer8BitAccess");
  add(f12.bufferDeviceAddress, "bufferDeviceAddress");
  add(f12.vulkanMemoryModel, "vulkanMemoryModel");
}

// "vk.coopmat.<A>.<B>.<C>.<R>.<M>x<N>x<K>" per subgroup-scope shape the
// device reports (VK_KHR_cooperative_matrix), skipping types the token
// spelling has no name for; sorted, without duplicates.
void AddCoopmatTokens(const vk::Instance& in, VkPhysicalDevice pd, std::vector<std::string>* out) {
  if (!in.vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR) return;
  uint32_t count = 0;
  if (in.vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR(pd, &count, nullptr) != VK_SUCCESS || count == 0) return;
  std::vector<vk::CooperativeMatrixPropertiesKhr> props(count);
  for (auto& p : props) {
    memset(&p, 0, sizeof(p));
    p.sType = vk::kStructCooperativeMatrixPropertiesKhr;
  }
  VkResult r = in.vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR(pd, &count, props.data());
  if (r != VK_SUCCESS && r != VK_INCOMPLETE) return;
  props.resize(std::min<size_t>(count, props.size()));
  std::vector<std::string> tokens;
  for (const auto& p : props) {
    if (p.scope != vk::kScopeSubgroup) continue;
    const char* a = vk::ComponentTypeToken(p.AType);
    const char* b = vk::ComponentTypeToken(p.BType);
    const char* c = vk::ComponentTypeToken(p.CType);
    const char* d = vk::ComponentTypeToken(p.ResultType);
    if (!a || !b || !c || !d) continue;
    tokens.push_back(std::string("vk.coopmat.") + a + "." + b + "." + c + "." + d + "." + std::to_string(p.MSize) +
                     "x" + std::to_string(p.NSize) + "x" + std::to_string(p.KSize));
  }
  std::sort(tokens.begin(), tokens.end());
  tokens.erase(std::unique(tokens.begin(), tokens.end()), tokens.end());
  out->insert(out->end(), tokens.begin(), tokens.end());
}

// "vk.subgroup.<op>" per subgroup operation class the device supports in
// compute shaders (VULKAN_CONTRACT.md, additions by the SPIR-V side).
void AddSubgroupTokens(const VkPhysicalDeviceSubgroupProperties& sub, std::vector<std::string>* out) {
  if (!(sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT)) return;
  static const struct {
    VkSubgroupFeatureFlagBits bit;
    const char* name;
  } kOps[] = {{VK_SUBGROUP_FEATURE_BASIC_BIT, "basic"},
              {VK_SUBGROUP_FEATURE_VOTE_BIT, "vote"},
              {VK_SUBGROUP_FEATURE_ARITHMETIC_BIT, "arithmetic"},
              {VK_SUBGROUP_FEATURE_BALLOT_BIT, "ballot"},
              {VK_SUBGROUP_FEATURE_SHUFFLE_BIT, "shuffle"},
              {VK_SUBGROUP_FEATURE_SHUFFLE_RELATIVE_BIT, "shuffle_relative"},
              {VK_SUBGROUP_FEATURE_CLUSTERED_BIT, "clustered"},
              {VK_SUBGROUP_FEATURE_QUAD_BIT, "quad"}};
  for (const auto& op : kOps) {
    if (sub.supportedOperations & op.bit) out->push_back(std::string("vk.subgroup.") + op.name);
  }
}

// The environment variables the Vulkan loader reads when it creates an
// instance (which drivers and layers it loads). A runtime created after one of
// them changed gets an instance of its own.
std::string LoaderEnvironmentKey() {
  static const char* const kVars[] = {"VK_DRIVER_FILES",          "VK_ICD_FILENAMES",         "VK_ADD_DRIVER_FILES",
                                      "VK_LOADER_DRIVERS_SELECT", "VK_LOADER_DRIVERS_DISABLE", "VK_INSTANCE_LAYERS",
                                      "VK_LOADER_LAYERS_ENABLE",  "VK_LOADER_LAYERS_DISABLE",  "VK_LAYER_PATH",
                                      "VK_ADD_LAYER_PATH"};
  std::string key;
  for (const char* var : kVars) {
    const char* v = getenv(var);
    key += std::string(var) + "=" + (v ? v : "") + "\n";
  }
  return key;
}

// Creates the VkInstance on `lib` and resolves the instance entry points.
StatusOr<std::shared_ptr<vk::Instance>> CreateInstance(std::unique_ptr<DynamicLibrary> lib) {
  auto st = std::make_shared<vk::Instance>();
  st->library = std::move(lib);
  const std::string path = st->library->path();
  st->vkGetInstanceProcAddr = reinterpret_cast<PFN_vkGetInstanceProcAddr>(st->library->Symbol("vkGetInstanceProcAddr"));
  if (!st->vkGetInstanceProcAddr) {
    return Status(StatusCode::kUnavailable, "Vulkan loader " + path + " lacks vkGetInstanceProcAddr");
  }
#define TL_VK_GLOBAL(name) st->name = reinterpret_cast<PFN_##name>(st->vkGetInstanceProcAddr(VK_NULL_HANDLE, #name));
#include "vulkan_symbols.h"
#undef TL_VK_GLOBAL
  if (!st->vkCreateInstance) {
    return Status(StatusCode::kUnavailable, "Vulkan loader " + path + " returns no vkCreateInstance");
  }
  uint32_t loader_version = VK_API_VERSION_1_0;
  if (st->vkEnumerateInstanceVersion) st->vkEnumerateInstanceVersion(&loader_version);
  if (loader_version < VK_API_VERSION_1_1) {
    return MakeStatus(StatusCode::kUnavailable, "Vulkan loader %s supports API %u.%u; 1.1 is needed", path.c_str(),
                      VK_API_VERSION_MAJOR(loader_version), VK_API_VERSION_MINOR(loader_version));
  }
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "tilelang-runtime";
  app.apiVersion = loader_version >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : loader_version;
  st->api_version = app.apiVersion;
  VkInstanceCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  ci.pApplicationInfo = &app;
  if (VkResult rc = st->vkCreateInstance(&ci, nullptr, &st->instance); rc != VK_SUCCESS) {
    st->instance = VK_NULL_HANDLE;
    return MakeStatus(StatusCode::kUnavailable, "Vulkan loader %s: vkCreateInstance failed with %s", path.c_str(),
                      vk::ResultText(rc).c_str());
  }
  std::string missing;
#define TL_VK_INSTANCE(name)                                                                     \
  st->name = reinterpret_cast<PFN_##name>(st->vkGetInstanceProcAddr(st->instance, #name));      \
  if (!st->name) missing += (missing.empty() ? "" : ", ") + std::string(#name);
#define TL_VK_INSTANCE_OPTIONAL(name) \
  st->name = reinterpret_cast<PFN_##name>(st->vkGetInstanceProcAddr(st->instance, #name));
#include "vulkan_symbols.h"
#undef TL_VK_INSTANCE
#undef TL_VK_INSTANCE_OPTIONAL
  if (!missing.empty()) return Status(StatusCode::kUnavailable, "Vulkan loader " + path + " lacks: " + missing);
  return st;
}

// One VkInstance per (loader library, loader environment) for the whole
// process, created by the first runtime that needs it and never destroyed.
//
// Why: destroying the last VkInstance makes the loader dlclose every driver
// (ICD) it loaded, and the next vkCreateInstance loads and initializes them
// again. NVIDIA's driver (580.159 on the H200) does not survive that in every
// process: there a runtime created after another was destroyed got
// VK_ERROR_INCOMPATIBLE_DRIVER (-9) from vkCreateInstance (after a fork() for
// system() in between; runtimes created and destroyed in turn without one
// worked). Keeping one instance alive keeps the drivers loaded and
// initialized once, as in an application that creates one instance for its
// lifetime; runtimes share it (VkPhysicalDevice handles belong to it; each
// runtime still creates its own VkDevice). Destroying it at exit is not
// attempted either: static destructors and the drivers' own exit handlers run
// in no fixed order, and the process is ending. The loader library is never
// unloaded for the same reason (RTLD_NODELETE, dynamic_library.cc).
// A failure is not remembered: the next runtime tries again.
StatusOr<std::shared_ptr<const vk::Instance>> ProcessInstance(const BackendOptions& options, bool* reused) {
  static std::mutex* mu = new std::mutex;
  static auto* instances = new std::map<std::string, std::shared_ptr<const vk::Instance>>;
  *reused = false;
  auto lib = DynamicLibrary::Open("Vulkan loader", {"libvulkan.so.1"}, options.driver_search_paths);
  if (!lib.ok()) return lib.status();
  const std::string key = lib.value()->path() + "\n" + LoaderEnvironmentKey();
  std::lock_guard<std::mutex> lock(*mu);
  auto it = instances->find(key);
  if (it != instances->end()) {
    *reused = true;
    return it->second;  // `lib` is closed again; RTLD_NODELETE keeps the loader mapped
  }
  auto created = CreateInstance(std::move(lib.value()));
  if (!created.ok()) return created.status();
  std::shared_ptr<const vk::Instance> instance = std::move(created.value());
  instances->emplace(key, instance);
  return instance;
}

}  // namespace

std::unique_ptr<Backend> CreateVulkanBackend(const BackendOptions& options) {
  auto backend = std::make_unique<Backend>();
  backend->kind = kBackendVulkan;
  bool reused = false;
  auto acquired = ProcessInstance(options, &reused);
  if (!acquired.ok()) {
    backend->status = acquired.status();
    return backend;
  }
  std::shared_ptr<const vk::Instance> st = acquired.value();
  if (options.logger) {
    options.logger->Log(TL_LOG_DEBUG, "vulkan: %s the process's VkInstance (loader %s)",
                        reused ? "reusing" : "created", st->library->path().c_str());
  }
  uint32_t count = 0;
  st->vkEnumeratePhysicalDevices(st->instance, &count, nullptr);
  std::vector<VkPhysicalDevice> physical(count);
  if (count) st->vkEnumeratePhysicalDevices(st->instance, &count, physical.data());
  physical.resize(count);
  for (VkPhysicalDevice pd : physical) {
    uint32_t ext_count = 0;
    st->vkEnumerateDeviceExtensionProperties(pd, nullptr, &ext_count, nullptr);
    std::vector<VkExtensionProperties> exts(ext_count);
    if (ext_count) st->vkEnumerateDeviceExtensionProperties(pd, nullptr, &ext_count, exts.data());
    exts.resize(std::min<size_t>(ext_count, exts.size()));
    bool size_control_ext = false;
    for (const auto& e : exts) {
      size_control_ext = size_control_ext || strcmp(e.extensionName, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME) == 0;
    }
    VkPhysicalDeviceProperties base{};
    st->vkGetPhysicalDeviceProperties(pd, &base);
    if (base.apiVersion < VK_API_VERSION_1_1) continue;  // 1.1 needed for the queries below

    VkPhysicalDeviceSubgroupSizeControlProperties size_control{};
    size_control.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES;
    VkPhysicalDeviceSubgroupProperties subgroup{};
    subgroup.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
    // Chaining a struct the device does not know is invalid usage: the size
    // range needs Vulkan 1.3 or VK_EXT_subgroup_size_control.
    if (base.apiVersion >= VK_API_VERSION_1_3 || size_control_ext) subgroup.pNext = &size_control;
    VkPhysicalDeviceProperties2 props{};
    props.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
    props.pNext = &subgroup;
    st->vkGetPhysicalDeviceProperties2(pd, &props);
    const VkPhysicalDeviceProperties& p = props.properties;

    vk::PhysicalInfo info;
    info.physical = pd;
    info.ordinal = static_cast<uint32_t>(backend->devices.size());
    info.props = p;
    info.subgroup = subgroup;
    info.subgroup.pNext = nullptr;
    info.size_control = subgroup.pNext != nullptr;
    info.size_control_props = size_control;
    info.size_control_props.pNext = nullptr;
    for (const auto& e : exts) info.extensions.insert(e.extensionName);

    // Features. Structs are only chained where the device knows them: the
    // 1.1/1.2 structs on 1.2 devices, 1.3 on 1.3, extension structs with
    // their extension.
    info.f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    info.f11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
    info.f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
    info.f13.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES;
    info.coopmat.sType = vk::kStructPhysicalDeviceCooperativeMatrixFeaturesKhr;
    info.size_control_features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES;
    info.atomic_float.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT;
    info.has_f12 = p.apiVersion >= VK_API_VERSION_1_2 && st->api_version >= VK_API_VERSION_1_2;
    info.has_f13 = p.apiVersion >= VK_API_VERSION_1_3 && st->api_version >= VK_API_VERSION_1_3;
    void** tail = &info.f2.pNext;
    auto chain = [&](auto* s) {
      *tail = s;
      tail = &s->pNext;
    };
    if (info.has_f12) {
      chain(&info.f11);
      chain(&info.f12);
    }
    if (info.has_f13) chain(&info.f13);
    if (info.HasExtension("VK_KHR_cooperative_matrix")) chain(&info.coopmat);
    if (!info.has_f13 && size_control_ext) chain(&info.size_control_features);
    if (info.HasExtension(VK_EXT_SHADER_ATOMIC_FLOAT_EXTENSION_NAME)) chain(&info.atomic_float);
    st->vkGetPhysicalDeviceFeatures2(pd, &info.f2);
    info.f2.pNext = info.f11.pNext = info.f12.pNext = info.f13.pNext = nullptr;
    info.coopmat.pNext = info.size_control_features.pNext = info.atomic_float.pNext = nullptr;

    uint32_t family_count = 0;
    st->vkGetPhysicalDeviceQueueFamilyProperties(pd, &family_count, nullptr);
    std::vector<VkQueueFamilyProperties> families(family_count);
    if (family_count) st->vkGetPhysicalDeviceQueueFamilyProperties(pd, &family_count, families.data());
    for (uint32_t q = 0; q < family_count && q < families.size(); ++q) {
      if (families[q].queueFlags & VK_QUEUE_COMPUTE_BIT) {
        info.queue_family = static_cast<int>(q);
        info.timestamp_valid_bits = families[q].timestampValidBits;
        break;
      }
    }

    DeviceDesc d;
    d.backend = kBackendVulkan;
    d.name = p.deviceName;
    d.driver_version = p.apiVersion;
    if (p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU) d.flags |= TL_DEVICE_FLAG_SOFTWARE;
    if (p.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU) d.flags |= TL_DEVICE_FLAG_INTEGRATED;
    AddFeatureTokens(info.f2, info.f11, info.f12, &d.vk_features);
    for (const auto& e : exts) d.vk_features.push_back(std::string("vk.ext.") + e.extensionName);
    if (info.coopmat.cooperativeMatrix) AddCoopmatTokens(*st, pd, &d.vk_features);
    AddSubgroupTokens(subgroup, &d.vk_features);
    st->vkGetPhysicalDeviceMemoryProperties(pd, &info.memory);
    const VkPhysicalDeviceMemoryProperties& mem = info.memory;
    for (uint32_t h = 0; h < mem.memoryHeapCount; ++h) {
      if (mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) d.memory_bytes += mem.memoryHeaps[h].size;
    }
    const VkPhysicalDeviceLimits& l = p.limits;
    d.limits.max_shared_bytes = l.maxComputeSharedMemorySize;
    d.limits.max_threads_per_block = l.maxComputeWorkGroupInvocations;
    for (int i = 0; i < 3; ++i) {
      d.limits.max_block[i] = l.maxComputeWorkGroupSize[i];
      d.limits.max_grid[i] = l.maxComputeWorkGroupCount[i];
    }
    d.limits.max_push_constant_bytes = l.maxPushConstantsSize;
    // Without subgroup size control the size is fixed at subgroupSize.
    d.limits.subgroup_min = d.limits.subgroup_max = subgroup.subgroupSize;
    if (subgroup.pNext && size_control.minSubgroupSize != 0) {
      d.limits.subgroup_min = size_control.minSubgroupSize;
      d.limits.subgroup_max = size_control.maxSubgroupSize;
    }
    d.Finalize();
    backend->devices.push_back(CreateVulkanDevice(std::move(d), std::move(info), st, options));
  }
  backend->state = std::const_pointer_cast<vk::Instance>(st);
  return backend;
}

}  // namespace tl::rt
