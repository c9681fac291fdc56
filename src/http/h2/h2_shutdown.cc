// H2Connection's graceful shutdown (DESIGN §8): GOAWAY(2^31-1) + PING, then — on the PING's ACK
// (OnFrameRecv) or after options.shutdown_ping_timeout — GOAWAY(last processed stream). Streams
// up to that id finish; once nghttp2 wants neither to read nor to write, MaybeFinish closes the
// TcpStream gracefully (ShutdownAfterFlush).
#include "http/h2/h2_connection.h"

namespace petrel::http {

void H2Connection::Shutdown() {
  if (shutdown_started_ || session_ == nullptr || closed_) return;
  shutdown_started_ = true;
  Entry e(this);
  nghttp2_submit_shutdown_notice(session_);
  nghttp2_submit_ping(session_, NGHTTP2_FLAG_NONE, kShutdownPingOpaque);
  shutdown_timer_.StartAfter(options_.shutdown_ping_timeout);
  for (const std::unique_ptr<H2Stream>& s : streams_) {
    if (s->producer != nullptr) s->producer->OnServerStopping();  // its resume only queues
  }
}

void H2Connection::SendFinalGoaway() {
  if (final_goaway_sent_ || session_ == nullptr || closed_) return;
  final_goaway_sent_ = true;
  shutdown_timer_.Cancel();
  nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE,
                        nghttp2_session_get_last_proc_stream_id(session_), NGHTTP2_NO_ERROR,
                        nullptr, 0);
  RequestFlush();
}

}  // namespace petrel::http
