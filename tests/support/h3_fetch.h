// Internal (tests): whole HTTP/3 requests through Http3Client, one after another on one
// connection, under a time limit.
#ifndef PETREL_TESTS_SUPPORT_H3_FETCH_H_
#define PETREL_TESTS_SUPPORT_H3_FETCH_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "petrel/common/socket_address.h"
#include "petrel/common/timer.h"
#include "petrel/http/http3_client.h"

namespace petrel::testing {

// Sends each request when the one before it completed, on one connection to 127.0.0.1:`port`
// (certificate not verified); all the responses, or the first failure. Bounded: 60 s.
inline absl::StatusOr<std::vector<Http3Response>> FetchOverH3(uint16_t port,
                                                              std::vector<Http3Request> requests) {
  Http3ClientConfig config;
  config.server = *SocketAddress::Parse("127.0.0.1", port);
  config.verify_peer = false;
  absl::StatusOr<std::unique_ptr<Http3Client>> client = Http3Client::Create(std::move(config));
  if (!client.ok()) return client.status();
  Http3Client& c = **client;
  std::vector<Http3Response> got;
  absl::Status failure;
  size_t next = 0;
  absl::AnyInvocable<void()> send_next = [&] {
    absl::StatusOr<uint64_t> id =
        c.Fetch(std::move(requests[next++]), [&](absl::StatusOr<Http3Response> r) {
          if (!r.ok()) failure = r.status();
          if (r.ok()) got.push_back(*std::move(r));
          if (r.ok() && next < requests.size()) return send_next();
          c.CloseWhenDone();
        });
    if (!id.ok()) failure = id.status();
  };
  send_next();
  if (!failure.ok()) return failure;
  if (absl::Status s = c.Connect(); !s.ok()) return s;
  Timer deadline(c.loop(), [&c] { c.Stop(); });
  deadline.StartAfter(std::chrono::seconds(60));
  c.Run();
  deadline.Cancel();
  if (!failure.ok()) return failure;
  if (got.size() != requests.size()) return absl::DeadlineExceededError("not all answered");
  return got;
}

// One request on a connection of its own.
inline absl::StatusOr<Http3Response> FetchOverH3(uint16_t port, Http3Request request) {
  std::vector<Http3Request> one;
  one.push_back(std::move(request));
  absl::StatusOr<std::vector<Http3Response>> got = FetchOverH3(port, std::move(one));
  if (!got.ok()) return got.status();
  return std::move(got->front());
}

}  // namespace petrel::testing

#endif  // PETREL_TESTS_SUPPORT_H3_FETCH_H_
