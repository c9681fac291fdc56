// Internal (petrel-server): what it tells a service manager, and the user it runs as once its
// listeners are bound.
//
// Notify speaks sd_notify's protocol without libsystemd: one datagram of "KEY=value" lines to
// the UNIX socket $NOTIFY_SOCKET names (a path, or '@' for the abstract namespace). systemd's
// Type=notify waits for READY=1; STOPPING=1 says a stop has begun.
#ifndef PETREL_SERVER_SERVICE_MANAGER_H_
#define PETREL_SERVER_SERVICE_MANAGER_H_

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace petrel::server {

class ServiceNotifier {
 public:
  // Takes $NOTIFY_SOCKET and unsets it, so that nothing the server starts inherits it.
  static ServiceNotifier FromEnvironment();

  bool enabled() const { return !socket_path_.empty(); }
  // Sends `state` ("READY=1\nSTATUS=..."); OK and nothing sent when not enabled.
  absl::Status Notify(absl::string_view state) const;

 private:
  std::string socket_path_;
};

struct UserIds {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
};

// The passwd entry of `name` (a name, or a number).
absl::StatusOr<UserIds> LookUpUser(const std::string& name);

// Runs the whole process — every thread — as `user` from now on: its supplementary groups, gid
// and uid, in that order, with no way back. Needs root unless the process already is `user`.
absl::Status RunAs(const UserIds& user);

}  // namespace petrel::server

#endif  // PETREL_SERVER_SERVICE_MANAGER_H_
