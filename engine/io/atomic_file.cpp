#include "engine/io/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string_view>

#include "engine/core/error.h"

namespace samba {
namespace {

std::string directory_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string base_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string errno_text(int err) { return std::strerror(err); }

// Directory entries are only durable once the directory itself is synced.
// Some file systems refuse fsync on a directory (EINVAL); that is not a
// failure of the write.
void sync_directory(const std::string& dir, const std::string& target) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    fail(Status::IoError, "cannot open directory '{}' to sync the rename of '{}': {}", dir, target,
         errno_text(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0 && err != EINVAL)
    fail(Status::IoError, "cannot sync directory '{}' after renaming '{}': {}", dir, target,
         errno_text(err));
}

// Removes the temporary files that saves to `path` by processes no longer
// running left behind (a killed save never reaches its unlink). Files of live
// processes, this one included, may be saves in flight and are kept. Reads
// the directory with readdir, not std::filesystem: libstdc++'s
// directory_iterator ends the process when an allocation inside it fails.
void remove_orphaned_temp_files(const std::string& dir, const std::string& base) {
  const std::string prefix = "." + base + ".tmp.";
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), &::closedir);
  if (!d) return;
  while (const dirent* entry = ::readdir(d.get())) {
    const std::string_view name = entry->d_name;
    if (!name.starts_with(prefix)) continue;
    const std::string_view rest = name.substr(prefix.size());
    const size_t dot = rest.find('.');
    if (dot == 0 || dot == std::string_view::npos) continue;
    pid_t pid = 0;
    const auto [end, parsed] = std::from_chars(rest.data(), rest.data() + dot, pid);
    if (parsed != std::errc() || end != rest.data() + dot || pid <= 0) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;
    // Another save may remove it first; either way it is gone.
    ::unlink((dir + "/").append(name).c_str());
  }
}

}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)), dir_(directory_of(path_)) {
  SAMBA_CHECK(!path_.empty(), Status::InvalidArgument, "cannot write a file: the path is empty");
  struct stat st;
  if (::stat(path_.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    fail(Status::IoError, "cannot write '{}': it is a directory", path_);

  remove_orphaned_temp_files(dir_, base_of(path_));
  static std::atomic<uint64_t> counter{0};
  const std::string prefix = dir_ + "/." + base_of(path_) + ".tmp." + std::to_string(::getpid());
  for (int attempt = 0; attempt < 100; ++attempt) {
    temp_path_ = prefix + "." + std::to_string(counter.fetch_add(1));
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ >= 0) return;
    if (errno != EEXIST) break;
  }
  int err = errno;
  temp_path_.clear();
  fail(Status::IoError, "cannot write '{}': creating a temporary file in '{}' failed: {}", path_,
       dir_, errno_text(err));
}

AtomicFile::~AtomicFile() {
  if (!committed_) discard();
}

void AtomicFile::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temp_path_.empty()) ::unlink(temp_path_.c_str());
  temp_path_.clear();
}

void AtomicFile::write(const void* data, size_t n) { write_at(size_, data, n); }

void AtomicFile::write_at(uint64_t offset, const void* data, size_t n) {
  SAMBA_CHECK(fd_ >= 0, Status::InvalidState,
              "cannot write '{}': the file was already committed or failed", path_);
  const char* p = static_cast<const char*>(data);
  uint64_t at = offset;
  size_t left = n;
  while (left > 0) {
    ssize_t w = ::pwrite(fd_, p, left, static_cast<off_t>(at));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int err = w < 0 ? errno : ENOSPC;
      fail(Status::IoError, "cannot write '{}': writing {} bytes at offset {} failed: {}", path_,
           left, at, errno_text(err));
    }
    p += w;
    at += static_cast<uint64_t>(w);
    left -= static_cast<size_t>(w);
  }
  if (at > size_) size_ = at;
}

void AtomicFile::commit() {
  SAMBA_CHECK(fd_ >= 0, Status::InvalidState,
              "cannot commit '{}': the file was already committed or failed", path_);
  try {
    if (::fsync(fd_) != 0)
      fail(Status::IoError, "cannot write '{}': syncing the temporary file failed: {}", path_,
           errno_text(errno));
    int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0)
      fail(Status::IoError, "cannot write '{}': closing the temporary file failed: {}", path_,
           errno_text(errno));
    if (::rename(temp_path_.c_str(), path_.c_str()) != 0)
      fail(Status::IoError, "cannot write '{}': renaming the temporary file over it failed: {}",
           path_, errno_text(errno));
  } catch (...) {
    discard();
    throw;
  }
  temp_path_.clear();
  committed_ = true;
  sync_directory(dir_, path_);
}

void write_file_atomically(const std::string& path, std::string_view contents) {
  write_file_atomically(path, {reinterpret_cast<const uint8_t*>(contents.data()), contents.size()});
}

void write_file_atomically(const std::string& path, std::span<const uint8_t> contents) {
  AtomicFile f(path);
  f.write(contents.data(), contents.size());
  f.commit();
}

}  // namespace samba
