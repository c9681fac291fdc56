#include "server/service_manager.h"

#include <grp.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace petrel::server {

ServiceNotifier ServiceNotifier::FromEnvironment() {
  ServiceNotifier n;
  if (const char* p = std::getenv("NOTIFY_SOCKET"); p != nullptr && *p != '\0') {
    n.socket_path_ = p;
  }
  unsetenv("NOTIFY_SOCKET");
  return n;
}

absl::Status ServiceNotifier::Notify(absl::string_view state) const {
  if (!enabled()) return absl::OkStatus();
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path_.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("NOTIFY_SOCKET too long: ", socket_path_));
  }
  std::memcpy(addr.sun_path, socket_path_.data(), socket_path_.size());
  if (addr.sun_path[0] == '@') addr.sun_path[0] = '\0';  // the abstract namespace
  const socklen_t len =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + socket_path_.size());
  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::ErrnoToStatus(errno, "socket(AF_UNIX)");
  const ssize_t n = sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
                           reinterpret_cast<const sockaddr*>(&addr), len);
  const int saved = errno;
  close(fd);
  if (n < 0) return absl::ErrnoToStatus(saved, absl::StrCat("NOTIFY_SOCKET ", socket_path_));
  return absl::OkStatus();
}

absl::StatusOr<UserIds> LookUpUser(const std::string& name) {
  std::vector<char> buf(16384);
  passwd entry{};
  passwd* found = nullptr;
  int rc = getpwnam_r(name.c_str(), &entry, buf.data(), buf.size(), &found);
  uid_t number = 0;
  if (found == nullptr && rc == 0 && absl::SimpleAtoi(name, &number)) {
    rc = getpwuid_r(number, &entry, buf.data(), buf.size(), &found);
  }
  if (rc != 0) return absl::ErrnoToStatus(rc, absl::StrCat("looking up user '", name, "'"));
  if (found == nullptr) return absl::NotFoundError(absl::StrCat("no such user '", name, "'"));
  return UserIds{found->pw_name, found->pw_uid, found->pw_gid};
}

absl::Status RunAs(const UserIds& user) {
  if (geteuid() == user.uid && getegid() == user.gid) return absl::OkStatus();
  if (geteuid() != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("only root can switch to user '", user.name, "'"));
  }
  // glibc applies each of these to every thread of the process.
  if (initgroups(user.name.c_str(), user.gid) != 0) {
    return absl::ErrnoToStatus(errno, "initgroups");
  }
  if (setgid(user.gid) != 0) return absl::ErrnoToStatus(errno, "setgid");
  if (setuid(user.uid) != 0) return absl::ErrnoToStatus(errno, "setuid");
  // No way back: a process that could regain root would make the switch pointless.
  if (setuid(0) == 0) return absl::InternalError("still able to become root after setuid");
  return absl::OkStatus();
}

}  // namespace petrel::server
