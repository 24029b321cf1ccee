// The default write probe: the kernel's verdict on a write from a child.
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>

#include "ortmem/cts/adapter.hpp"

namespace ortmem::cts {

WriteProbe MemoryAccess::probe_write(void* ptr, std::uint8_t value) {
  const pid_t child = ::fork();
  if (child < 0) return {WriteProbe::Outcome::kUnknown, std::string("fork failed: ") + std::strerror(errno)};
  if (child == 0) {
    // The kernel's own verdict, not a sanitizer's handler.
    std::signal(SIGSEGV, SIG_DFL);
    std::signal(SIGBUS, SIG_DFL);
    // Whatever happens the child ends here: it must never go on to run the
    // rest of the suite, so nothing may escape to its caller.
    try {
      fill(ptr, 1, value);
    } catch (...) {
      ::_exit(3);
    }
    ::_exit(0);
  }
  int status = 0;
  pid_t waited = 0;
  do {
    waited = ::waitpid(child, &status, 0);
  } while (waited < 0 && errno == EINTR);
  if (waited != child) return {WriteProbe::Outcome::kUnknown, std::string("waitpid failed: ") + std::strerror(errno)};
  if (WIFSIGNALED(status) && (WTERMSIG(status) == SIGSEGV || WTERMSIG(status) == SIGBUS)) {
    return {WriteProbe::Outcome::kRefused,
            std::string("a forked child's write was killed by ") + strsignal(WTERMSIG(status))};
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    return {WriteProbe::Outcome::kAllowed, "a forked child wrote the byte and exited normally"};
  }
  // Killed by something else, or the adapter's fill threw: not the
  // mapping's protection speaking, so no verdict on it.
  return {WriteProbe::Outcome::kUnknown,
          WIFSIGNALED(status) ? std::string("the writing child died of ") + strsignal(WTERMSIG(status))
                              : "the writing child's fill() failed (exit " + std::to_string(WEXITSTATUS(status)) + ")"};
}

}  // namespace ortmem::cts
