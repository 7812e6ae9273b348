//===- OutputFile.h - Safe output paths and atomic writes -------*- C++ -*-===//
//
// Every comfyquant tool that writes goes through these helpers, so that no
// tool can destroy an input and no reader ever sees a half-written output:
//
//   * checkNotAnInput: the output must not be one of the inputs (the same
//     device and inode after following symlinks, or the same canonical path:
//     symlinks and hard links are caught), and an output directory must not
//     contain an input;
//   * checkOverwrite: an existing output is replaced only when asked
//     (--overwrite); an empty directory does not count as an output;
//   * AtomicFile: the bytes go to a temporary file in the target's directory,
//     are fsync'ed, and the file is renamed over the target;
//   * publishDirectory: a finished directory built next to the target
//     replaces it in one step (renameat2 RENAME_EXCHANGE, then the previous
//     contents are removed).
//
// An output that is a symlink is itself replaced by the rename; the file it
// pointed to is left alone.
//===----------------------------------------------------------------------===//
#ifndef COMFYQUANT_RUNTIME_OUTPUTFILE_H
#define COMFYQUANT_RUNTIME_OUTPUTFILE_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace comfyquant::rt {

/// Throws Error naming `output` and the input it would destroy when `output`
/// is one of `inputs` (same file through symlinks or hard links) or, for a
/// directory output, when an input lies inside it.
void checkNotAnInput(const std::string &output,
                     const std::vector<std::string> &inputs,
                     bool outputIsDirectory = false);

/// Throws Error when `output` exists and `overwrite` is false. For a
/// directory output, an existing empty directory is not refused.
void checkOverwrite(const std::string &output, bool overwrite,
                    bool outputIsDirectory = false);

/// A file written atomically: created as a temporary file beside `path`,
/// renamed over it by commit(). Destroying an uncommitted AtomicFile removes
/// the temporary file; `path` is untouched until commit().
class AtomicFile {
public:
  /// Creates the temporary file. Throws Error.
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile &) = delete;
  AtomicFile &operator=(const AtomicFile &) = delete;

  /// Appends bytes. Throws Error.
  void write(const void *data, size_t size);
  void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }
  /// Writes bytes at an absolute offset of the temporary file (pwrite; safe
  /// from several threads for disjoint ranges). Throws Error.
  void writeAt(uint64_t offset, const void *data, size_t size);
  /// fsync + rename over the target (+ fsync of the directory, best effort).
  /// Throws Error.
  void commit();

  const std::string &path() const { return path_; }
  const std::string &tempPath() const { return temp_; }

private:
  std::string path_, temp_;
  int fd_ = -1;
};

/// Writes `bytes` to `path` atomically. Throws Error.
void writeFileAtomically(const std::string &path, std::string_view bytes);

/// Makes `staged` (a finished directory on the same file system) appear as
/// `dir`, after flushing the files in it to disk. When `dir` exists it is exchanged with `staged` in one rename
/// (renameat2 RENAME_EXCHANGE: `dir` never goes missing) and the previous
/// contents, now at `staged`, are removed. Where the file system cannot
/// exchange, `dir` is moved aside first, so it is briefly absent. Throws
/// Error; on failure `dir` is left as it was.
void publishDirectory(const std::string &staged, const std::string &dir);

} // namespace comfyquant::rt

#endif // COMFYQUANT_RUNTIME_OUTPUTFILE_H
