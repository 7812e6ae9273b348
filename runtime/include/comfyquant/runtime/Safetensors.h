//===- Safetensors.h - mmap-backed safetensors reader -----------*- C++ -*-===//
//
// A strict, zero-copy safetensors reader. A file is mapped read-only (never
// written); every tensor is a view into the mapping. Validation, each failure
// an Error naming the file, the tensor and the rule:
//   * file at least 8 bytes; header length (u64 LE) <= file size - 8, and
//     <= kMaxHeaderBytes;
//   * the header is a JSON object; each entry other than "__metadata__" is an
//     object with "dtype" (known name), "shape" (array of non-negative ints)
//     and "data_offsets" ([begin, end], begin <= end);
//   * "__metadata__", if present, is an object of string -> string;
//   * numel x element size == end - begin (computed with overflow checks);
//   * ranges lie inside the data section, do not overlap, and leave no holes
//     (their union is exactly [0, data size)).
//
// Sharded checkpoints: Checkpoint::open accepts a "*.safetensors.index.json"
// ({"metadata": {...}, "weight_map": {tensor: shard file}}); every shard is
// mapped, every tensor named in weight_map must exist in its shard, and a tensor
// name may live in one shard only.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_RUNTIME_SAFETENSORS_H
#define COMFYQUANT_RUNTIME_SAFETENSORS_H

#include "comfyquant/runtime/DType.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace comfyquant::rt {

/// Headers larger than this are rejected (safetensors itself caps at 100 MB).
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

/// One tensor of a file: metadata plus a view of its bytes.
struct TensorInfo {
  std::string name;
  DType dtype = DType::U8;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0; ///< byte range relative to the data section
  const uint8_t *data = nullptr; ///< begin of the bytes inside the mapping
  const std::string *file = nullptr; ///< path of the file holding it

  int64_t numel() const;
  uint64_t nbytes() const { return end - begin; }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  /// Absolute file offset of the first byte.
  uint64_t fileOffset = 0;
};

/// The parsed header, independent of any mapping (fuzzable).
struct SafetensorsHeader {
  std::map<std::string, std::string> metadata; ///< "__metadata__"
  std::vector<TensorInfo> tensors;             ///< sorted by begin offset
};

/// Parses and validates a header JSON. `dataSize` is the size of the data
/// section; `file` only labels error messages. Throws Error. The returned
/// tensors have `data` and `file` null; `fileOffset` assumes `json` is the
/// complete header (8 + json.size() + begin).
SafetensorsHeader parseSafetensorsHeader(std::string_view json,
                                         uint64_t dataSize,
                                         const std::string &file);

/// A read-only mapped safetensors file.
class SafetensorsFile {
public:
  /// Maps and validates `path`. Throws Error.
  static std::unique_ptr<SafetensorsFile> open(const std::string &path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile &) = delete;
  SafetensorsFile &operator=(const SafetensorsFile &) = delete;

  const std::string &path() const { return path_; }
  uint64_t fileSize() const { return size_; }
  uint64_t headerSize() const { return headerSize_; }
  /// The raw header JSON bytes (for hashing / identity).
  std::string_view headerJson() const;
  const std::map<std::string, std::string> &metadata() const {
    return header_.metadata;
  }
  /// Tensors in file order (ascending offset).
  const std::vector<TensorInfo> &tensors() const { return header_.tensors; }
  /// nullptr when absent.
  const TensorInfo *find(std::string_view name) const;

private:
  SafetensorsFile() = default;
  std::string path_;
  const uint8_t *base_ = nullptr;
  uint64_t size_ = 0, headerSize_ = 0;
  SafetensorsHeader header_;
  std::map<std::string, size_t, std::less<>> index_;
};

/// A checkpoint: one file, or the shards of an index.json.
class Checkpoint {
public:
  /// Opens a .safetensors file or a *.index.json. Throws Error.
  static std::unique_ptr<Checkpoint> open(const std::string &path);

  /// The path given to open().
  const std::string &path() const { return path_; }
  const std::vector<std::unique_ptr<SafetensorsFile>> &shards() const {
    return shards_;
  }
  /// __metadata__ of all shards merged (index "metadata" entries that are
  /// strings included); a key present in several shards with different values
  /// is an Error.
  const std::map<std::string, std::string> &metadata() const {
    return metadata_;
  }
  /// All tensors across shards, sorted by name.
  const std::vector<const TensorInfo *> &tensors() const { return sorted_; }
  const TensorInfo *find(std::string_view name) const;
  /// Sum of shard file sizes.
  uint64_t totalSize() const;
  /// FNV-1a 64 of the concatenated shard headers (checkpoint identity).
  uint64_t headerHash() const;

private:
  std::string path_;
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::map<std::string, std::string> metadata_;
  std::vector<const TensorInfo *> sorted_;
  std::map<std::string, const TensorInfo *, std::less<>> byName_;
};

/// The files a checkpoint was read from: the path given to open() (a
/// .safetensors file or the index) and every shard (what no output may
/// overwrite: checkNotAnInput in OutputFile.h).
std::vector<std::string> checkpointFiles(const Checkpoint &checkpoint);

/// A tensor to write.
struct OutputTensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

/// Where a tensor goes in a file being written: its header entry and size.
struct TensorLayout {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t nbytes = 0;
};

/// The bytes that start a safetensors file holding `tensors` back to back in
/// the given order: the 8-byte length and the JSON header, padded to a
/// multiple of 8. Checks names (unique, UTF-8), shapes and sizes; `offsets`
/// receives each tensor's offset in the data section. `path` labels errors.
/// Throws Error.
std::string safetensorsHeader(const std::string &path,
                              const std::vector<TensorLayout> &tensors,
                              const std::map<std::string, std::string> &metadata,
                              std::vector<uint64_t> *offsets = nullptr);

/// Writes a safetensors file atomically (temp file in the same directory +
/// rename). Tensors are laid out in the given order. Throws Error.
void writeSafetensors(const std::string &path,
                      const std::vector<OutputTensor> &tensors,
                      const std::map<std::string, std::string> &metadata = {});

} // namespace comfyquant::rt

#endif // COMFYQUANT_RUNTIME_SAFETENSORS_H
