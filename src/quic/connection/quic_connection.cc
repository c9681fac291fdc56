// QuicConnection: the public handle forwards to the internal Connection.
#include "petrel/quic/quic_connection.h"

#include <cstddef>

#include "quic/connection/connection.h"

namespace petrel {

// Connection::WritePackets hands the source ngtcp2's own vectors.
static_assert(sizeof(QuicStreamVec) == sizeof(ngtcp2_vec) &&
              offsetof(QuicStreamVec, base) == offsetof(ngtcp2_vec, base) &&
              offsetof(QuicStreamVec, len) == offsetof(ngtcp2_vec, len));

bool QuicConnection::Write(int64_t stream, absl::string_view data, bool fin) {
  return impl_->Write(stream, data, fin);
}
bool QuicConnection::WriteRef(int64_t stream, absl::string_view data, bool fin) {
  return impl_->Write(stream, data, fin, /*copy=*/false);
}
void QuicConnection::SetStreamSource(QuicStreamSource* source) { impl_->SetStreamSource(source); }
void QuicConnection::WantWrite() { impl_->WantWrite(); }
void QuicConnection::Consume(int64_t stream, size_t n) { impl_->Consume(stream, n); }
int64_t QuicConnection::OpenBidiStream() { return impl_->OpenStream(true); }
int64_t QuicConnection::OpenUniStream() { return impl_->OpenStream(false); }
void QuicConnection::SetUrgent(int64_t stream) { impl_->SetUrgent(stream); }
void QuicConnection::ResetStream(int64_t stream, uint64_t app_error) {
  impl_->ResetStream(stream, app_error);
}
void QuicConnection::StopSending(int64_t stream, uint64_t app_error) {
  impl_->StopSending(stream, app_error);
}
void QuicConnection::Close(uint64_t app_error) { impl_->Close(app_error); }
bool QuicConnection::InitiateKeyUpdate() { return impl_->InitiateKeyUpdate(); }
bool QuicConnection::stream_early_data(int64_t stream) const {
  return impl_->StreamEarlyData(stream);
}
EventLoop* QuicConnection::loop() const { return impl_->loop(); }
bool QuicConnection::handshake_completed() const { return impl_->handshake_completed(); }
std::string QuicConnection::alpn() const {
  const uint8_t* p = nullptr;
  unsigned len = 0;
  SSL_get0_alpn_selected(impl_->ssl(), &p, &len);
  return std::string(reinterpret_cast<const char*>(p), len);
}
uint32_t QuicConnection::version() const {
  return ngtcp2_conn_get_negotiated_version(impl_->conn());
}
std::string QuicConnection::cipher() const {
  const SSL_CIPHER* c = SSL_get_current_cipher(impl_->ssl());
  return c == nullptr ? std::string() : std::string(SSL_CIPHER_standard_name(c));
}
const SocketAddress& QuicConnection::peer_address() const { return impl_->peer(); }
const SocketAddress& QuicConnection::local_address() const { return impl_->local(); }
std::string QuicConnection::server_name() const {
  const char* name = SSL_get_servername(impl_->ssl(), TLSEXT_NAMETYPE_host_name);
  return name == nullptr ? std::string() : std::string(name);
}
size_t QuicConnection::open_streams() const { return impl_->open_streams(); }
size_t QuicConnection::send_buffered() const { return impl_->send_buffered(); }

}  // namespace petrel
