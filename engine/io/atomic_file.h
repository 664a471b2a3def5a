// AtomicFile: writes a file so that readers see either the old contents or
// the complete new ones, never a mix, even when the process dies or the disk
// fills midway. The bytes go to a temporary file in the target's directory
// (a rename is only atomic within one file system); commit() flushes it to
// disk (fsync), renames it over the target and fsyncs the directory so the
// rename itself survives a crash. Destroying an uncommitted AtomicFile
// removes the temporary and leaves the target untouched.
//
// Every failure throws Error{IoError} naming the target path, the step and
// the system's reason. Not thread-safe: one writer per object.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace samba {

class AtomicFile {
 public:
  // Creates the temporary file; throws IoError when the directory is missing
  // or not writable.
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Appends bytes at the current end.
  void write(const void* data, size_t n);
  void write(std::string_view s) { write(s.data(), s.size()); }
  // Overwrites bytes already written (a header patched once sizes are known).
  void write_at(uint64_t offset, const void* data, size_t n);
  uint64_t size() const { return size_; }

  // Makes the new contents the target's, durably. After a failed commit the
  // target still has its old contents and the temporary is gone. Allocates
  // nothing unless the file system fails, so files made in temporaries
  // first can be committed together.
  void commit();

  const std::string& path() const { return path_; }

 private:
  void discard() noexcept;

  std::string path_;
  std::string dir_;  // made once, so that a commit allocates nothing once it renamed
  std::string temp_path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  bool committed_ = false;
};

// Writes `contents` to `path` atomically (AtomicFile in one call).
void write_file_atomically(const std::string& path, std::string_view contents);
void write_file_atomically(const std::string& path, std::span<const uint8_t> contents);

}  // namespace samba
