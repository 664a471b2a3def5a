#include "engine/pef/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#include "engine/core/error.h"

namespace samba::pef {
namespace {

// Closes a descriptor on every path out of a function.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }
  // Closes now so that a failing close (a late write error) is reported.
  int close() {
    int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

std::string errno_text(int err) { return std::strerror(err); }

std::string directory_of(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) fail(Status::IoError, "cannot open '{}': {}", path, errno_text(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    fail(Status::IoError, "cannot stat '{}': {}", path, errno_text(errno));
  SAMBA_CHECK(S_ISREG(st.st_mode), Status::IoError, "cannot read '{}': not a regular file", path);
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::read(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(Status::IoError, "cannot read '{}': {}", path, errno_text(errno));
    if (n == 0) break;  // the file shrank while being read
    done += static_cast<size_t>(n);
  }
  bytes.resize(done);
  return bytes;
}

void write_file_atomically(const std::string& path, std::span<const uint8_t> bytes) {
  SAMBA_CHECK(!path.empty(), Status::InvalidArgument, "cannot write a file: the path is empty");
  // A unique name beside the target, so the rename stays in one file system.
  std::random_device rd;
  std::string tmp = fmt::format("{}.tmp.{}.{:08x}", path, ::getpid(), rd());
  FileDescriptor fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (fd.get() < 0) fail(Status::IoError, "cannot create '{}': {}", tmp, errno_text(errno));
  auto abandon = [&](const char* what, int err) {
    ::unlink(tmp.c_str());
    fail(Status::IoError, "cannot write '{}': {} failed: {}", path, what, errno_text(err));
  };
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) abandon("write", errno);
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd.get()) != 0) abandon("fsync", errno);
  if (fd.close() != 0) abandon("close", errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0) abandon("rename", errno);
  // Makes the rename itself durable; a failure here leaves a complete file.
  FileDescriptor dir(::open(directory_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() >= 0) ::fsync(dir.get());
}

}  // namespace samba::pef
