#include "pipeline_cache_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "tilelang/formats/checksum.h"

namespace tl::rt::vk {

namespace {

constexpr char kMagic[8] = {'T', 'L', 'V', 'K', 'P', 'C', '0', '1'};
constexpr size_t kHeaderBytes = 24;
// Larger files are not read (a driver's cache of many kernels is a few MiB).
constexpr uint64_t kMaxDataBytes = uint64_t{1} << 30;

uint32_t Le32(const uint8_t* p) { return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24; }
uint64_t Le64(const uint8_t* p) { return uint64_t{Le32(p)} | uint64_t{Le32(p + 4)} << 32; }
void Put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void Put64(uint8_t* p, uint64_t v) {
  Put32(p, static_cast<uint32_t>(v));
  Put32(p + 4, static_cast<uint32_t>(v >> 32));
}

}  // namespace

std::string PipelineCacheFileName(const VkPhysicalDeviceProperties& props) {
  std::string uuid;
  char hex[3];
  for (uint8_t b : props.pipelineCacheUUID) {
    snprintf(hex, sizeof(hex), "%02x", b);
    uuid += hex;
  }
  char tail[64];
  snprintf(tail, sizeof(tail), "-%04x-%04x-%08x.bin", props.vendorID, props.deviceID, props.driverVersion);
  return "vulkan-pipelines-" + uuid + tail;
}

std::vector<uint8_t> ReadPipelineCacheFile(const std::string& path, const VkPhysicalDeviceProperties& props,
                                           std::string* note) {
  std::vector<uint8_t> out;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *note = "no pipeline cache file " + path + " (" + strerror(errno) + ")";
    return out;
  }
  struct stat st;
  std::vector<uint8_t> bytes;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) <= kMaxDataBytes + kHeaderBytes) {
    bytes.resize(static_cast<size_t>(st.st_size));
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = read(fd, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    bytes.resize(done);
  }
  close(fd);
  auto ignored = [&](const std::string& why) {
    *note = "pipeline cache file " + path + " ignored: " + why;
    return std::vector<uint8_t>();
  };
  if (bytes.size() < kHeaderBytes || memcmp(bytes.data(), kMagic, 8) != 0) return ignored("not a TLVKPC01 file");
  const uint64_t size = Le64(bytes.data() + 8);
  if (size != bytes.size() - kHeaderBytes) {
    return ignored("holds " + std::to_string(bytes.size() - kHeaderBytes) + " data bytes, header says " +
                   std::to_string(size));
  }
  std::span<const uint8_t> data(bytes.data() + kHeaderBytes, bytes.size() - kHeaderBytes);
  const uint32_t crc = Le32(bytes.data() + 16);
  if (tl::formats::Crc32c(data) != crc) return ignored("checksum mismatch");
  // VkPipelineCacheHeaderVersionOne: headerSize, headerVersion, vendorID,
  // deviceID, pipelineCacheUUID[16].
  if (data.size() < 32 || Le32(data.data()) < 32 || Le32(data.data()) > data.size() ||
      Le32(data.data() + 4) != VK_PIPELINE_CACHE_HEADER_VERSION_ONE) {
    return ignored("no Vulkan pipeline cache header");
  }
  if (Le32(data.data() + 8) != props.vendorID || Le32(data.data() + 12) != props.deviceID ||
      memcmp(data.data() + 16, props.pipelineCacheUUID, VK_UUID_SIZE) != 0) {
    return ignored("written for another device or driver");
  }
  out.assign(data.begin(), data.end());
  *note = "read " + std::to_string(out.size()) + " bytes from pipeline cache file " + path;
  return out;
}

Status WritePipelineCacheFile(const std::string& path, std::span<const uint8_t> data) {
  std::vector<uint8_t> bytes(kHeaderBytes + data.size());
  memcpy(bytes.data(), kMagic, 8);
  Put64(bytes.data() + 8, data.size());
  Put32(bytes.data() + 16, tl::formats::Crc32c(data));
  Put32(bytes.data() + 20, 0);
  if (!data.empty()) memcpy(bytes.data() + kHeaderBytes, data.data(), data.size());
  std::string tmpl = path + ".XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  int fd = mkstemp(name.data());
  if (fd < 0) return MakeStatus(StatusCode::kUnavailable, "creating %s: %s", tmpl.c_str(), strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      close(fd);
      unlink(name.data());
      return MakeStatus(StatusCode::kUnavailable, "writing %s: %s", name.data(), strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  close(fd);
  if (rename(name.data(), path.c_str()) != 0) {
    int err = errno;
    unlink(name.data());
    return MakeStatus(StatusCode::kUnavailable, "renaming %s to %s: %s", name.data(), path.c_str(), strerror(err));
  }
  return Status::Ok();
}

}  // namespace tl::rt::vk
