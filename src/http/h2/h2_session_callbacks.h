// Internal: the nghttp2 server-session callback table for H2Connection — C trampolines, named
// after the nghttp2 callback they implement, each calling the H2Connection method of the same
// meaning (the session's user data is the H2Connection).
#ifndef PETREL_HTTP_H2_H2_SESSION_CALLBACKS_H_
#define PETREL_HTTP_H2_H2_SESSION_CALLBACKS_H_

#include <nghttp2/nghttp2.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace petrel::http {

struct H2SessionCallbacks {
  // A new callbacks object; the caller deletes it with nghttp2_session_callbacks_del.
  static nghttp2_session_callbacks* Create();

  // The read callback of a response's data provider; `source->ptr` is the H2Stream.
  static ssize_t ReadData(nghttp2_session* session, int32_t stream_id, uint8_t* buf, size_t length,
                          uint32_t* data_flags, nghttp2_data_source* source, void* user_data);

  static int OnBeginFrame(nghttp2_session* session, const nghttp2_frame_hd* hd, void* user_data);
  static int OnBeginHeaders(nghttp2_session* session, const nghttp2_frame* frame, void* user_data);
  static int OnHeader(nghttp2_session* session, const nghttp2_frame* frame, const uint8_t* name,
                      size_t namelen, const uint8_t* value, size_t valuelen, uint8_t flags,
                      void* user_data);
  static int OnFrameRecv(nghttp2_session* session, const nghttp2_frame* frame, void* user_data);
  static int OnDataChunkRecv(nghttp2_session* session, uint8_t flags, int32_t stream_id,
                             const uint8_t* data, size_t len, void* user_data);
  static int OnStreamClose(nghttp2_session* session, int32_t stream_id, uint32_t error_code,
                           void* user_data);
  static int OnFrameSend(nghttp2_session* session, const nghttp2_frame* frame, void* user_data);
};

}  // namespace petrel::http

#endif  // PETREL_HTTP_H2_H2_SESSION_CALLBACKS_H_
