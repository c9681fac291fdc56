// Internal: one WebSocket over a request's stream, whatever the protocol under it. Incoming
// bytes are the request's body (h1: the connection's bytes after the 101; h2/h3: the CONNECT
// stream's DATA), outgoing bytes the response's body — this producer — so every engine carries
// a WebSocket as it carries any streamed exchange. Framing, masking rules, control frames,
// fragmentation and the close handshake are wslay's (libwslay, server role); Petrel adds UTF-8
// validation, the size limits, backpressure both ways, the idle ping and permessage-deflate
// (RFC 7692: wslay only lets RSV1 through; compressing and inflating are here).
#ifndef PETREL_HTTP_WEBSOCKET_WEBSOCKET_SESSION_H_
#define PETREL_HTTP_WEBSOCKET_WEBSOCKET_SESSION_H_

#include <wslay/wslay.h>
#include <zlib.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "http/websocket/permessage_deflate.h"
#include "petrel/common/timer.h"
#include "petrel/http/body.h"
#include "petrel/http/request.h"
#include "petrel/http/request_observer.h"
#include "petrel/http/websocket.h"

namespace petrel::http_internal {

class WebSocketSession final : public BodyProducer, public WebSocket {
 public:
  // `req` must outlive the session (the engine keeps it with the response this producer is
  // the body of). `loop` runs the idle timer (null: none). `deflate`: permessage-deflate as
  // agreed in the opening, or none.
  WebSocketSession(Request& req, std::unique_ptr<WebSocketHandler> handler,
                   const WebSocketOptions& options, std::string subprotocol, EventLoop* loop,
                   std::optional<PermessageDeflateParams> deflate = std::nullopt);
  ~WebSocketSession() override;

  // Starts reading the request body and runs the handler's OnOpen. Call once, after the
  // response (101 or 200) was committed with this producer as its body.
  void Start();
  // The stream was reset or the connection lost: OnClose(1006) unless it already ran.
  void Abort();
  // A graceful server stop: close 1001 (RFC 6455 §7.4.1, "going away"), after OnOpen if the
  // session has not started yet; the peer's close is awaited within the stop's grace period.
  void OnServerStopping() override;

  // WebSocket
  bool SendText(absl::string_view text) override { return Queue(WSLAY_TEXT_FRAME, text); }
  bool SendBinary(absl::string_view bytes) override { return Queue(WSLAY_BINARY_FRAME, bytes); }
  bool Ping(absl::string_view payload) override;
  void Close(uint16_t code, absl::string_view reason) override;
  void PauseReading() override;
  void ResumeReading() override;
  size_t buffered_amount() const override;
  const Request& request() const override { return req_; }
  absl::string_view subprotocol() const override { return subprotocol_; }

  // Bytes held for inflating received messages (at most max_message + 1, the bound a
  // decompression bomb meets).
  size_t inflate_buffer_bytes() const { return inflated_.size(); }

 private:
  BodyReadResult DoRead(size_t max_bytes, std::string* out) override;

  bool Queue(uint8_t opcode, absl::string_view payload);
  // Runs wslay over what arrived, then moves what it wants to send into output_.
  void Receive();
  void Flush();
  // Hands a whole message (or the peer's close) to the handler.
  void Deliver(uint8_t opcode, absl::string_view data, uint16_t status_code);
  // Closes with `code` after a violation Petrel found (UTF-8, size): wslay sends the frame.
  void Fail(uint16_t code, absl::string_view reason);
  // OnClose, once.
  void Finish(uint16_t code, absl::string_view reason);
  void OnIdleTimer();
  // permessage-deflate. Compress: `payload` into deflated_ (*out views it), the trailing
  // 00 00 FF FF removed (RFC 7692 §7.2.1); false if zlib failed. Inflate: a received message
  // into inflated_; false after failing the WebSocket (1009 past max_message, 1007 for bad
  // data).
  bool Compress(absl::string_view payload, absl::string_view* out);
  bool Inflate(absl::string_view message);
  enum class InflateResult { kDone, kStreamEnd, kTooBig, kBad };
  // Runs inflate over `in`, appending to inflated_ (grown up to max_message + 1 bytes).
  InflateResult InflateSome(const uint8_t* in, size_t len);

  // wslay callbacks.
  static ssize_t RecvCallback(wslay_event_context_ptr ctx, uint8_t* buf, size_t len, int flags,
                              void* user);
  static ssize_t SendCallback(wslay_event_context_ptr ctx, const uint8_t* data, size_t len,
                              int flags, void* user);
  static void OnMessageCallback(wslay_event_context_ptr ctx, const wslay_event_on_msg_recv_arg* arg,
                                void* user);
  static void OnFrameStartCallback(wslay_event_context_ptr ctx,
                                   const wslay_event_on_frame_recv_start_arg* arg, void* user);

  Request& req_;
  std::unique_ptr<WebSocketHandler> handler_;
  const WebSocketOptions options_;
  const std::string subprotocol_;
  wslay_event_context_ptr ctx_ = nullptr;

  std::string input_;  // arrived, not yet taken by wslay
  size_t input_head_ = 0;
  bool input_ended_ = false;  // the request body ended: no more bytes will come
  std::string output_;        // framed by wslay, not yet taken by the engine
  size_t output_head_ = 0;
  bool paused_ = false;
  bool want_writable_ = false;  // a Send* refused since the last OnWritable
  bool closed_ = false;         // OnClose ran
  bool failed_ = false;         // the stream is to be reset rather than ended
  bool receiving_ = false;      // inside Receive (wslay callbacks may call back in)
  bool saw_frame_ = false;      // a frame arrived since the idle timer last looked
  bool pinged_ = false;         // the idle timer sent its ping and waits
  bool started_ = false;        // Start ran
  // Non-zero: wslay's next close without a code goes out with this one (see SendCallback).
  uint16_t empty_close_code_ = 0;
  uint16_t close_code_sent_ = 0;  // the code such a rewritten close carried
  bool stopping_ = false;         // the server stops: close 1001 once started
  std::unique_ptr<Timer> idle_timer_;
  // Messages wslay parsed after the handler paused reading, delivered by ResumeReading.
  struct HeldMessage {
    uint8_t opcode;
    std::string data;
    uint16_t status_code;  // a close's
  };
  std::deque<HeldMessage> held_;
  RequestObserver* observer_ = nullptr;  // told of the opening (Start) and of the end
  HttpProtocol protocol_ = HttpProtocol::kHttp1;

  const std::optional<PermessageDeflateParams> deflate_;
  // zlib streams, made on first use (most WebSockets of a route may never need one of them) and
  // kept for the session: context takeover needs their history, and without it a reset is
  // cheaper than a new stream.
  z_stream deflater_{};
  z_stream inflater_{};
  bool deflater_ready_ = false;
  bool inflater_ready_ = false;
  // Reused per message so that steady traffic does not allocate.
  std::string deflated_;
  std::string inflated_;
  size_t inflated_size_ = 0;  // bytes of inflated_ holding the message
  std::string window_;        // the inflater's window across a final block (RFC 7692 §7.2.3.4)
};

}  // namespace petrel::http_internal

#endif  // PETREL_HTTP_WEBSOCKET_WEBSOCKET_SESSION_H_
