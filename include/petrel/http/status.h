// Public: HTTP status codes (RFC 9110 §15), their reason phrases and classes.
#ifndef PETREL_HTTP_STATUS_H_
#define PETREL_HTTP_STATUS_H_

#include "absl/strings/string_view.h"

namespace petrel {

// Status codes are plain ints (100..599) so handlers can use any code; these are names for the
// common ones: `res.Send(HttpStatus::kNotFound, "...")`.
struct HttpStatus {
  static constexpr int kContinue = 100;
  static constexpr int kSwitchingProtocols = 101;
  static constexpr int kEarlyHints = 103;
  static constexpr int kOk = 200;
  static constexpr int kCreated = 201;
  static constexpr int kAccepted = 202;
  static constexpr int kNoContent = 204;
  static constexpr int kResetContent = 205;
  static constexpr int kPartialContent = 206;
  static constexpr int kMovedPermanently = 301;
  static constexpr int kFound = 302;
  static constexpr int kSeeOther = 303;
  static constexpr int kNotModified = 304;
  static constexpr int kTemporaryRedirect = 307;
  static constexpr int kPermanentRedirect = 308;
  static constexpr int kBadRequest = 400;
  static constexpr int kUnauthorized = 401;
  static constexpr int kForbidden = 403;
  static constexpr int kNotFound = 404;
  static constexpr int kMethodNotAllowed = 405;
  static constexpr int kNotAcceptable = 406;
  static constexpr int kRequestTimeout = 408;
  static constexpr int kConflict = 409;
  static constexpr int kGone = 410;
  static constexpr int kLengthRequired = 411;
  static constexpr int kPreconditionFailed = 412;
  static constexpr int kContentTooLarge = 413;
  static constexpr int kUriTooLong = 414;
  static constexpr int kUnsupportedMediaType = 415;
  static constexpr int kRangeNotSatisfiable = 416;
  static constexpr int kExpectationFailed = 417;
  static constexpr int kMisdirectedRequest = 421;
  static constexpr int kUnprocessableContent = 422;
  static constexpr int kTooEarly = 425;
  static constexpr int kUpgradeRequired = 426;
  static constexpr int kPreconditionRequired = 428;
  static constexpr int kTooManyRequests = 429;
  static constexpr int kRequestHeaderFieldsTooLarge = 431;
  static constexpr int kUnavailableForLegalReasons = 451;
  static constexpr int kInternalServerError = 500;
  static constexpr int kNotImplemented = 501;
  static constexpr int kBadGateway = 502;
  static constexpr int kServiceUnavailable = 503;
  static constexpr int kGatewayTimeout = 504;
  static constexpr int kHttpVersionNotSupported = 505;
};

// The IANA-registered reason phrase ("Not Found"), "Unknown" for unregistered codes and for the
// reserved 306. 418 keeps its RFC 2324 phrase "I'm a teapot" (RFC 9110 reserves the code). The
// view is static.
absl::string_view ReasonPhrase(int code);

// 100..599: the three-digit codes RFC 9110 §15 lets a server send.
inline bool IsValidStatusCode(int code) { return code >= 100 && code <= 599; }

// 1..5 for a valid code (the first digit), 0 otherwise.
inline int StatusClass(int code) { return IsValidStatusCode(code) ? code / 100 : 0; }

inline bool IsInformational(int code) { return StatusClass(code) == 1; }

// Framing rule (RFC 9110 §6.4.1, RFC 9112 §6.3): 1xx, 204 and 304 responses never carry content;
// engines send no body (and no Content-Length for 1xx/204). 205 allows framing but RFC 9110
// §15.3.6 forbids content, so engines send it empty; responses to HEAD carry none either — both
// are the engine's business, not this function's.
inline bool AllowsBody(int code) { return !IsInformational(code) && code != 204 && code != 304; }

}  // namespace petrel

#endif  // PETREL_HTTP_STATUS_H_
