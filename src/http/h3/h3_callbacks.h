// Internal: the nghttp3 callback table of H3Connection — C trampolines named after the
// connection methods they call (h3_callbacks.cc).
#ifndef PETREL_HTTP_H3_H3_CALLBACKS_H_
#define PETREL_HTTP_H3_H3_CALLBACKS_H_

#include <nghttp3/nghttp3.h>

#include "absl/strings/string_view.h"
#include "http/library_nv.h"

namespace petrel::http {

class H3Connection;
class H3Stream;

// A name/value pair for nghttp3 that points at the given bytes (nghttp3 copies on submit
// unless `flags` say NO_COPY).
inline nghttp3_nv MakeH3Nv(absl::string_view name, absl::string_view value,
                           uint8_t flags = NGHTTP3_NV_FLAG_NONE) {
  return http_internal::MakeLibraryNv<nghttp3_nv>(name, value, flags);
}

struct H3Callbacks {
  static nghttp3_callbacks Table();
  // nghttp3_data_reader::read_data for response bodies.
  static nghttp3_ssize ReadData(nghttp3_conn* conn, int64_t stream_id, nghttp3_vec* vec,
                                size_t veccnt, uint32_t* pflags, void* conn_user_data,
                                void* stream_user_data);
  // The request stream a callback reports on: its stream user data (set when its headers
  // begin), so that per-field and per-ACK callbacks need no lookup; for streams without one (the
  // control and QPACK streams) the connection's map, which does not know them either.
  static H3Stream* StreamOf(H3Connection* c, int64_t id, void* stream_user_data);
};

}  // namespace petrel::http

#endif  // PETREL_HTTP_H3_H3_CALLBACKS_H_
