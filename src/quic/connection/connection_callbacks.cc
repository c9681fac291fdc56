#include "quic/connection/connection_callbacks.h"

#include "quic/connection/connection.h"
#include "quic/crypto/ngtcp2_callbacks.h"

namespace petrel::quic {

struct ConnectionCallbacks {
  static Connection* Of(void* user_data) { return static_cast<Connection*>(user_data); }
  static Connection::Stream* StreamOf(void* stream_user_data) {
    return static_cast<Connection::Stream*>(stream_user_data);
  }

  static int recv_stream_data(ngtcp2_conn*, uint32_t flags, int64_t stream_id, uint64_t,
                              const uint8_t* data, size_t datalen, void* user_data,
                              void* stream_user_data) {
    return Of(user_data)->OnRecvStreamData(flags, stream_id, StreamOf(stream_user_data), data,
                                           datalen);
  }
  static int acked_stream_data_offset(ngtcp2_conn*, int64_t, uint64_t offset, uint64_t datalen,
                                      void* user_data, void* stream_user_data) {
    return Of(user_data)->OnAckedStreamData(StreamOf(stream_user_data), offset, datalen);
  }
  static int stream_close(ngtcp2_conn*, uint32_t, int64_t stream_id, uint64_t, void* user_data,
                          void* stream_user_data) {
    return Of(user_data)->OnStreamClose(stream_id, StreamOf(stream_user_data));
  }
  static int stream_reset(ngtcp2_conn*, int64_t stream_id, uint64_t, uint64_t app_error_code,
                          void* user_data, void*) {
    return Of(user_data)->OnStreamReset(stream_id, app_error_code);
  }
  static int stream_stop_sending(ngtcp2_conn*, int64_t stream_id, uint64_t app_error_code,
                                 void* user_data, void*) {
    return Of(user_data)->OnStreamStopSending(stream_id, app_error_code);
  }
  static int extend_max_stream_data(ngtcp2_conn*, int64_t, uint64_t, void* user_data,
                                    void* stream_user_data) {
    return Of(user_data)->OnExtendMaxStreamData(StreamOf(stream_user_data));
  }
  static int handshake_completed(ngtcp2_conn*, void* user_data) {
    return Of(user_data)->OnHandshakeCompleted();
  }
  static int handshake_confirmed(ngtcp2_conn*, void* user_data) {
    return Of(user_data)->OnHandshakeConfirmed();
  }
  static int get_new_connection_id(ngtcp2_conn*, ngtcp2_cid* cid, uint8_t* token, size_t cidlen,
                                   void* user_data) {
    Connection* c = Of(user_data);
    return crypto::GenerateConnectionId(
        cid, token, cidlen,
        [c](absl::Span<uint8_t> id, uint8_t* t) { return c->host_->IssueConnectionId(*c, id, t); });
  }
  static int remove_connection_id(ngtcp2_conn*, const ngtcp2_cid* cid, void* user_data) {
    Connection* c = Of(user_data);
    c->host_->RetireConnectionId(*c, absl::MakeConstSpan(cid->data, cid->datalen));
    return 0;
  }
  static int path_validation(ngtcp2_conn*, uint32_t, const ngtcp2_path* path,
                             ngtcp2_path_validation_result res, void* user_data) {
    return Of(user_data)->OnPathValidation(path, res);
  }
  static int select_preferred_addr(ngtcp2_conn*, ngtcp2_path* dest,
                                   const ngtcp2_preferred_addr* paddr, void* user_data) {
    return Of(user_data)->OnSelectPreferredAddress(dest, paddr);
  }
  // ngtcp2 asks for the data right before it writes a PATH_CHALLENGE: the write loop learns
  // which packet carries it (path_order.h).
  static int get_path_challenge_data(ngtcp2_conn* conn, uint8_t* data, void* user_data) {
    Of(user_data)->challenge_written_ = true;
    return crypto::GetPathChallengeData(conn, data, user_data);
  }
  static int recv_new_token(ngtcp2_conn*, const ngtcp2_vec* token, void* user_data) {
    Connection* c = Of(user_data);
    c->observer_->OnNewToken(c->handle_, absl::MakeConstSpan(token->base, token->len));
    return 0;
  }
  static int extend_max_local_streams(ngtcp2_conn*, uint64_t, void* user_data) {
    Connection* c = Of(user_data);
    c->observer_->OnStreamsAvailable(c->handle_);
    return 0;
  }
  static void qlog_write(void* user_data, uint32_t flags, const void* data, size_t datalen) {
    Of(user_data)->WriteQlog(data, datalen, (flags & NGTCP2_QLOG_WRITE_FLAG_FIN) != 0);
  }
};

namespace {

constexpr ngtcp2_callbacks kCallbacks = {
    .client_initial = crypto::ClientInitial,
    .recv_client_initial = crypto::RecvClientInitial,
    .recv_crypto_data = crypto::RecvCryptoData,
    .handshake_completed = ConnectionCallbacks::handshake_completed,
    .encrypt = crypto::Encrypt,
    .decrypt = crypto::Decrypt,
    .hp_mask = crypto::HpMask,
    .recv_stream_data = ConnectionCallbacks::recv_stream_data,
    .acked_stream_data_offset = ConnectionCallbacks::acked_stream_data_offset,
    .stream_close = ConnectionCallbacks::stream_close,
    .recv_retry = crypto::RecvRetry,
    .extend_max_local_streams_bidi = ConnectionCallbacks::extend_max_local_streams,
    .extend_max_local_streams_uni = ConnectionCallbacks::extend_max_local_streams,
    .rand = crypto::Rand,
    .get_new_connection_id = ConnectionCallbacks::get_new_connection_id,
    .remove_connection_id = ConnectionCallbacks::remove_connection_id,
    .update_key = crypto::UpdateKey,
    .path_validation = ConnectionCallbacks::path_validation,
    .select_preferred_addr = ConnectionCallbacks::select_preferred_addr,
    .stream_reset = ConnectionCallbacks::stream_reset,
    .extend_max_stream_data = ConnectionCallbacks::extend_max_stream_data,
    .handshake_confirmed = ConnectionCallbacks::handshake_confirmed,
    .recv_new_token = ConnectionCallbacks::recv_new_token,
    .delete_crypto_aead_ctx = crypto::DeleteCryptoAeadCtx,
    .delete_crypto_cipher_ctx = crypto::DeleteCryptoCipherCtx,
    .get_path_challenge_data = ConnectionCallbacks::get_path_challenge_data,
    .stream_stop_sending = ConnectionCallbacks::stream_stop_sending,
    .version_negotiation = crypto::VersionNegotiation,
};

}  // namespace

ngtcp2_callbacks ConnectionCallbacksFor(bool is_server) {
  ngtcp2_callbacks cb = kCallbacks;
  if (is_server) {
    cb.client_initial = nullptr;
    cb.recv_retry = nullptr;
    cb.select_preferred_addr = nullptr;
  } else {
    cb.recv_client_initial = nullptr;
  }
  return cb;
}

// Used by Connection to set up qlog (settings.qlog.write).
ngtcp2_qlog_write ConnectionQlogWriter() { return ConnectionCallbacks::qlog_write; }

}  // namespace petrel::quic
