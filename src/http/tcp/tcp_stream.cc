#include "http/tcp/tcp_stream.h"

#include <errno.h>
#include <openssl/err.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "http/tcp/socket_bio.h"

namespace petrel::http {
namespace {

constexpr size_t kReadChunk = 64 * 1024;
// One TLS record at most per SSL_write, so a partial write never splits application data
// unpredictably and WANT_WRITE retries resend exactly the same bytes.
constexpr size_t kTlsWriteChunk = 16 * 1024;

}  // namespace

absl::StatusOr<std::unique_ptr<TcpStream>> TcpStream::Create(EventLoop* loop, int fd,
                                                             const SocketAddress& peer,
                                                             const SocketAddress& local,
                                                             bssl::UniquePtr<SSL> ssl,
                                                             const TcpStreamOptions& options) {
  loop->AssertInLoopThread();
  auto s =
      std::unique_ptr<TcpStream>(new TcpStream(loop, fd, peer, local, std::move(ssl), options));
  if (SSL* tls = s->ssl_.get()) {
    BIO* bio = NewSocketBio(fd, &s->io_);
    if (bio == nullptr) return absl::InternalError("cannot create the socket BIO");
    SSL_set_bio(tls, bio, bio);  // the SSL owns the BIO (one reference for both ends)
    // A write that returned WANT_WRITE is retried from the output buffer, which may have moved
    // (grown or compacted) by then; BoringSSL refuses that retry (BAD_WRITE_RETRY) without it.
    SSL_set_mode(tls, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  }
  if (absl::Status st = loop->Register(fd, EventLoop::kReadable, s.get()); !st.ok()) {
    return st;  // the destructor closes fd
  }
  return s;
}

TcpStream::TcpStream(EventLoop* loop, int fd, const SocketAddress& peer, const SocketAddress& local,
                     bssl::UniquePtr<SSL> ssl, const TcpStreamOptions& options)
    : loop_(loop),
      fd_(fd),
      peer_(peer),
      local_(local),
      ssl_(std::move(ssl)),
      options_(options),
      linger_timer_(loop, [this] { Close(absl::OkStatus()); }),
      tls_pending_timer_(loop, [this] {
        if (state_ != State::kClosed && !reading_paused_) ReadSome();
        ReportBytes();
      }) {
  handshake_done_ = ssl_ == nullptr;
}

TcpStream::~TcpStream() {
  if (fd_ >= 0) {
    loop_->Unregister(fd_);
    close(fd_);
  }
}

size_t TcpStream::pending_output() const { return output_.ReadableBytes() + file_remaining_; }

uint64_t TcpStream::bytes_received() const {
  if (!ssl_) return clear_received_;
  // What the session read from the BIO, plus what the BIO read ahead from the socket.
  BIO* bio = SSL_get_rbio(ssl_.get());
  return BIO_number_read(bio) + SocketBioBuffered(bio);
}

uint64_t TcpStream::bytes_sent() const {
  return ssl_ ? BIO_number_written(SSL_get_wbio(ssl_.get())) : clear_sent_;
}

void TcpStream::set_byte_counters(Counter* received, Counter* sent) {
  received_counter_ = received;
  sent_counter_ = sent;
  ReportBytes();
}

void TcpStream::ReportBytes() {
  if (received_counter_ == nullptr) return;
  const uint64_t received = bytes_received();
  const uint64_t sent = bytes_sent();
  if (received != reported_received_) received_counter_->Inc(received - reported_received_);
  if (sent != reported_sent_) sent_counter_->Inc(sent - reported_sent_);
  reported_received_ = received;
  reported_sent_ = sent;
}

std::optional<size_t> TcpStream::SendDirect(absl::string_view bytes) {
  ssize_t n;
  do {
    ++io_.writes;
    n = send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n >= 0) {
    clear_sent_ += static_cast<size_t>(n);
    return static_cast<size_t>(n);
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
  Close(absl::ErrnoToStatus(errno, "send"));
  return std::nullopt;
}

bool TcpStream::Write(absl::string_view bytes) {
  if (state_ == State::kClosed || state_ == State::kLingering) return false;
  const bool flush_now = (loop_->interest(fd_) & EventLoop::kWritable) == 0 && handshake_done_;
  if (flush_now && !ssl_ && output_.empty() && file_remaining_ == 0 && !bytes.empty()) {
    // Nothing waits before these bytes: send them from the caller's memory and keep only what
    // the socket did not take (usually nothing).
    const std::optional<size_t> sent =
        SendDirect(bytes.substr(0, std::min(bytes.size(), options_.max_bytes_per_event)));
    if (!sent.has_value()) return false;
    bytes.remove_prefix(*sent);
    output_.Append(bytes);
  } else {
    output_.Append(bytes);
    // Send now unless we already wait for EPOLLOUT (then the loop flushes in order).
    if (flush_now) FlushSome();
  }
  ReportBytes();
  if (state_ == State::kClosed) return false;
  const bool below = pending_output() <= options_.high_water;
  if (!below) blocked_ = true;
  UpdateInterest();
  return below;
}

bool TcpStream::SendFile(int file_fd, off_t offset, size_t length) {
  if (ssl_ || state_ != State::kOpen || file_remaining_ != 0) return false;
  file_fd_ = file_fd;
  file_offset_ = offset;
  file_remaining_ = length;
  blocked_ = true;  // OnWritable() tells when the file is out
  if ((loop_->interest(fd_) & EventLoop::kWritable) == 0) FlushSome();
  ReportBytes();
  UpdateInterest();
  return true;
}

void TcpStream::PauseReading() {
  reading_paused_ = true;
  UpdateInterest();
}

void TcpStream::ResumeReading() {
  reading_paused_ = false;
  UpdateInterest();
  // Bytes already buffered (ours, or plaintext inside the TLS session) would otherwise wait
  // for the next packet, which may never come.
  if (state_ != State::kOpen || handler_ == nullptr) return;
  if (ssl_ && handshake_done_ && TlsBuffered()) {
    ReadSome();
    ReportBytes();
  } else if (!input_.empty()) {
    handler_->OnReadable(input_);
  }
}

void TcpStream::ShutdownAfterFlush() {
  if (state_ != State::kOpen) return;
  state_ = State::kFlushThenShutdown;
  if (pending_output() == 0) {
    StartLinger();  // under TLS: close_notify goes out
    ReportBytes();
  } else {
    UpdateInterest();
  }
}

void TcpStream::StartLinger() {
  if (ssl_ && handshake_done_) SSL_shutdown(ssl_.get());  // close_notify; the reply is not awaited
  shutdown(fd_, SHUT_WR);
  state_ = State::kLingering;
  reading_paused_ = false;
  linger_timer_.StartAfter(options_.linger);
  UpdateInterest();
}

void TcpStream::Close(const absl::Status& reason) {
  if (state_ == State::kClosed) return;
  state_ = State::kClosed;
  ReportBytes();
  linger_timer_.Cancel();
  loop_->Unregister(fd_);
  close(fd_);
  fd_ = -1;
  if (handler_ != nullptr) handler_->OnClosed(reason);
}

void TcpStream::UpdateInterest() {
  if (state_ == State::kClosed) return;
  uint32_t interest = 0;
  if (!reading_paused_ || !handshake_done_) interest |= EventLoop::kReadable;
  if (pending_output() > 0 || tls_wants_write_) interest |= EventLoop::kWritable;
  // Most calls change nothing: the loop's cached mask answers without a SetInterest round trip.
  if (loop_->interest(fd_) == interest) return;
  (void)loop_->SetInterest(fd_, interest);
}

bool TcpStream::TlsBuffered() const {
  return SSL_pending(ssl_.get()) > 0 || SocketBioBuffered(SSL_get_rbio(ssl_.get())) > 0;
}

bool TcpStream::HandleTlsResult(int ret, bool reading) {
  const int err = SSL_get_error(ssl_.get(), ret);
  tls_wants_write_ = err == SSL_ERROR_WANT_WRITE;
  if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return true;
  if (reading && err == SSL_ERROR_ZERO_RETURN) {
    peer_finished_ = true;
    return false;
  }
  char buf[160] = "connection error";
  if (uint32_t e = ERR_get_error(); e != 0) ERR_error_string_n(e, buf, sizeof(buf));
  ERR_clear_error();
  if (err == SSL_ERROR_SYSCALL && errno == 0) {
    peer_finished_ = true;  // EOF without close_notify
    return false;
  }
  Close(absl::UnavailableError(absl::StrCat("TLS: ", buf)));
  return false;
}

void TcpStream::DoHandshake() {
  ERR_clear_error();
  const int r = SSL_do_handshake(ssl_.get());
  if (r == 1) {
    handshake_done_ = true;
    tls_wants_write_ = false;
    if (handler_ != nullptr) handler_->OnHandshakeDone();
    return;
  }
  if (!HandleTlsResult(r, /*reading=*/false) && state_ != State::kClosed) {
    Close(absl::UnavailableError("TLS handshake: peer closed"));
  }
}

void TcpStream::ReadSome() {
  size_t budget = options_.max_bytes_per_event;
  size_t got_total = 0;
  bool drained = false;  // cleartext: a read came back short; the socket has nothing more now
  while (budget > 0 && state_ != State::kClosed && !peer_finished_ && !drained) {
    if (reading_paused_ && state_ != State::kLingering) break;
    size_t got = 0;
    if (ssl_) {
      char* tail = input_.WritableTail(kReadChunk);
      ERR_clear_error();
      const int r = SSL_read(ssl_.get(), tail, static_cast<int>(std::min(kReadChunk, budget)));
      if (r <= 0) {
        // WANT_READ: the socket BIO found the socket drained; the next event resumes.
        HandleTlsResult(r, /*reading=*/true);
        break;
      }
      input_.CommitWrite(static_cast<size_t>(r));
      got = static_cast<size_t>(r);
    } else {
      const size_t want = std::min(kReadChunk, budget);
      ++io_.reads;
      auto n = input_.ReadFromFd(fd_, want);
      if (!n.ok()) {
        if (absl::IsUnavailable(n.status())) break;  // EAGAIN
        Close(n.status());
        return;
      }
      if (*n == 0) {
        peer_finished_ = true;
        break;
      }
      got = *n;
      clear_received_ += got;
      drained = got < want;
    }
    got_total += got;
    budget -= std::min(budget, got);
    if (state_ == State::kLingering) input_.ConsumeAll();  // discarded: we only wait for EOF
  }
  if (state_ == State::kClosed) return;
  if (state_ == State::kLingering) {
    if (peer_finished_) Close(absl::OkStatus());
    return;
  }
  if (got_total > 0 && handler_ != nullptr) handler_->OnReadable(input_);
  if (ssl_ && state_ == State::kOpen && !peer_finished_ && !reading_paused_ && TlsBuffered()) {
    tls_pending_timer_.StartAt(loop_->now());  // the budget ran out: go on next turn
  }
  if (peer_finished_ && state_ != State::kClosed) {
    if (handler_ != nullptr) handler_->OnPeerFinished();
    // Nothing more will arrive: stop watching for reads (EOF stays readable forever).
    reading_paused_ = true;
  }
}

bool TcpStream::FlushFile(size_t* budget) {
  while (file_remaining_ > 0 && *budget > 0) {
    ++io_.writes;
    const ssize_t n = sendfile(fd_, file_fd_, &file_offset_, std::min(file_remaining_, *budget));
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return true;
      Close(absl::ErrnoToStatus(errno, "sendfile"));
      return false;
    }
    if (n == 0) {  // the file shrank under us
      Close(absl::DataLossError("file ended before its announced length"));
      return false;
    }
    clear_sent_ += static_cast<size_t>(n);
    file_remaining_ -= static_cast<size_t>(n);
    *budget -= std::min(*budget, static_cast<size_t>(n));
  }
  return true;
}

void TcpStream::FlushSome() {
  size_t budget = options_.max_bytes_per_event;
  while (!output_.empty() && budget > 0 && state_ != State::kClosed) {
    if (ssl_) {
      const size_t len = std::min({output_.ReadableBytes(), kTlsWriteChunk, budget});
      ERR_clear_error();
      const int r = SSL_write(ssl_.get(), output_.data(), static_cast<int>(len));
      if (r <= 0) {
        HandleTlsResult(r, /*reading=*/false);
        return;
      }
      tls_wants_write_ = false;
      output_.Consume(static_cast<size_t>(r));
      budget -= std::min(budget, static_cast<size_t>(r));
    } else {
      ++io_.writes;
      auto n = output_.WriteToFd(fd_, budget);
      if (!n.ok()) {
        if (absl::IsUnavailable(n.status())) return;  // EAGAIN
        Close(n.status());
        return;
      }
      if (*n == 0) return;
      clear_sent_ += *n;
      budget -= std::min(budget, *n);
    }
  }
  if (output_.empty() && !FlushFile(&budget)) return;
  if (pending_output() == 0 && state_ != State::kClosed) {
    if (state_ == State::kFlushThenShutdown) {
      StartLinger();
    } else if (blocked_) {
      blocked_ = false;
      if (handler_ != nullptr) handler_->OnWritable();
    }
  }
}

void TcpStream::OnIoEvent(uint32_t events) {
  if (state_ == State::kClosed) return;
  const bool readable = (events & (EventLoop::kReadable | EventLoop::kError)) != 0;
  if (ssl_ && readable) SocketBioArmRead(SSL_get_rbio(ssl_.get()));
  if (!handshake_done_) {
    DoHandshake();
    if (state_ == State::kClosed || !handshake_done_) {
      ReportBytes();
      UpdateInterest();
      return;
    }
  }
  if ((events & EventLoop::kWritable) != 0 || tls_wants_write_) FlushSome();
  // Under TLS, bytes that came in with the handshake may already wait in the BIO.
  if ((readable || (ssl_ && TlsBuffered())) && state_ != State::kClosed) ReadSome();
  ReportBytes();
  UpdateInterest();
}

}  // namespace petrel::http
