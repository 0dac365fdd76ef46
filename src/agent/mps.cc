#include "agent/mps.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <thread>

extern char** environ;

namespace tessera::agent {
namespace {

constexpr const char* kPidFile = "nvidia-cuda-mps-control.pid";

bool ValidUuid(const std::string& uuid) {
  if (uuid.size() < 5 || uuid.size() > 128) return false;
  if (uuid.rfind("GPU-", 0) != 0 && uuid.rfind("MIG-", 0) != 0) return false;
  for (char c : uuid)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
      return false;
  return uuid.find("..") == std::string::npos;
}

Status MakeDirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i < path.size() && path[i] != '/') continue;
    const std::string part = path.substr(0, i);
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST)
      return IoError("mkdir " + part + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace

std::string MpsManager::PipeDir(const std::string& uuid) const {
  return options_.root + "/" + uuid + "/pipe";
}

std::string MpsManager::LogDir(const std::string& uuid) const {
  return options_.root + "/" + uuid + "/log";
}

bool MpsManager::Running(const std::string& uuid) const {
  if (!ValidUuid(uuid)) return false;
  std::ifstream in(PipeDir(uuid) + "/" + kPidFile);
  long pid = 0;
  if (!(in >> pid) || pid <= 0) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

Status MpsManager::Run(const std::string& uuid, const std::vector<std::string>& args,
                       const std::string& input) const {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  env["CUDA_VISIBLE_DEVICES"] = uuid;
  env["CUDA_MPS_PIPE_DIRECTORY"] = PipeDir(uuid);
  env["CUDA_MPS_LOG_DIRECTORY"] = LogDir(uuid);
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> full = {options_.control};
  full.insert(full.end(), args.begin(), args.end());
  for (std::string& s : full) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::string command = options_.control;
  for (const std::string& a : args) command += " " + a;

  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return Unavailable(command + ": socketpair: " + std::strerror(errno));
  const int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(sv[0]);
    ::close(sv[1]);
    if (devnull >= 0) ::close(devnull);
    return Unavailable(command + ": fork: " + std::strerror(errno));
  }
  if (pid == 0) {
    ::dup2(sv[1], 0);
    if (devnull >= 0) {
      ::dup2(devnull, 1);
      ::dup2(devnull, 2);
    }
    const bool has_slash = options_.control.find('/') != std::string::npos;
    if (has_slash)
      ::execve(argv[0], argv.data(), envp.data());
    else
      ::execvpe(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(sv[1]);
  if (devnull >= 0) ::close(devnull);
  size_t sent = 0;
  while (sent < input.size()) {
    const ssize_t n = ::send(sv[0], input.data() + sent, input.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  ::shutdown(sv[0], SHUT_WR);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(options_.timeout_s * 1000));
  int wstatus = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid, &wstatus, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) {
      ::close(sv[0]);
      return Unavailable(command + ": waitpid: " + std::strerror(errno));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &wstatus, 0);
      ::close(sv[0]);
      return Unavailable(command + " (CUDA_VISIBLE_DEVICES=" + uuid + ") did not end within " +
                         std::to_string(options_.timeout_s) + " s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ::close(sv[0]);
  if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) return Status::Ok();
  const std::string how = WIFEXITED(wstatus)
                              ? "exit status " + std::to_string(WEXITSTATUS(wstatus)) +
                                    (WEXITSTATUS(wstatus) == 127 ? " (not found?)" : "")
                              : "signal " + std::to_string(WTERMSIG(wstatus));
  return Unavailable(command + " (CUDA_VISIBLE_DEVICES=" + uuid + ") failed: " + how);
}

Status MpsManager::Start(const MpsDevice& device) {
  if (!ValidUuid(device.uuid))
    return InvalidArgument("MPS: '" + device.uuid + "' is not a GPU or MIG device UUID");
  if (device.active_thread_percentage < 0 || device.active_thread_percentage > 100)
    return InvalidArgument("MPS " + device.uuid + ": active thread percentage " +
                           std::to_string(device.active_thread_percentage) + " is outside 1..100");
  if (device.pinned_mem_limit_mib < 0)
    return InvalidArgument("MPS " + device.uuid + ": negative pinned memory limit");
  if (Running(device.uuid)) return Status::Ok();
  TESSERA_RETURN_IF_ERROR(MakeDirs(PipeDir(device.uuid)));
  TESSERA_RETURN_IF_ERROR(MakeDirs(LogDir(device.uuid)));
  TESSERA_RETURN_IF_ERROR(Run(device.uuid, {"-d"}, ""));
  std::string commands;
  if (device.active_thread_percentage > 0)
    commands += "set_default_active_thread_percentage " +
                std::to_string(device.active_thread_percentage) + "\n";
  if (device.pinned_mem_limit_mib > 0)
    commands += "set_default_device_pinned_mem_limit 0 " +
                std::to_string(device.pinned_mem_limit_mib) + "M\n";
  if (commands.empty()) return Status::Ok();
  return Run(device.uuid, {}, commands);
}

Status MpsManager::Stop(const std::string& uuid) {
  if (!ValidUuid(uuid))
    return InvalidArgument("MPS: '" + uuid + "' is not a GPU or MIG device UUID");
  if (!Running(uuid)) return Status::Ok();
  return Run(uuid, {}, "quit\n");
}

Status MpsManager::Reconcile(const std::vector<MpsDevice>& devices) {
  Status first;
  auto keep = [&](Status st) {
    if (first.ok() && !st.ok()) first = std::move(st);
  };
  std::set<std::string> wanted;
  for (const MpsDevice& d : devices) {
    if (d.clients <= 0) continue;
    wanted.insert(d.uuid);
    keep(Start(d));
  }
  std::set<std::string> present;
  if (DIR* dir = ::opendir(options_.root.c_str())) {
    while (dirent* e = ::readdir(dir))
      if (ValidUuid(e->d_name)) present.insert(e->d_name);
    ::closedir(dir);
  }
  for (const MpsDevice& d : devices)
    if (d.clients <= 0 && ValidUuid(d.uuid)) present.insert(d.uuid);
  for (const std::string& uuid : present)
    if (!wanted.count(uuid)) keep(Stop(uuid));
  return first;
}

}  // namespace tessera::agent
