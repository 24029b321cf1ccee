// What the kernel says this process holds: the books a host allocator cannot
// keep for itself, so a release that claims to give memory back can be
// checked against them.
#pragma once

#include <dirent.h>
#include <unistd.h>

#include <cstddef>
#include <fstream>

namespace ortmem::cts {

// The process's mapped address space, in bytes (the first field of statm).
inline std::size_t mapped_bytes_now() {
  std::size_t pages = 0;
  std::ifstream statm("/proc/self/statm");
  statm >> pages;
  return pages * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

// The process's resident memory, in bytes (the second field of statm):
// physical pages it holds, shared ones (a memfd's) included. A reservation
// without pages behind it is in mapped_bytes_now() but not here, so this is
// the observer of physical memory given back while the addresses stay.
inline std::size_t resident_bytes_now() {
  std::size_t pages = 0;
  std::size_t resident = 0;
  std::ifstream statm("/proc/self/statm");
  statm >> pages >> resident;
  return resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

// The process's open file descriptors (the entries of /proc/self/fd, less
// the one listing them).
inline std::size_t open_descriptors_now() {
  DIR* listing = ::opendir("/proc/self/fd");
  if (listing == nullptr) return 0;
  std::size_t count = 0;
  while (const dirent* entry = ::readdir(listing)) count += entry->d_name[0] == '.' ? 0 : 1;
  ::closedir(listing);
  return count - 1;
}

}  // namespace ortmem::cts
