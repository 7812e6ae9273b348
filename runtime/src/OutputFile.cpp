//===- OutputFile.cpp - Safe output paths and atomic writes ---------------===//
#include "comfyquant/runtime/OutputFile.h"

#include "comfyquant/runtime/Error.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace comfyquant::rt {

namespace {

std::string errnoText(int err) { return std::strerror(err); }

std::string quotedPath(const std::string &s) { return "'" + s + "'"; }

/// realpath(), or "" when the path does not resolve.
std::string canonicalPath(const std::string &path) {
  char *p = ::realpath(path.c_str(), nullptr);
  if (!p)
    return "";
  std::string s = p;
  std::free(p);
  return s;
}

std::string parentOf(const std::string &path) {
  size_t slash = path.find_last_not_of('/');
  slash = slash == std::string::npos ? std::string::npos
                                     : path.rfind('/', slash);
  if (slash == std::string::npos)
    return ".";
  if (slash == 0)
    return "/";
  return path.substr(0, slash);
}

bool isEmptyDirectory(const std::string &path) {
  DIR *d = ::opendir(path.c_str());
  if (!d)
    return false;
  bool empty = true;
  while (dirent *e = ::readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
      empty = false;
      break;
    }
  ::closedir(d);
  return empty;
}

/// Best effort: makes a rename in `dir` durable.
void syncDirectory(const std::string &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    (void)::fsync(fd);
    ::close(fd);
  }
}

/// Best effort: flushes the files directly inside `dir`, so a directory
/// published after a crash never holds empty or partial files.
void syncFilesIn(const std::string &dir) {
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    return;
  while (dirent *e = ::readdir(d)) {
    std::string path = dir + "/" + e->d_name;
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
      continue;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      (void)::fsync(fd);
      ::close(fd);
    }
  }
  ::closedir(d);
  syncDirectory(dir);
}

void removeTree(const std::string &path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

} // namespace

void checkNotAnInput(const std::string &output,
                     const std::vector<std::string> &inputs,
                     bool outputIsDirectory) {
  struct stat out;
  if (::stat(output.c_str(), &out) != 0)
    return; // nothing there (or a dangling link): no input can be it
  const std::string outCanonical = canonicalPath(output);
  for (const std::string &input : inputs) {
    struct stat in;
    if (::stat(input.c_str(), &in) != 0)
      continue;
    const std::string inCanonical = canonicalPath(input);
    if ((in.st_dev == out.st_dev && in.st_ino == out.st_ino) ||
        (!outCanonical.empty() && inCanonical == outCanonical))
      throw Error(output, "",
                  "is the input " + quotedPath(input) +
                      " (the same file); refusing to overwrite an input");
    if (outputIsDirectory && S_ISDIR(out.st_mode) && !outCanonical.empty() &&
        inCanonical.size() > outCanonical.size() &&
        inCanonical.compare(0, outCanonical.size(), outCanonical) == 0 &&
        (outCanonical == "/" || inCanonical[outCanonical.size()] == '/'))
      throw Error(output, "",
                  "contains the input " + quotedPath(input) +
                      "; refusing to replace a directory holding an input");
  }
}

void checkOverwrite(const std::string &output, bool overwrite,
                    bool outputIsDirectory) {
  struct stat st;
  if (::lstat(output.c_str(), &st) != 0)
    return;
  if (outputIsDirectory && isEmptyDirectory(output))
    return;
  struct stat target;
  if (!outputIsDirectory && ::stat(output.c_str(), &target) == 0 &&
      S_ISDIR(target.st_mode))
    throw Error(output, "", "is a directory; the output is a file");
  if (!overwrite)
    throw Error(output, "", "exists; pass --overwrite to replace it");
}

//===----------------------------------------------------------------------===//
// AtomicFile
//===----------------------------------------------------------------------===//

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  static std::atomic<unsigned> counter{0};
  // Unique per process and call; O_EXCL never reuses a name someone else
  // holds (the mode is 0666 less the umask, like any new file).
  for (int attempt = 0; fd_ < 0; ++attempt) {
    temp_ = path_ + ".tmp-" + std::to_string(::getpid()) + "-" +
            std::to_string(counter++);
    do
      fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
                   0666);
    while (fd_ < 0 && errno == EINTR);
    if (fd_ < 0 && (errno != EEXIST || attempt > 100))
      throw Error(path_, "",
                  "cannot create temporary file " + quotedPath(temp_) + ": " +
                      errnoText(errno));
  }
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0)
    ::close(fd_);
  if (!temp_.empty())
    ::unlink(temp_.c_str());
}

void AtomicFile::write(const void *data, size_t size) {
  if (fd_ < 0)
    throw Error(path_, "", "write after commit");
  const auto *p = static_cast<const char *>(data);
  while (size > 0) {
    ssize_t w = ::write(fd_, p, size);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0)
      throw Error(temp_, "", "write failed: " + errnoText(errno));
    p += w;
    size -= static_cast<size_t>(w);
  }
}

void AtomicFile::writeAt(uint64_t offset, const void *data, size_t size) {
  if (fd_ < 0)
    throw Error(path_, "", "write after commit");
  const auto *p = static_cast<const char *>(data);
  while (size > 0) {
    ssize_t w = ::pwrite(fd_, p, size, static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0)
      throw Error(temp_, "", "write failed: " + errnoText(errno));
    p += w;
    offset += static_cast<uint64_t>(w);
    size -= static_cast<size_t>(w);
  }
}

void AtomicFile::commit() {
  if (fd_ < 0)
    throw Error(path_, "", "committed twice");
  if (::fsync(fd_) != 0)
    throw Error(temp_, "", "fsync failed: " + errnoText(errno));
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0)
    throw Error(temp_, "", "close failed: " + errnoText(errno));
  if (::rename(temp_.c_str(), path_.c_str()) != 0)
    throw Error(path_, "",
                "cannot rename " + quotedPath(temp_) + " into place: " +
                    errnoText(errno));
  temp_.clear();
  syncDirectory(parentOf(path_));
}

void writeFileAtomically(const std::string &path, std::string_view bytes) {
  AtomicFile file(path);
  file.write(bytes);
  file.commit();
}

//===----------------------------------------------------------------------===//
// publishDirectory
//===----------------------------------------------------------------------===//

void publishDirectory(const std::string &staged, const std::string &dir) {
  syncFilesIn(staged);
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) {
    if (::rename(staged.c_str(), dir.c_str()) != 0)
      throw Error(dir, "",
                  "cannot rename " + quotedPath(staged) + " into place: " +
                      errnoText(errno));
    syncDirectory(parentOf(dir));
    return;
  }
#if defined(__linux__) && defined(RENAME_EXCHANGE)
  if (::renameat2(AT_FDCWD, staged.c_str(), AT_FDCWD, dir.c_str(),
                  RENAME_EXCHANGE) == 0) {
    syncDirectory(parentOf(dir));
    removeTree(staged); // now the previous contents
    return;
  }
  if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
    throw Error(dir, "",
                "cannot exchange it with " + quotedPath(staged) + ": " +
                    errnoText(errno));
#endif
  // No atomic exchange here: move the old one aside, then rename. `dir` is
  // absent between the two renames.
  const std::string old = dir + ".old-" + std::to_string(::getpid());
  removeTree(old);
  if (::rename(dir.c_str(), old.c_str()) != 0)
    throw Error(dir, "",
                "cannot move the previous contents aside: " + errnoText(errno));
  if (::rename(staged.c_str(), dir.c_str()) != 0) {
    int err = errno;
    (void)::rename(old.c_str(), dir.c_str());
    throw Error(dir, "",
                "cannot rename " + quotedPath(staged) + " into place: " +
                    errnoText(err));
  }
  syncDirectory(parentOf(dir));
  removeTree(old);
}

} // namespace comfyquant::rt
