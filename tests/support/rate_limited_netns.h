// Runs one test of the calling binary again inside a user + network namespace of its own
// (`unshare -rn`) whose loopback has a rate-limiting tbf qdisc. There a UDP socket with a small
// send buffer really fills up (on a plain loopback the kernel hands each datagram over at once,
// so a send never blocks): for tests of what happens when sendmsg/sendmmsg return EAGAIN.
#ifndef PETREL_TESTS_SUPPORT_RATE_LIMITED_NETNS_H_
#define PETREL_TESTS_SUPPORT_RATE_LIMITED_NETNS_H_

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "support/command.h"

namespace petrel::testing {

// True inside the namespace: the test body runs the scenario proper.
inline bool InRateLimitedNetns(const char* env) { return std::getenv(env) != nullptr; }

// Outside: re-runs the current test (`suite.name`) with `env`=1 inside the namespace, its
// loopback shaped by `tbf` ("rate 200mbit burst 64kb latency 50ms"), optionally pinned to CPU 0
// (so that queued packets do not overtake each other on two CPUs), and checks that it passed.
// Skips when iproute2 or user namespaces are missing.
inline void RunInRateLimitedNetns(const char* env, const std::string& tbf, bool pin_cpu0,
                                  int timeout_s) {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::error_code ec;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  ASSERT_FALSE(ec) << ec.message();
  if (access("/usr/sbin/tc", X_OK) != 0 || access("/usr/sbin/ip", X_OK) != 0) {
    GTEST_SKIP() << "iproute2 (ip, tc) missing";
  }
  if (RunCommand("unshare -rn true").exit_code != 0) {
    GTEST_SKIP() << "no user namespaces here (unshare -rn fails)";
  }
  const CommandResult r = RunCommand(
      absl::StrCat(pin_cpu0 ? "taskset -c 0 " : "",
                   "unshare -rn sh -c '/usr/sbin/ip link set lo up && /usr/sbin/tc qdisc add dev "
                   "lo root tbf ",
                   tbf, " && ", env, "=1 exec ", self, " --gtest_filter=", test->test_suite_name(),
                   ".", test->name(), "'"),
      timeout_s);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[  PASSED  ] 1 test"), std::string::npos) << r.output;
}

}  // namespace petrel::testing

#endif  // PETREL_TESTS_SUPPORT_RATE_LIMITED_NETNS_H_
