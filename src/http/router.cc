#include "petrel/http/router.h"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <exception>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "http/websocket/websocket_route.h"
#include "petrel/common/event_loop.h"
#include "petrel/common/log.h"
#include "petrel/common/timer.h"
#include "petrel/http/status.h"

namespace petrel {
namespace {

// A route's handler deadline, armed while its handler has not answered.
struct HandlerDeadline {
  HandlerDeadline(EventLoop* loop, Timer::Callback on_expiry) : timer(loop, std::move(on_expiry)) {}
  Timer timer;
};

}  // namespace

// A trie of pattern segments. Each node is reached by one segment from its parent: a literal
// (keyed in `literals`), a parameter (`param`, whatever its name) or the trailing wildcard.
struct Router::Node {
  struct Route {
    std::optional<Method> method;  // nullopt: any method.
    Handler handler;
    std::vector<std::string> param_names;  // In segment order; "*" for the wildcard.
    std::string pattern;
    RouteOptions options;
  };

  absl::flat_hash_map<std::string, std::unique_ptr<Node>> literals;
  std::unique_ptr<Node> param;
  std::unique_ptr<Node> wildcard;              // Terminal: only `routes` are used.
  std::vector<std::unique_ptr<Route>> routes;  // Patterns that end at this node.
};

namespace {

using Node = Router::Node;
using Route = Router::Node::Route;

enum class SegmentKind : uint8_t { kLiteral, kParam, kWildcard };

struct Segment {
  SegmentKind kind;
  absl::string_view text;  // The literal, or the parameter's name.
};

using Segments = absl::InlinedVector<Segment, 8>;

bool IsParamNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

bool IsLiteralChar(char c) { return c > 0x20 && c < 0x7f && c != '*' && c != '?' && c != '#'; }

absl::StatusOr<Segments> ParsePattern(absl::string_view pattern) {
  if (pattern.empty() || pattern.front() != '/') {
    return absl::InvalidArgumentError(absl::StrCat("pattern must start with '/': ", pattern));
  }
  const std::vector<absl::string_view> parts = absl::StrSplit(pattern.substr(1), '/');
  Segments segments;
  for (size_t i = 0; i < parts.size(); ++i) {
    const absl::string_view part = parts[i];
    if (part == "*") {
      if (i + 1 != parts.size()) {
        return absl::InvalidArgumentError(absl::StrCat("'*' must be the last segment: ", pattern));
      }
      segments.push_back({SegmentKind::kWildcard, "*"});
    } else if (!part.empty() && part.front() == ':') {
      const absl::string_view name = part.substr(1);
      if (name.empty() || !std::all_of(name.begin(), name.end(), IsParamNameChar)) {
        return absl::InvalidArgumentError(
            absl::StrCat("parameter names are [A-Za-z0-9_]+: ", pattern));
      }
      for (const Segment& s : segments) {
        if (s.kind == SegmentKind::kParam && s.text == name) {
          return absl::InvalidArgumentError(
              absl::StrCat("duplicate parameter '", name, "': ", pattern));
        }
      }
      segments.push_back({SegmentKind::kParam, name});
    } else {
      if (!std::all_of(part.begin(), part.end(), IsLiteralChar)) {
        return absl::InvalidArgumentError(
            absl::StrCat("literal segments are visible ASCII without '*', '?', '#': ", pattern));
      }
      segments.push_back({SegmentKind::kLiteral, part});
    }
  }
  return segments;
}

// The route at `node` that serves `method`: exact method, then GET for HEAD, then Any.
const Route* Accept(const Node& node, const Method& method) {
  const Route* get = nullptr;
  const Route* any = nullptr;
  for (const auto& route : node.routes) {
    if (!route->method.has_value()) {
      any = route.get();
    } else if (*route->method == method) {
      return route.get();
    } else if (method.kind() == MethodKind::kHead && route->method->kind() == MethodKind::kGet) {
      get = route.get();
    }
  }
  return get != nullptr ? get : any;
}

// Splits the next segment off `rest` (the path after a '/'). `more` says whether another '/'
// (hence another, possibly empty, segment) follows.
struct Step {
  absl::string_view segment;
  absl::string_view next;
  bool more;
};

Step NextSegment(absl::string_view rest) {
  // memchr rather than string_view::find, which abseil's string_view does not inline.
  const void* mark = rest.empty() ? nullptr : std::memchr(rest.data(), '/', rest.size());
  if (mark == nullptr) return {rest, absl::string_view(), false};
  const size_t slash = static_cast<size_t>(static_cast<const char*>(mark) - rest.data());
  return {rest.substr(0, slash), rest.substr(slash + 1), true};
}

using Values = absl::InlinedVector<absl::string_view, 8>;

// Depth-first in precedence order (literal, parameter, wildcard): the first accepting route
// found is the most specific. Each trie node is visited at most once, and recursion depth is
// bounded by the longest pattern, not by the path.
const Route* Search(const Node& node, absl::string_view rest, bool has_segment,
                    const Method& method, Values& values) {
  if (!has_segment) return Accept(node, method);
  const Step step = NextSegment(rest);
  // Hashing the segment is most of a lookup: skip it at nodes without literal children.
  if (!node.literals.empty()) {
    if (auto it = node.literals.find(step.segment); it != node.literals.end()) {
      if (const Route* r = Search(*it->second, step.next, step.more, method, values)) return r;
    }
  }
  if (node.param != nullptr && !step.segment.empty()) {
    values.push_back(step.segment);
    if (const Route* r = Search(*node.param, step.next, step.more, method, values)) return r;
    values.pop_back();
  }
  if (node.wildcard != nullptr) {
    if (const Route* r = Accept(*node.wildcard, method)) {
      values.push_back(rest);
      return r;
    }
  }
  return nullptr;
}

// Methods accepted by any pattern that matches the path (for 405's Allow).
struct AllowSet {
  uint32_t standard = 0;  // Bit per MethodKind.
  std::vector<std::string> extensions;
  bool matched = false;

  void AddRoutes(const Node& node) {
    for (const auto& route : node.routes) {
      matched = true;
      if (!route->method.has_value()) continue;  // Any would have matched: not reached.
      if (route->method->is_extension()) {
        extensions.emplace_back(route->method->name());
      } else {
        standard |= 1u << static_cast<unsigned>(route->method->kind());
      }
    }
  }
};

void Collect(const Node& node, absl::string_view rest, bool has_segment, AllowSet& allow) {
  if (!has_segment) {
    allow.AddRoutes(node);
    return;
  }
  const Step step = NextSegment(rest);
  if (auto it = node.literals.find(step.segment); it != node.literals.end()) {
    Collect(*it->second, step.next, step.more, allow);
  }
  if (node.param != nullptr && !step.segment.empty()) {
    Collect(*node.param, step.next, step.more, allow);
  }
  if (node.wildcard != nullptr) allow.AddRoutes(*node.wildcard);
}

std::string AllowValue(AllowSet& set) {
  if (set.standard & (1u << static_cast<unsigned>(MethodKind::kGet))) {
    set.standard |= 1u << static_cast<unsigned>(MethodKind::kHead);
  }
  std::string value;
  for (unsigned k = 0; k < static_cast<unsigned>(MethodKind::kExtension); ++k) {
    if ((set.standard & (1u << k)) == 0) continue;
    absl::StrAppend(&value, value.empty() ? "" : ", ", MethodKindName(static_cast<MethodKind>(k)));
  }
  std::sort(set.extensions.begin(), set.extensions.end());
  set.extensions.erase(std::unique(set.extensions.begin(), set.extensions.end()),
                       set.extensions.end());
  for (const std::string& name : set.extensions) {
    absl::StrAppend(&value, value.empty() ? "" : ", ", name);
  }
  return value;
}

// The route for `method` and `path` with its parameter values, or nullptr.
const Route* FindRoute(const Node* root, const Method& method, absl::string_view path,
                       Values& values) {
  if (root == nullptr || path.empty() || path.front() != '/') return nullptr;
  const Route* route = Search(*root, path.substr(1), true, method, values);
  assert(route == nullptr || values.size() == route->param_names.size());
  return route;
}

RouteParams ParamsOf(const Route& route, const Values& values) {
  RouteParams params;
  for (size_t i = 0; i < values.size(); ++i) params.Add(route.param_names[i], values[i]);
  return params;
}

// No route serves the request: 405 with Allow if patterns match the path for other methods,
// else 404.
void FillMiss(const Node* root, absl::string_view path, RouteMatch& match) {
  if (root == nullptr || path.empty() || path.front() != '/') return;
  AllowSet allow;
  Collect(*root, path.substr(1), true, allow);
  if (allow.matched) {
    match.status = HttpStatus::kMethodNotAllowed;
    match.allow = AllowValue(allow);
  }
}

}  // namespace

Router::Router() : root_(std::make_unique<Node>()) {}
Router::Router(Router&&) noexcept = default;
Router& Router::operator=(Router&&) noexcept = default;
Router::~Router() = default;

absl::Status Router::Add(const Method& method, absl::string_view pattern, Handler handler,
                         RouteOptions options) {
  return AddRoute(&method, pattern, std::move(handler), std::move(options));
}
absl::Status Router::Any(absl::string_view pattern, Handler handler, RouteOptions options) {
  return AddRoute(nullptr, pattern, std::move(handler), std::move(options));
}
absl::Status Router::Get(absl::string_view pattern, Handler handler, RouteOptions options) {
  return Add(Method::kGet, pattern, std::move(handler), std::move(options));
}
absl::Status Router::Post(absl::string_view pattern, Handler handler, RouteOptions options) {
  return Add(Method::kPost, pattern, std::move(handler), std::move(options));
}
absl::Status Router::Put(absl::string_view pattern, Handler handler, RouteOptions options) {
  return Add(Method::kPut, pattern, std::move(handler), std::move(options));
}
absl::Status Router::Delete(absl::string_view pattern, Handler handler, RouteOptions options) {
  return Add(Method::kDelete, pattern, std::move(handler), std::move(options));
}
absl::Status Router::Patch(absl::string_view pattern, Handler handler, RouteOptions options) {
  return Add(Method::kPatch, pattern, std::move(handler), std::move(options));
}

absl::Status Router::WebSocket(absl::string_view pattern, WebSocketFactory factory,
                               WebSocketOptions websocket, RouteOptions options) {
  if (!factory) return absl::InvalidArgumentError(absl::StrCat("empty factory for ", pattern));
  return AddRoute(nullptr, pattern,
                  http_internal::MakeWebSocketHandler(std::move(factory), std::move(websocket)),
                  std::move(options));
}

absl::Status Router::AddRoute(const Method* method, absl::string_view pattern, Handler handler,
                              RouteOptions options) {
  if (!handler) return absl::InvalidArgumentError(absl::StrCat("empty handler for ", pattern));
  if (root_ == nullptr) root_ = std::make_unique<Node>();  // Moved-from router.
  absl::StatusOr<Segments> segments = ParsePattern(pattern);
  if (!segments.ok()) return segments.status();

  auto route = std::make_unique<Route>();
  Node* node = root_.get();
  for (const Segment& s : *segments) {
    std::unique_ptr<Node>* child = nullptr;
    switch (s.kind) {
      case SegmentKind::kLiteral:
        child = &node->literals[s.text];
        break;
      case SegmentKind::kParam:
        child = &node->param;
        route->param_names.emplace_back(s.text);
        break;
      case SegmentKind::kWildcard:
        child = &node->wildcard;
        route->param_names.emplace_back("*");
        break;
    }
    if (*child == nullptr) *child = std::make_unique<Node>();
    node = child->get();
  }

  for (const auto& existing : node->routes) {
    const bool same = method == nullptr ? !existing->method.has_value()
                                        : existing->method == std::optional<Method>(*method);
    if (same) {
      return absl::AlreadyExistsError(
          absl::StrCat(pattern, " conflicts with ", existing->pattern, " for ",
                       method == nullptr ? absl::string_view("any method") : method->name()));
    }
  }
  if (method != nullptr) route->method = *method;
  route->handler = std::move(handler);
  has_middleware_ |= !options.middleware.empty();
  route->options = std::move(options);
  route->pattern = std::string(pattern);
  node->routes.push_back(std::move(route));
  return absl::OkStatus();
}

// A handler threw: 500 if nothing was committed yet; a response already streaming fails (the
// engine resets the stream, or closes an HTTP/1.1 connection, so the client cannot take the
// truncated body for a whole one); a complete response goes out as it is.
void Router::HandlerThrew(absl::string_view pattern, absl::string_view what, const Request& req,
                          Response& res) {
  const absl::string_view method = req.method().name();
  PETREL_LOG(kError, "handler of route %.*s threw on %.*s %.*s: %.*s",
             static_cast<int>(pattern.size()), pattern.data(), static_cast<int>(method.size()),
             method.data(), static_cast<int>(req.path().size()), req.path().data(),
             static_cast<int>(what.size()), what.data());
  if (!res.committed()) {
    // Fields the handler meant for its own representation would misdescribe the error's.
    for (absl::string_view name :
         {"content-type", "content-encoding", "content-language", "content-location",
          "content-range", "content-disposition", "etag", "last-modified", "location", "trailer"}) {
      res.headers().Remove(name);
    }
    res.trailers().Clear();
    res.SendError(HttpStatus::kInternalServerError, absl::StrCat("handler threw: ", what));
    return;
  }
  res.FailStreamingBody(absl::InternalError(absl::StrCat("handler threw: ", what)));
}

RouteMatch Router::Match(const Method& method, absl::string_view path) const {
  RouteMatch match;
  Values values;
  if (const Route* route = FindRoute(root_.get(), method, path, values)) {
    match.status = HttpStatus::kOk;
    match.handler = &route->handler;
    match.pattern = route->pattern;
    match.params = ParamsOf(*route, values);
    return match;
  }
  FillMiss(root_.get(), path, match);
  return match;
}

bool Router::AnswerOverLimits(const RouteOptions& options, Request& req, Response& res) {
  if (options.max_header_bytes.has_value() && req.head_bytes() > *options.max_header_bytes) {
    req.body().Discard();
    res.SendError(HttpStatus::kRequestHeaderFieldsTooLarge,
                  "request header fields too large for the route");
    return true;
  }
  if (options.max_request_body.has_value()) req.body().set_limit(*options.max_request_body);
  if (req.body().KnownOverLimit()) {
    req.body().Discard();
    res.SendError(HttpStatus::kContentTooLarge, "request body too large");
    return true;
  }
  return false;
}

void Router::SetErrorHandler(ErrorHandler handler) { error_handler_ = std::move(handler); }

void Router::RenderError(const HttpError& error, const Request& req, Response& res) const {
  if (!error_handler_) return;
  absl::string_view failure;
  try {
    error_handler_(error, req, res);
    if (res.committed() || res.cancelled()) return;
    failure = "returned without committing";
  } catch (const std::exception& e) {
    PETREL_LOG(kError, "error handler threw for %d: %s", error.status, e.what());
    return;
  } catch (...) {
    failure = "threw an exception not derived from std::exception";
  }
  PETREL_LOG(kError, "error handler %.*s for %d", static_cast<int>(failure.size()), failure.data(),
             error.status);
}

void Router::Use(Middleware middleware) { Use({}, std::move(middleware)); }

void Router::Use(absl::string_view prefix, Middleware middleware) {
  middleware_.push_back(UsedMiddleware{std::string(prefix), std::move(middleware)});
  has_middleware_ = true;
}

void Next::operator()() const { router_->RunChain(route_, index_, *req_, *res_); }

inline void Router::RunHandler(const void* route_ptr, Request& req, Response& res) const {
  const Route& route = *static_cast<const Route*>(route_ptr);
  // A handler's exception ends its request, not the connection or the worker. Zero-cost until
  // something is thrown.
  try {
    route.handler(req, res);
  } catch (const std::exception& e) {
    HandlerThrew(route.pattern, e.what(), req, res);
  } catch (...) {
    HandlerThrew(route.pattern, "an exception not derived from std::exception", req, res);
  }
}

void Router::AnswerMiss(Request& req, Response& res) const {
  RouteMatch miss;
  FillMiss(root_.get(), req.path(), miss);
  if (miss.status == HttpStatus::kMethodNotAllowed) {
    res.SetHeader("Allow", miss.allow);
    res.SendError(miss.status, "no route for the method");
    return;
  }
  res.SendError(miss.status, "no route for the path");
}

void Router::RunChain(const void* route_ptr, uint32_t index, Request& req, Response& res) const {
  const Route* route = static_cast<const Route*>(route_ptr);
  for (; index < middleware_.size(); ++index) {
    const UsedMiddleware& used = middleware_[index];
    if (absl::StartsWith(req.path(), used.prefix)) {
      used.middleware(req, res, Next(this, route, index + 1, &req, &res));
      return;
    }
  }
  if (route != nullptr) {
    const size_t own = index - middleware_.size();
    if (own < route->options.middleware.size()) {
      route->options.middleware[own](req, res, Next(this, route, index + 1, &req, &res));
      return;
    }
  }
  if (route != nullptr) {
    RunHandler(route, req, res);
  } else {
    AnswerMiss(req, res);
  }
}

void Router::Handle(Request& req, Response& res) const {
  res.set_error_pages(this, &req);
  if (res.rejected_status() != 0) {
    res.SendError(res.rejected_status(), res.rejection_reason());
    return;
  }
  Values values;
  const Route* route = FindRoute(root_.get(), req.method(), req.path(), values);
  if (route != nullptr) {
    req.set_params(ParamsOf(*route, values));
    req.set_route_pattern(route->pattern);
    if (AnswerOverLimits(route->options, req, res)) return;
    res.stream_idle_ = route->options.stream_idle_timeout;
  } else if (req.body().KnownOverLimit()) {  // the server's limit, whatever the path
    req.body().Discard();
    res.SendError(HttpStatus::kContentTooLarge, "request body too large");
    return;
  }
  if (!has_middleware_) {  // no chain: nothing to pay for it
    if (route != nullptr) {
      RunHandler(route, req, res);
    } else {
      AnswerMiss(req, res);
    }
  } else {
    // The middleware's exceptions end the request as a handler's do (RunHandler catches the
    // handler's own).
    try {
      RunChain(route, 0, req, res);
    } catch (const std::exception& e) {
      HandlerThrew(route != nullptr ? absl::string_view(route->pattern) : "(middleware)", e.what(),
                   req, res);
    } catch (...) {
      HandlerThrew(route != nullptr ? absl::string_view(route->pattern) : "(middleware)",
                   "an exception not derived from std::exception", req, res);
    }
  }
  if (route == nullptr) return;
  const RouteOptions& options = route->options;
  if (options.handler_deadline > Duration::zero() && !res.committed() && !res.cancelled()) {
    if (EventLoop* loop = EventLoop::Current()) {
      // In the request's context, so that it goes (cancelled) with the request.
      HandlerDeadline& deadline = req.context().Emplace<HandlerDeadline>(
          loop, [&res, status = options.deadline_status] { res.ExpireHandler(status); });
      deadline.timer.StartAt(loop->now() + options.handler_deadline);  // from the call
    }
  }
}

}  // namespace petrel
