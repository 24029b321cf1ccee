#include "isolated_run.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <optional>

#include "child_protocol.hpp"
#include "support/sanitizers.hpp"

extern char** environ;

namespace ortmem::cts {
namespace {

using Clock = std::chrono::steady_clock;

// Time a child may take to start before its first test, and to exit after its last.
constexpr std::chrono::seconds kStartupGrace{5};
// How much of a dead child's stderr goes into the failure message.
constexpr std::size_t kStderrTail = 2000;

// Written by the signal handler, read by the scheduler's poll.
int g_signal_pipe[2] = {-1, -1};

void on_stop_signal(int signal_number) {
  const int saved_errno = errno;  // the interrupted code may be about to read it
  const unsigned char byte = static_cast<unsigned char>(signal_number);
  [[maybe_unused]] const ssize_t ignored = ::write(g_signal_pipe[1], &byte, 1);
  errno = saved_errno;
}

// Installs the stop handlers for the scheduler's lifetime and restores the
// previous ones after, so an interrupt stops the children instead of
// orphaning them. SIGCHLD is set to its default too: a runner started with
// it ignored (ignored signals survive exec) would never see its children
// exit, and waitpid would never return them.
class StopSignals {
 public:
  StopSignals() {
    struct sigaction child_default {};
    child_default.sa_handler = SIG_DFL;
    sigemptyset(&child_default.sa_mask);
    ::sigaction(SIGCHLD, &child_default, &previous_child_);
    // Without the pipe a handler could only swallow the signal: keep the defaults then.
    if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
      g_signal_pipe[0] = g_signal_pipe[1] = -1;
      return;
    }
    installed_ = true;
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    for (std::size_t i = 0; i < std::size(kSignals); ++i) ::sigaction(kSignals[i], &action, &previous_[i]);
  }
  ~StopSignals() {
    ::sigaction(SIGCHLD, &previous_child_, nullptr);
    if (!installed_) return;
    for (std::size_t i = 0; i < std::size(kSignals); ++i) ::sigaction(kSignals[i], &previous_[i], nullptr);
    ::close(g_signal_pipe[0]);
    ::close(g_signal_pipe[1]);
    g_signal_pipe[0] = g_signal_pipe[1] = -1;
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  [[nodiscard]] int fd() const { return g_signal_pipe[0]; }
  // The first stop signal received, or 0.
  [[nodiscard]] int received() {
    unsigned char byte = 0;
    if (received_ == 0 && installed_ && ::read(g_signal_pipe[0], &byte, 1) == 1) received_ = byte;
    return received_;
  }

 private:
  static constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction previous_[std::size(kSignals)]{};
  struct sigaction previous_child_ {};
  bool installed_ = false;
  int received_ = 0;
};

struct Group {
  std::string name;
  std::deque<std::string> tests;
};

struct Child {
  pid_t pid = -1;
  int events = -1;  // read ends of the child's event pipe and stderr
  int errors = -1;
  Group group;  // the tests not yet started
  std::optional<std::string> running;
  Clock::time_point running_since;
  Clock::time_point deadline;
  bool killed_for_time = false;
  bool started_any = false;  // it sent at least one start event
  std::string event_buffer;
  std::string stderr_tail;
};

// A pipe whose ends sit above the standard and event fds, so the spawn's
// dup2 onto 2 and 3 never finds one of them already there.
bool high_pipe(int ends[2]) {
  int raw[2];
  if (::pipe2(raw, O_CLOEXEC) != 0) return false;
  for (int i = 0; i < 2; ++i) {
    ends[i] = ::fcntl(raw[i], F_DUPFD_CLOEXEC, 10);
    ::close(raw[i]);
  }
  return ends[0] >= 0 && ends[1] >= 0;
}

std::string join(const std::deque<std::string>& parts, char separator) {
  std::string joined;
  for (const auto& part : parts) joined += (joined.empty() ? "" : std::string(1, separator)) + part;
  return joined;
}

class Scheduler {
 public:
  Scheduler(const IsolatedPlan& plan, ResultSink& sink, const std::function<void(const std::string&)>& group_done)
      : plan_(plan), sink_(sink), group_done_(group_done),
        timeout_(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(plan.timeout_s))) {
    for (const auto& tests : plan.groups) {
      if (tests.empty()) continue;
      queue_.push_back({std::string(report::suite_of(tests.front())), {tests.begin(), tests.end()}});
    }
  }

  IsolatedOutcome run() {
    StopSignals signals;
    while ((!queue_.empty() || !children_.empty()) && signals.received() == 0) {
      while (static_cast<int>(children_.size()) < std::max(plan_.jobs, 1) && !queue_.empty()) {
        spawn(std::move(queue_.front()));
        queue_.pop_front();
      }
      wait_for_events(signals.fd());
      const auto now = Clock::now();
      for (Child& child : children_) {
        drain(child);
        if (now >= child.deadline && !child.killed_for_time) {
          child.killed_for_time = true;
          child.deadline = Clock::time_point::max();  // no deadline left to wake for
          ::kill(-child.pid, SIGKILL);
        }
      }
      reap(/*block=*/false);
      sink_.heartbeat();
    }
    IsolatedOutcome outcome;
    outcome.interrupted_by = signals.received();
    if (outcome.interrupted_by != 0) {
      // The running tests end unjudged: an interrupted run is incomplete, not
      // failed. Events still in the pipes are read but charge nothing.
      stopping_ = true;
      for (Child& child : children_) ::kill(-child.pid, SIGKILL);
      reap(/*block=*/true);
    }
    for (const auto& tests : plan_.groups) {
      for (const auto& id : tests) {
        if (auto found = results_.find(id); found != results_.end())
          outcome.results.push_back(std::move(found->second));
      }
    }
    return outcome;
  }

 private:
  void spawn(Group group) {
    Child child;
    child.group = std::move(group);
    int events[2] = {-1, -1};
    int errors[2] = {-1, -1};
    if (!high_pipe(events) || !high_pipe(errors)) {
      for (int fd : {events[0], events[1], errors[0], errors[1]}) ::close(fd);
      fail_all(child, report::TestStatus::kError, std::string("cannot create a pipe: ") + std::strerror(errno));
      return;
    }
    // argv[0] is the name the user ran, so a child's reproduce commands name it too.
    std::vector<std::string> arguments = {plan_.reproduce.program};
    arguments.insert(arguments.end(), plan_.child_arguments.begin(), plan_.child_arguments.end());
    arguments.push_back("--tests");
    arguments.push_back(join(child.group.tests, ':'));
    std::vector<char*> argv;
    for (auto& argument : arguments) argv.push_back(argument.data());
    argv.push_back(nullptr);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, errors[1], STDERR_FILENO);
    posix_spawn_file_actions_adddup2(&actions, events[1], kChildEventFd);
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    sigset_t none;
    sigset_t stops;
    sigemptyset(&none);
    sigemptyset(&stops);
    for (int signal_number : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) sigaddset(&stops, signal_number);
    posix_spawnattr_setsigmask(&attributes, &none);
    posix_spawnattr_setsigdefault(&attributes, &stops);
    // Its own process group: one kill reaches everything the test started.
    posix_spawnattr_setpgroup(&attributes, 0);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    const int spawned = posix_spawn(&child.pid, "/proc/self/exe", &actions, &attributes, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    ::close(events[1]);
    ::close(errors[1]);
    if (spawned != 0) {
      ::close(events[0]);
      ::close(errors[0]);
      fail_all(child, report::TestStatus::kError,
               std::string("cannot start the test process: ") + std::strerror(spawned));
      return;
    }
    child.events = events[0];
    child.errors = errors[0];
    for (int fd : {child.events, child.errors}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    child.deadline = Clock::now() + timeout_ + kStartupGrace;
    children_.push_back(std::move(child));
  }

  void wait_for_events(int signal_fd) {
    std::vector<pollfd> fds = {{signal_fd, POLLIN, 0}};
    auto wake = Clock::now() + std::chrono::milliseconds(50);  // also the pace of reaping
    for (const Child& child : children_) {
      for (int fd : {child.events, child.errors}) {
        if (fd >= 0) fds.push_back({fd, POLLIN, 0});
      }
      wake = std::min(wake, child.deadline);
    }
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(wake - Clock::now()).count();
    ::poll(fds.data(), fds.size(), static_cast<int>(std::max<long>(wait, 0)));
  }

  // Reads whatever the child has written. Closed ends are kept open until the
  // child is reaped: a test's own children may still hold them.
  void drain(Child& child) {
    char buffer[8192];
    for (;;) {
      const ssize_t got = ::read(child.events, buffer, sizeof buffer);
      if (got <= 0) break;
      child.event_buffer.append(buffer, static_cast<std::size_t>(got));
    }
    for (std::size_t newline; (newline = child.event_buffer.find('\n')) != std::string::npos;) {
      const std::string line = child.event_buffer.substr(0, newline);
      child.event_buffer.erase(0, newline + 1);
      handle_event(child, line);
    }
    for (;;) {
      const ssize_t got = ::read(child.errors, buffer, sizeof buffer);
      if (got <= 0) break;
      child.stderr_tail.append(buffer, static_cast<std::size_t>(got));
      if (child.stderr_tail.size() > 2 * kStderrTail)
        child.stderr_tail.erase(0, child.stderr_tail.size() - kStderrTail);
    }
  }

  void handle_event(Child& child, const std::string& line) {
    auto event = parse_child_event(line);
    if (!event) {
      child.stderr_tail += "\n[ortmem-cts: unreadable event from the test process: " + event.error() + "]\n";
      return;
    }
    const auto now = Clock::now();
    if (const auto* started = std::get_if<TestStarted>(&*event)) {
      auto& tests = child.group.tests;
      tests.erase(std::remove(tests.begin(), tests.end(), started->id), tests.end());
      child.running = started->id;
      child.started_any = true;
      child.running_since = now;
      child.deadline = now + timeout_;
      sink_.test_started(started->id);
      return;
    }
    auto& result = std::get<report::TestResult>(*event);
    if (child.running == result.id) child.running.reset();
    child.deadline = now + timeout_ + kStartupGrace;
    record(child, std::move(result));
  }

  void record(const Child& child, report::TestResult result) {
    sink_.test_finished(result);
    results_[result.id] = std::move(result);
    if (!child.running && child.group.tests.empty() && group_done_) group_done_(child.group.name);
  }

  report::TestResult single(const std::string& id, report::TestStatus status, std::string message, double duration) {
    report::TestResult result;
    result.id = id;
    // The child never reported, so the test's ids come from its source.
    result.requirements = static_requirements(id);
    result.status = status;
    result.duration_s = duration;
    result.failures.push_back({"", 0, std::move(message), {}});
    result.reproduce = plan_.reproduce.for_test(id);
    return result;
  }

  void fail_all(Child& child, report::TestStatus status, const std::string& message) {
    while (!child.group.tests.empty()) {
      const std::string id = child.group.tests.front();
      child.group.tests.pop_front();
      record(child, single(id, status, message, 0));
    }
  }

  std::string last_output(const Child& child) const {
    std::string text = child.stderr_tail;
    if (text.size() > kStderrTail) text = "..." + text.substr(text.size() - kStderrTail);
    return text.empty() ? std::string() : "; its last output:\n" + text;
  }

  // Settles every child that has exited (all of them when `block`).
  void reap(bool block) {
    for (auto it = children_.begin(); it != children_.end();) {
      int status = 0;
      pid_t reaped = 0;
      do {
        reaped = ::waitpid(it->pid, &status, block ? 0 : WNOHANG);
      } while (reaped < 0 && errno == EINTR);
      if (reaped == 0 || (reaped < 0 && errno != ECHILD)) {
        ++it;
        continue;
      }
      // ECHILD: someone else reaped it; all that is known is that it is gone.
      if (reaped < 0) status = 0;
      ::kill(-it->pid, SIGKILL);  // whatever the test left running in its group
      drain(*it);
      settle(*it, status);
      ::close(it->events);
      ::close(it->errors);
      if (!it->group.tests.empty()) queue_.push_front(std::move(it->group));
      it = children_.erase(it);
    }
  }

  // Charges a child's end to the test it was in, if any.
  void settle(Child& child, int status) {
    using report::TestStatus;
    if (stopping_) {
      child.running.reset();
      child.group.tests.clear();
      return;
    }
    const double limit = plan_.timeout_s;
    std::string why;
    TestStatus verdict = TestStatus::kError;
    if (child.killed_for_time) {
      verdict = TestStatus::kTimeout;
      why = "the test did not finish within " + std::to_string(limit) + " s and was killed";
    } else if (WIFSIGNALED(status)) {
      verdict = TestStatus::kCrash;
      why = std::string("the test process died of signal ") + std::to_string(WTERMSIG(status)) + " (" +
            strsignal(WTERMSIG(status)) + ")";
    } else {
      why = "the test process exited with status " + std::to_string(WEXITSTATUS(status));
    }
    if (child.running) {
      const std::string id = *child.running;
      child.running.reset();
      const double duration = std::chrono::duration<double>(Clock::now() - child.running_since).count();
      record(child, single(id, verdict, why + " during the test" + last_output(child), duration));
      return;
    }
    if (child.group.tests.empty()) return;  // it ended after its last test
    if (child.killed_for_time && child.started_any) {
      // Killed as a test ended: the kill raced that test's result, which
      // was recorded; the next test never started and goes to a new child.
      return;
    }
    if (verdict == TestStatus::kError) {
      // It could not even start a test: the next child would fare no better.
      fail_all(child, verdict, why + " before running its tests" + last_output(child));
      return;
    }
    const std::string id = child.group.tests.front();
    child.group.tests.pop_front();
    record(child, single(id, verdict, why + " before the test started" + last_output(child), 0));
  }

  const IsolatedPlan& plan_;
  ResultSink& sink_;
  const std::function<void(const std::string&)>& group_done_;
  const Clock::duration timeout_;
  std::deque<Group> queue_;
  std::vector<Child> children_;
  std::map<std::string, report::TestResult> results_;
  bool stopping_ = false;  // interrupted: exits charge nothing
};

}  // namespace

IsolatedOutcome run_isolated(const IsolatedPlan& plan, ResultSink& sink,
                             const std::function<void(const std::string& group)>& group_done) {
  return Scheduler(plan, sink, group_done).run();
}

void prepare_child(long parent_pid, long memory_limit_mib) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  // The parent may have died before the line above: then no signal will come.
  if (::getppid() != static_cast<pid_t>(parent_pid)) std::_Exit(2);
  const rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0) {
    files.rlim_cur = std::min<rlim_t>(files.rlim_max, 4096);
    ::setrlimit(RLIMIT_NOFILE, &files);
  }
#if !defined(ORTMEM_CTS_UNDER_ASAN) && !defined(ORTMEM_CTS_UNDER_TSAN)
  if (memory_limit_mib > 0) {
    const rlim_t bytes = static_cast<rlim_t>(memory_limit_mib) << 20;
    const rlimit memory{bytes, bytes};
    ::setrlimit(RLIMIT_AS, &memory);
  }
#else
  (void)memory_limit_mib;
#endif
}

long default_memory_limit_mib() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<long>((static_cast<long double>(pages) * page) / 2 / (1 << 20)) : 0;
}

}  // namespace ortmem::cts
