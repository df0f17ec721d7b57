// The warm sandbox: see warm_sandbox.h, and engine/eval/warm_server.py for the other side.
#include "eval/warm_sandbox.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "eval/child_process.h"
#include "eval/run_slots.h"
#include "eval/sandbox_confinement.h"

// engine/eval/warm_server.py, compiled in by CMake (eval/python_source.cpp.in).
extern const char specula_warm_server_py[];
extern const std::size_t specula_warm_server_py_size;

namespace specula {

using namespace sandbox_internal;

const char* sandbox_mode_name(SandboxMode mode) { return mode == SandboxMode::Warm ? "warm" : "cold"; }

SandboxMode parse_sandbox_mode(const std::string& text) {
  if (text == "warm") return SandboxMode::Warm;
  if (text == "cold") return SandboxMode::Cold;
  throw std::invalid_argument("unknown sandbox mode '" + text + "' (warm or cold)");
}

namespace {

using Clock = std::chrono::steady_clock;

constexpr double kStartSeconds = 30.0;  // a warm process says it is ready within this
constexpr double kGraceSeconds = 2.0;   // past a run's wall clock, we stop waiting for its answer
constexpr int kServerCpuSeconds = 1 << 30;  // the warm process's own CPU time is not a run's

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A field of a request: 4 bytes of little-endian length, then the bytes.
void put_field(std::string& body, const std::string& field) {
  const auto n = static_cast<std::uint32_t>(field.size());
  for (int i = 0; i < 4; ++i) body += static_cast<char>((n >> (8 * i)) & 0xff);
  body += field;
}

std::string request_body(const std::vector<SandboxFile>& files, const std::string& main_file,
                         const std::vector<std::string>& args, const SandboxLimits& limits) {
  const nlohmann::json l = {{"wall_seconds", limits.wall_seconds},     {"cpu_seconds", limits.cpu_seconds},
                            {"memory_bytes", limits.memory_bytes},     {"max_processes", limits.max_processes},
                            {"max_file_bytes", limits.max_file_bytes}, {"max_open_files", limits.max_open_files}};
  std::string body;
  put_field(body, l.dump());
  put_field(body, main_file);
  put_field(body, std::to_string(args.size()));
  for (const std::string& arg : args) put_field(body, arg);
  put_field(body, std::to_string(files.size()));
  for (const SandboxFile& f : files) {
    put_field(body, f.name);
    put_field(body, f.content);
  }
  return body;
}

bool send_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

// The request: "R" and its length with the run's three stream descriptors, then the body
// (see warm_server.py). False when the warm process is gone.
bool send_request(int control, const std::string& body, const int (&fds)[3]) {
  char head[9] = {'R'};
  const std::uint64_t size = body.size();
  for (int i = 0; i < 8; ++i) head[1 + i] = static_cast<char>((size >> (8 * i)) & 0xff);
  iovec io{head, sizeof head};
  alignas(cmsghdr) char control_buffer[CMSG_SPACE(sizeof fds)] = {};
  msghdr message{};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  message.msg_control = control_buffer;
  message.msg_controllen = sizeof control_buffer;
  cmsghdr* rights = CMSG_FIRSTHDR(&message);
  rights->cmsg_level = SOL_SOCKET;
  rights->cmsg_type = SCM_RIGHTS;
  rights->cmsg_len = CMSG_LEN(sizeof fds);
  std::memcpy(CMSG_DATA(rights), fds, sizeof fds);
  ssize_t sent;
  while ((sent = sendmsg(control, &message, MSG_NOSIGNAL)) < 0 && errno == EINTR) {}
  if (sent <= 0) return false;
  if (sent < static_cast<ssize_t>(sizeof head) && !send_all(control, head + sent, sizeof head - sent)) return false;
  return send_all(control, body.data(), body.size());
}

// Reads what is ready on `fd` into `text`; false at end of file or on an error.
bool read_some(int fd, std::string& text) {
  char buffer[4096];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof buffer)) < 0 && errno == EINTR) {}
  if (n <= 0) return false;
  text.append(buffer, static_cast<std::size_t>(n));
  return true;
}

}  // namespace

WarmSandbox::WarmSandbox(const Sandbox& sandbox, SandboxFile preload)
    : sandbox_(sandbox), preload_(std::move(preload)) {}

WarmSandbox::~WarmSandbox() { stop(); }

void WarmSandbox::start(const SandboxLimits& limits) {
  slot_ = std::make_unique<RunSlot>();
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
    throw SandboxError(std::string("cannot create the warm sandbox's socket: ") + std::strerror(errno));
  control_ = pair[0];
  struct Close {
    std::vector<int> fds;  // handed to the child: closed here once it holds them
    ~Close() { for (int fd : fds) close(fd); }
  } theirs{{pair[1]}}, bwrap_files;
  ChildPlan plan;
  plan.limits = limits;
  plan.limits.cpu_seconds = kServerCpuSeconds;
  const std::vector<SandboxFile> files = {
      {"warm_server.py", std::string(specula_warm_server_py, specula_warm_server_py_size)},
      {"preload.py", preload_.content},
      {"child_filter.bpf", warm_child_filter()}};
  sandbox_.plan_warm(plan, files, "warm_server.py", slot_->index, bwrap_files.fds);
  uid_ = plan.uid;
  plan.argv.push_back(std::to_string(kFirstFileFd + static_cast<int>(plan.files.size())));
  plan.files.push_back(pair[1]);
  Pipe out, err, chan;
  pid_ = start_child(plan, out, err, chan);
  RunStreams streams(out, err, chan, 1u << 16);

  // Wait for "ready", keeping what it writes to stderr for the message if it never comes.
  const auto begin = Clock::now();
  std::string answer;
  Spawned said;
  bool open = true;
  while (open && answer.find('\n') == std::string::npos && seconds_since(begin) < kStartSeconds) {
    pollfd polls[4];
    streams.fill(polls);
    polls[3] = {control_, POLLIN, 0};
    poll(polls, 4, 100);
    streams.read(polls, said);
    if (polls[3].revents & (POLLIN | POLLHUP | POLLERR)) open = read_some(control_, answer);
  }
  if (answer != "ready\n") {
    std::string why = said.err.empty() ? said.out : said.err;
    if (why.empty()) why = open ? "no answer within 30 s" : "it exited";
    stop();
    throw SandboxError("the warm sandbox did not start: " + why.substr(0, 300));
  }
  file_bytes_ = limits.max_file_bytes;
  ++starts_;
}

void WarmSandbox::stop() {
  if (pid_ > 0) {
    kill(-pid_, SIGKILL);  // bubblewrap; its child, the warm process, has it as death signal
    kill(pid_, SIGKILL);
    if (uid_ != 0) kill_uid(uid_);
    while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {}
  }
  if (uid_ != 0) kill_uid(uid_);
  pid_ = -1;
  uid_ = 0;
  if (control_ >= 0) close(control_);
  control_ = -1;
  tainted_ = false;
  slot_.reset();
}

bool WarmSandbox::alive() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) != 0) {
    pid_ = -1;  // reaped: nothing of it to kill by pid
    return false;
  }
  // Between runs it writes nothing: anything to read is its end (of file).
  pollfd control{control_, POLLIN, 0};
  return poll(&control, 1, 0) == 0;
}

WarmSandbox::Outcome WarmSandbox::attempt(const std::vector<SandboxFile>& files, const std::string& main_file,
                                          const std::vector<std::string>& args, const SandboxLimits& limits,
                                          SandboxRun& run) {
  const std::string body = request_body(files, main_file, args, limits);
  Pipe out, err, chan;
  RunStreams streams(out, err, chan, limits.max_output_bytes);
  const auto begin = Clock::now();
  const bool sent = send_request(control_, body, {out.write, err.write, chan.write});
  out.close_write();
  err.close_write();
  chan.close_write();
  if (!sent) return Outcome::NotSent;

  Spawned result;
  std::string answer;
  Clock::time_point drain_until{};
  bool answered = false;
  while (!answered || (streams.open() > 0 && Clock::now() < drain_until)) {
    if (!answered && seconds_since(begin) > limits.wall_seconds + kGraceSeconds) {
      // The warm process did not end the run in time: end it, and the run has timed out.
      stop();
      result.timed_out = true;
      answered = true;
      drain_until = Clock::now();
      break;
    }
    pollfd polls[4];
    streams.fill(polls);
    polls[3] = {answered ? -1 : control_, POLLIN, 0};
    poll(polls, 4, 20);
    if (streams.read(polls, result) && !answered) send_all(control_, "k", 1);  // over the cap: kill the run
    if (!answered && (polls[3].revents & (POLLIN | POLLHUP | POLLERR))) {
      if (!read_some(control_, answer)) return Outcome::Lost;
      if (answer.find('\n') != std::string::npos) {
        answered = true;
        drain_until = Clock::now() + std::chrono::milliseconds(200);
      }
    }
  }
  result.seconds = seconds_since(begin);
  if (!result.timed_out) {
    nlohmann::json reply;
    try {
      reply = nlohmann::json::parse(answer);
    } catch (const nlohmann::json::exception&) {
      return Outcome::Lost;
    }
    if (!reply.contains("exit")) return Outcome::Lost;  // it could not set the run up
    result.timed_out = reply.value("timed_out", false);
    tainted_ = reply.value("tainted", false);
    decode_status(W_EXITCODE(reply["exit"].get<int>() & 0xff, 0), result);
  } else {
    decode_status(W_EXITCODE(128 + SIGKILL, 0), result);
  }
  run = sandbox_run(result, Isolation::Full);
  return Outcome::Done;
}

void WarmSandbox::prepare(const SandboxLimits& limits) {
  if (!warm() || pid_ > 0) return;
  try {
    start(limits);
  } catch (const SandboxError& e) {
    broken_ = e.what();
  }
}

SandboxRun WarmSandbox::run(const std::vector<SandboxFile>& files, const std::string& main_file,
                            const std::vector<std::string>& args, const SandboxLimits& limits) {
  if (!warm()) return sandbox_.run(files, main_file, args, limits);
  check_files(files);
  if (pid_ > 0 && (tainted_ || file_bytes_ != limits.max_file_bytes || !alive())) stop();
  for (int tries = 0; tries < 2; ++tries) {
    if (pid_ <= 0) {
      try {
        start(limits);
      } catch (const SandboxError& e) {
        broken_ = e.what();
        break;
      }
    }
    SandboxRun run;
    const Outcome outcome = attempt(files, main_file, args, limits, run);
    if (outcome == Outcome::Done) {
      if (tainted_) stop();
      return run;
    }
    stop();
    // Not sent: the warm process was gone before the run began, a new one takes it. Lost:
    // the run may have begun, so the cold path decides it.
    if (outcome == Outcome::Lost) break;
  }
  ++fallbacks_;
  return sandbox_.run(files, main_file, args, limits);
}

}  // namespace specula
