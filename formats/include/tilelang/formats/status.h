// tl::Status: the error type of every C++ layer below the C ABI.
//
// A Status is a code plus a message that carries the numbers (offsets, sizes,
// indices, limits) needed to understand the failure. The codes are the C ABI's
// tl_status_code_t values, so the runtime converts without a table.
// Thread-safety: a value type; copies are independent.
#pragma once

#include <string>
#include <utility>

namespace tl {

enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kIncompatible = 18,
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "DATA_LOSS: payload 3: stored CRC32C 0x1234abcd, computed 0x..."
  std::string ToString() const;
  // Prefixes context: "opening foo.tlb: " + message.
  Status Annotate(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// printf-style constructor: MakeStatus(StatusCode::kDataLoss, "payload %u: ...", i).
Status MakeStatus(StatusCode code, const char* format, ...) __attribute__((format(printf, 2, 3)));

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return value_; }
  const T& value() const& { return value_; }
  T&& value() && { return std::move(value_); }
  T* operator->() { return &value_; }
  const T* operator->() const { return &value_; }
  T& operator*() { return value_; }

 private:
  Status status_;
  T value_{};
};

#define TL_RETURN_IF_ERROR(expr)          \
  do {                                    \
    ::tl::Status tl_status_ = (expr);     \
    if (!tl_status_.ok()) return tl_status_; \
  } while (0)

}  // namespace tl
