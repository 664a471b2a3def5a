#include "engine/io/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "engine/core/error.h"

namespace samba {
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
  void release() { fd_ = -1; }

 private:
  int fd_;
};

std::string errno_text(int err) { return std::strerror(err); }

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

int open_regular_file_for_read(const std::string& path, const char* what) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (fd.get() < 0)
    fail(Status::IoError, "cannot open {} '{}': {}", what, path, errno_text(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    fail(Status::IoError, "cannot stat {} '{}': {}", what, path, errno_text(errno));
  SAMBA_CHECK(S_ISREG(st.st_mode), Status::IoError,
              "cannot read {} '{}': it is {}, expected a regular file", what, path,
              file_kind(st.st_mode));
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0)
    fail(Status::IoError, "cannot read {} '{}': {}", what, path, errno_text(errno));
  const int owned = fd.get();
  fd.release();
  return owned;
}

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  FileDescriptor fd(open_regular_file_for_read(path, "file"));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    fail(Status::IoError, "cannot stat '{}': {}", path, errno_text(errno));
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

}  // namespace samba
