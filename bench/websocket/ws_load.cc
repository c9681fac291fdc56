// petrel-ws-load: WebSocket echo load for bench/websocket/run.sh. C connections each keep W
// binary messages of S bytes in flight (one more is sent on each echo) until N messages have
// been echoed in total; prints one line of key=value results.
//
//   h1: RFC 6455 over plain TCP, driven by raw epoll. Frames are built once (fixed mask key: a
//       load generator needs no unpredictable mask) so the client costs little and shares no
//       code with the server.
//   h2: RFC 8441 extended CONNECT over h2c (prior knowledge) through libnghttp2's client
//       session, on the same epoll loop.
//   h3: RFC 9220 through Petrel's own WebSocketClient over Http3Client (QUIC with TLS), every
//       connection on one shared EventLoop.
//
// Each echo is parsed (header, FIN, opcode, length) and every 16th payload is compared byte for
// byte with what was sent, so a server that drops, truncates or garbles cannot look fast.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "petrel/common/event_loop.h"
#include "petrel/common/socket_address.h"
#include "petrel/common/timer.h"
#include "petrel/http/http3_client.h"
#include "petrel/http/websocket_client.h"

namespace {

struct Options {
  std::string proto = "h1";
  std::string host = "127.0.0.1";
  int port = 0;
  std::string path = "/ws";
  int conns = 1;
  int window = 1;
  size_t size = 32;
  uint64_t messages = 1000;
  double timeout = 60;
};

Options g_opt;
std::string g_payload;   // what every message carries
std::string g_frame;     // g_payload as one masked client frame (h1, h2)
uint64_t g_to_send = 0;  // messages not yet sent, over all connections
uint64_t g_echoed = 0;
uint64_t g_errors = 0;
uint64_t g_checked = 0;  // payloads compared byte for byte
std::string g_first_error;
int g_open = 0;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double CpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

void Error(const std::string& what) {
  ++g_errors;
  if (g_first_error.empty()) g_first_error = what;
}

void BuildPayload() {
  g_payload.resize(g_opt.size);
  for (size_t i = 0; i < g_opt.size; ++i) g_payload[i] = static_cast<char>((i * 31 + 7) & 0xff);
  const uint8_t mask[4] = {0x37, 0xfa, 0x21, 0x3d};
  std::string& f = g_frame;
  f.push_back(static_cast<char>(0x82));  // FIN, binary
  size_t n = g_opt.size;
  if (n < 126) {
    f.push_back(static_cast<char>(0x80 | n));
  } else if (n < 65536) {
    f.push_back(static_cast<char>(0x80 | 126));
    f.push_back(static_cast<char>(n >> 8));
    f.push_back(static_cast<char>(n & 0xff));
  } else {
    f.push_back(static_cast<char>(0x80 | 127));
    for (int i = 7; i >= 0; --i) f.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  }
  f.append(reinterpret_cast<const char*>(mask), 4);
  for (size_t i = 0; i < n; ++i) f.push_back(static_cast<char>(g_payload[i] ^ mask[i % 4]));
}

// Parses the server's (unmasked) frames from a byte stream without copying payloads.
class EchoParser {
 public:
  // Returns the number of whole messages completed by `data`.
  int Feed(absl::string_view data) {
    int done = 0;
    while (!data.empty()) {
      if (remaining_ == 0 && !in_payload_) {
        size_t take = std::min(data.size(), NeedHeader() - hdr_len_);
        memcpy(hdr_ + hdr_len_, data.data(), take);
        hdr_len_ += take;
        data.remove_prefix(take);
        if (hdr_len_ < NeedHeader()) continue;
        StartPayload();
        if (remaining_ == 0) done += Finish();
        continue;
      }
      size_t take = std::min<uint64_t>(data.size(), remaining_);
      if (check_ && memcmp(data.data(), g_payload.data() + offset_, take) != 0) {
        Error("echoed bytes differ from those sent");
      }
      offset_ += take;
      remaining_ -= take;
      data.remove_prefix(take);
      if (remaining_ == 0) done += Finish();
    }
    return done;
  }

 private:
  size_t NeedHeader() const {
    if (hdr_len_ < 2) return 2;
    uint8_t len = hdr_[1] & 0x7f;
    size_t n = 2 + (len == 126 ? 2 : len == 127 ? 8 : 0) + ((hdr_[1] & 0x80) ? 4 : 0);
    return n;
  }
  void StartPayload() {
    uint8_t len = hdr_[1] & 0x7f;
    uint64_t n = len;
    if (len == 126) n = (uint64_t{hdr_[2]} << 8) | hdr_[3];
    if (len == 127) {
      n = 0;
      for (int i = 0; i < 8; ++i) n = (n << 8) | hdr_[2 + i];
    }
    if (hdr_[0] != 0x82) Error(absl::StrCat("echo frame byte 0 is ", int{hdr_[0]}, ", not 0x82"));
    if (hdr_[1] & 0x80) Error("echo frame is masked");
    if (n != g_opt.size) Error(absl::StrCat("echo of ", n, " bytes, sent ", g_opt.size));
    remaining_ = n;
    offset_ = 0;
    in_payload_ = true;
    check_ = (count_ % 16 == 0) && n == g_opt.size;
    if (check_) ++g_checked;
  }
  int Finish() {
    in_payload_ = false;
    hdr_len_ = 0;
    ++count_;
    return 1;
  }

  uint8_t hdr_[14] = {};
  size_t hdr_len_ = 0;
  uint64_t remaining_ = 0;
  uint64_t offset_ = 0;
  bool in_payload_ = false;
  bool check_ = false;
  uint64_t count_ = 0;
};

// ---- h1 and h2 over TCP, on raw epoll ----

class TcpConn {
 public:
  virtual ~TcpConn() {
    if (fd_ >= 0) close(fd_);
  }
  bool Connect(int epfd) {
    epfd_ = epfd;
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(g_opt.port));
    inet_pton(AF_INET, g_opt.host.c_str(), &sa.sin_addr);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 && errno != EINPROGRESS) {
      Error(absl::StrCat("connect: ", strerror(errno)));
      return false;
    }
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT;
    ev.data.ptr = this;
    epoll_ctl(epfd_, EPOLL_CTL_ADD, fd_, &ev);
    want_out_ = true;
    Start();
    return true;
  }
  void OnEvent(uint32_t events) {
    if (events & (EPOLLERR | EPOLLHUP)) {
      if (!dead_) Error("connection error or hang-up");
      Kill();
      return;
    }
    if (events & EPOLLIN) {
      char buf[256 * 1024];
      for (;;) {
        ssize_t r = read(fd_, buf, sizeof(buf));
        if (r > 0) {
          OnBytes(absl::string_view(buf, static_cast<size_t>(r)));
          if (dead_) return;
          if (static_cast<size_t>(r) < sizeof(buf)) break;
          continue;
        }
        if (r == 0) {
          Error("server closed the connection");
          Kill();
          return;
        }
        if (errno == EAGAIN) break;
        Error(absl::StrCat("read: ", strerror(errno)));
        Kill();
        return;
      }
    }
    Flush();
  }
  bool dead() const { return dead_; }

 protected:
  virtual void Start() = 0;
  virtual void OnBytes(absl::string_view data) = 0;
  virtual void Fill() {}  // moves more bytes into out_ before a write (h2)

  void Flush() {
    for (;;) {
      Fill();
      if (out_off_ == out_.size()) break;
      ssize_t w = write(fd_, out_.data() + out_off_, out_.size() - out_off_);
      if (w < 0) {
        if (errno != EAGAIN) {
          Error(absl::StrCat("write: ", strerror(errno)));
          Kill();
          return;
        }
        break;
      }
      out_off_ += static_cast<size_t>(w);
      if (out_off_ == out_.size()) {
        out_.clear();
        out_off_ = 0;
      }
    }
    bool want = out_off_ < out_.size();
    if (want != want_out_) {
      epoll_event ev{};
      ev.events = EPOLLIN | (want ? EPOLLOUT : 0u);
      ev.data.ptr = this;
      epoll_ctl(epfd_, EPOLL_CTL_MOD, fd_, &ev);
      want_out_ = want;
    }
  }
  void Kill() {
    if (dead_) return;
    dead_ = true;
    epoll_ctl(epfd_, EPOLL_CTL_DEL, fd_, nullptr);
  }

  int fd_ = -1;
  int epfd_ = -1;
  std::string out_;
  size_t out_off_ = 0;
  bool want_out_ = false;
  bool dead_ = false;
  EchoParser parser_;
};

class H1Conn final : public TcpConn {
 protected:
  void Start() override {
    out_ = absl::StrCat("GET ", g_opt.path, " HTTP/1.1\r\nHost: ", g_opt.host, ":", g_opt.port,
                        "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                        "Sec-WebSocket-Version: 13\r\n\r\n");
  }
  void OnBytes(absl::string_view data) override {
    if (!open_) {
      head_.append(data.data(), data.size());
      size_t end = head_.find("\r\n\r\n");
      if (end == std::string::npos) return;
      if (head_.compare(0, 12, "HTTP/1.1 101") != 0) {
        Error("upgrade refused: " + head_.substr(0, head_.find('\r')));
        Kill();
        return;
      }
      if (head_.find("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=") == std::string::npos) {
        Error("wrong Sec-WebSocket-Accept");
      }
      open_ = true;
      ++g_open;
      std::string rest = head_.substr(end + 4);
      head_.clear();
      for (int i = 0; i < g_opt.window && g_to_send > 0; ++i) SendOne();
      if (!rest.empty()) OnBytes(rest);
      return;
    }
    int done = parser_.Feed(data);
    g_echoed += static_cast<uint64_t>(done);
    for (int i = 0; i < done && g_to_send > 0; ++i) SendOne();
  }

 private:
  void SendOne() {
    --g_to_send;
    out_.append(g_frame);
  }
  bool open_ = false;
  std::string head_;
};

class H2Conn final : public TcpConn {
 public:
  ~H2Conn() override {
    if (session_ != nullptr) nghttp2_session_del(session_);
  }

 protected:
  void Start() override {
    nghttp2_session_callbacks* cb;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, &H2Conn::OnFrame);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, &H2Conn::OnData);
    nghttp2_session_callbacks_set_on_header_callback(cb, &H2Conn::OnHeader);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, &H2Conn::OnClose);
    nghttp2_session_client_new(&session_, cb, this);
    nghttp2_session_callbacks_del(cb);
    // Windows large enough that flow control never paces the echo.
    nghttp2_settings_entry s[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                  {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 16 << 20}};
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, s, 2);
    nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, 64 << 20);
  }
  void Fill() override {
    if (dead_ || session_ == nullptr) return;
    // Only as much as the socket will likely take, so that data the server has not read yet
    // waits here and its window updates pace us.
    while (out_.size() - out_off_ < (1 << 20)) {
      const uint8_t* p;
      ssize_t n = nghttp2_session_mem_send(session_, &p);
      if (n < 0) {
        Error(absl::StrCat("nghttp2 send: ", nghttp2_strerror(static_cast<int>(n))));
        Kill();
        return;
      }
      if (n == 0) break;
      out_.append(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
    }
  }
  void OnBytes(absl::string_view data) override {
    ssize_t r = nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(data.data()),
                                         data.size());
    if (r < 0) {
      Error(absl::StrCat("nghttp2 recv: ", nghttp2_strerror(static_cast<int>(r))));
      Kill();
    }
  }

 private:
  static int OnFrame(nghttp2_session* s, const nghttp2_frame* f, void* user) {
    auto* c = static_cast<H2Conn*>(user);
    if (f->hd.type == NGHTTP2_SETTINGS && !(f->hd.flags & NGHTTP2_FLAG_ACK) && c->stream_ == 0) {
      if (nghttp2_session_get_remote_settings(s, NGHTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL) != 1) {
        Error("server did not send SETTINGS_ENABLE_CONNECT_PROTOCOL");
        c->Kill();
        return 0;
      }
      c->Submit();
    }
    if (f->hd.type == NGHTTP2_HEADERS && f->hd.stream_id == c->stream_ && !c->open_) {
      if (c->status_ != 200) {
        Error(absl::StrCat("extended CONNECT answered ", c->status_));
        c->Kill();
        return 0;
      }
      c->open_ = true;
      ++g_open;
      for (int i = 0; i < g_opt.window && g_to_send > 0; ++i) c->SendOne();
    }
    return 0;
  }
  static int OnHeader(nghttp2_session*, const nghttp2_frame* f, const uint8_t* name, size_t nlen,
                      const uint8_t* value, size_t vlen, uint8_t, void* user) {
    auto* c = static_cast<H2Conn*>(user);
    if (f->hd.stream_id == c->stream_ && nlen == 7 && memcmp(name, ":status", 7) == 0) {
      c->status_ = atoi(std::string(reinterpret_cast<const char*>(value), vlen).c_str());
    }
    return 0;
  }
  static int OnData(nghttp2_session*, uint8_t, int32_t stream, const uint8_t* data, size_t len,
                    void* user) {
    auto* c = static_cast<H2Conn*>(user);
    if (stream != c->stream_) return 0;
    int done = c->parser_.Feed(absl::string_view(reinterpret_cast<const char*>(data), len));
    g_echoed += static_cast<uint64_t>(done);
    for (int i = 0; i < done && g_to_send > 0; ++i) c->SendOne();
    return 0;
  }
  static int OnClose(nghttp2_session*, int32_t stream, uint32_t code, void* user) {
    auto* c = static_cast<H2Conn*>(user);
    if (stream == c->stream_) Error(absl::StrCat("stream closed, error code ", code));
    return 0;
  }
  static ssize_t Read(nghttp2_session*, int32_t, uint8_t* buf, size_t len, uint32_t* flags,
                      nghttp2_data_source* src, void*) {
    auto* c = static_cast<H2Conn*>(src->ptr);
    size_t avail = c->pending_.size() - c->pending_off_;
    if (avail == 0) {
      c->deferred_ = true;
      return NGHTTP2_ERR_DEFERRED;
    }
    size_t n = std::min(avail, len);
    memcpy(buf, c->pending_.data() + c->pending_off_, n);
    c->pending_off_ += n;
    if (c->pending_off_ == c->pending_.size()) {
      c->pending_.clear();
      c->pending_off_ = 0;
    }
    *flags = NGHTTP2_DATA_FLAG_NONE;
    return static_cast<ssize_t>(n);
  }
  void Submit() {
    std::string authority = absl::StrCat(g_opt.host, ":", g_opt.port);
    auto nv = [](const char* n, const std::string& v) {
      return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(n)),
                        reinterpret_cast<uint8_t*>(const_cast<char*>(v.data())), strlen(n),
                        v.size(), NGHTTP2_NV_FLAG_NONE};
    };
    std::string method = "CONNECT", protocol = "websocket", scheme = "http", version = "13";
    nghttp2_nv h[] = {nv(":method", method),       nv(":protocol", protocol),
                      nv(":scheme", scheme),       nv(":path", g_opt.path),
                      nv(":authority", authority), nv("sec-websocket-version", version)};
    nghttp2_data_provider dp;
    dp.source.ptr = this;
    dp.read_callback = &H2Conn::Read;
    stream_ = nghttp2_submit_request(session_, nullptr, h, 6, &dp, this);
    if (stream_ < 0) Error(absl::StrCat("submit: ", nghttp2_strerror(stream_)));
  }
  void SendOne() {
    --g_to_send;
    pending_.append(g_frame);
    if (deferred_) {
      deferred_ = false;
      nghttp2_session_resume_data(session_, stream_);
    }
  }

  nghttp2_session* session_ = nullptr;
  int32_t stream_ = 0;
  int status_ = 0;
  bool open_ = false;
  bool deferred_ = false;
  std::string pending_;
  size_t pending_off_ = 0;
};

bool RunTcp(double deadline) {
  int epfd = epoll_create1(0);
  std::vector<std::unique_ptr<TcpConn>> conns;
  for (int i = 0; i < g_opt.conns; ++i) {
    if (g_opt.proto == "h1") {
      conns.push_back(std::make_unique<H1Conn>());
    } else {
      conns.push_back(std::make_unique<H2Conn>());
    }
    if (!conns.back()->Connect(epfd)) return false;
  }
  epoll_event evs[256];
  while (g_echoed < g_opt.messages && Now() < deadline) {
    int n = epoll_wait(epfd, evs, 256, 100);
    for (int i = 0; i < n; ++i) static_cast<TcpConn*>(evs[i].data.ptr)->OnEvent(evs[i].events);
    bool any = false;
    for (auto& c : conns) any |= !c->dead();
    if (!any) break;
  }
  conns.clear();
  close(epfd);
  return true;
}

// ---- h3 through Petrel's client ----

struct H3Conn {
  std::unique_ptr<petrel::Http3Client> client;
  std::unique_ptr<petrel::WebSocketClient> ws;
  int checked_count = 0;
  uint64_t count = 0;
  std::vector<std::string> backlog;  // refused sends (send buffer full), retried on_writable
};

bool RunH3(double deadline) {
  petrel::EventLoop loop;
  std::vector<std::unique_ptr<H3Conn>> conns;
  auto send_one = [](H3Conn* c) {
    --g_to_send;
    if (!c->backlog.empty() || !c->ws->SendBinary(g_payload)) c->backlog.push_back(g_payload);
  };
  for (int i = 0; i < g_opt.conns; ++i) {
    auto c = std::make_unique<H3Conn>();
    H3Conn* cp = c.get();
    petrel::Http3ClientConfig config;
    absl::StatusOr<petrel::SocketAddress> addr =
        petrel::SocketAddress::Parse(g_opt.host, static_cast<uint16_t>(g_opt.port));
    if (!addr.ok()) {
      Error(addr.status().ToString());
      return false;
    }
    config.server = *addr;
    config.verify_peer = false;
    config.loop = &loop;
    absl::StatusOr<std::unique_ptr<petrel::Http3Client>> client =
        petrel::Http3Client::Create(std::move(config));
    if (!client.ok()) {
      Error(client.status().ToString());
      return false;
    }
    cp->client = *std::move(client);
    petrel::WebSocketClientOptions wo;
    wo.path = g_opt.path;
    wo.max_message = std::max<size_t>(wo.max_message, g_opt.size);
    wo.send_buffer = std::max<size_t>(wo.send_buffer, 2 * g_opt.size * g_opt.window);
    petrel::WebSocketClientCallbacks cb;
    cb.on_open = [cp, send_one](absl::Status s, absl::string_view) {
      if (!s.ok()) {
        Error("open: " + s.ToString());
        return;
      }
      ++g_open;
      for (int k = 0; k < g_opt.window && g_to_send > 0; ++k) send_one(cp);
    };
    cb.on_message = [cp, send_one, &loop](petrel::WebSocketMessageType type,
                                          absl::string_view data) {
      if (type != petrel::WebSocketMessageType::kBinary) Error("echo is not binary");
      if (data.size() != g_opt.size) {
        Error(absl::StrCat("echo of ", data.size(), " bytes, sent ", g_opt.size));
      }
      if (cp->count++ % 16 == 0) {
        ++g_checked;
        if (data != g_payload) Error("echoed bytes differ from those sent");
      }
      if (++g_echoed >= g_opt.messages) loop.Stop();
      if (g_to_send > 0) send_one(cp);
    };
    cb.on_writable = [cp] {
      size_t k = 0;
      while (k < cp->backlog.size() && cp->ws->SendBinary(cp->backlog[k])) ++k;
      cp->backlog.erase(cp->backlog.begin(), cp->backlog.begin() + static_cast<long>(k));
    };
    cb.on_close = [](uint16_t code, absl::string_view reason) {
      if (g_echoed < g_opt.messages) Error(absl::StrCat("closed ", code, " ", reason));
    };
    absl::StatusOr<std::unique_ptr<petrel::WebSocketClient>> ws =
        petrel::WebSocketClient::Open(*cp->client, std::move(wo), std::move(cb));
    if (!ws.ok()) {
      Error(ws.status().ToString());
      return false;
    }
    cp->ws = *std::move(ws);
    if (absl::Status s = cp->client->Connect(); !s.ok()) {
      Error(s.ToString());
      return false;
    }
    conns.push_back(std::move(c));
  }
  petrel::Timer give_up(&loop, [&loop] { loop.Stop(); });
  give_up.StartAfter(std::chrono::duration_cast<petrel::Duration>(
      std::chrono::duration<double>(deadline - Now())));
  loop.Run();
  give_up.Cancel();
  for (auto& c : conns) {
    c->ws.reset();
    c->client->Stop();
  }
  loop.RunOnce(std::chrono::milliseconds(50));
  conns.clear();
  return true;
}

[[noreturn]] void Usage() {
  fprintf(stderr,
          "usage: petrel-ws-load --proto h1|h2|h3 --port P [--host 127.0.0.1] [--path /ws]\n"
          "                      [-c CONNS] [-w WINDOW] [-s SIZE] [-n MESSAGES] [-t SECONDS]\n"
          "h1: ws:// over TCP; h2: h2c extended CONNECT (RFC 8441); h3: RFC 9220 over QUIC.\n"
          "Exit status 0 when N messages were echoed intact, 1 otherwise.\n");
  exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) Usage();
      return argv[++i];
    };
    if (a == "--proto") {
      g_opt.proto = next();
    } else if (a == "--host") {
      g_opt.host = next();
    } else if (a == "--port") {
      g_opt.port = atoi(next().c_str());
    } else if (a == "--path") {
      g_opt.path = next();
    } else if (a == "-c") {
      g_opt.conns = atoi(next().c_str());
    } else if (a == "-w") {
      g_opt.window = atoi(next().c_str());
    } else if (a == "-s") {
      g_opt.size = strtoull(next().c_str(), nullptr, 10);
    } else if (a == "-n") {
      g_opt.messages = strtoull(next().c_str(), nullptr, 10);
    } else if (a == "-t") {
      g_opt.timeout = atof(next().c_str());
    } else {
      Usage();
    }
  }
  if (g_opt.port <= 0 || g_opt.conns <= 0 || g_opt.window <= 0 || g_opt.messages == 0 ||
      (g_opt.proto != "h1" && g_opt.proto != "h2" && g_opt.proto != "h3")) {
    Usage();
  }
  BuildPayload();
  g_to_send = g_opt.messages;
  double cpu0 = CpuSeconds();
  double t0 = Now();
  bool ok = g_opt.proto == "h3" ? RunH3(t0 + g_opt.timeout) : RunTcp(t0 + g_opt.timeout);
  double secs = Now() - t0;
  double cpu = CpuSeconds() - cpu0;
  if (g_echoed < g_opt.messages) {
    Error(absl::StrCat("only ", g_echoed, " of ", g_opt.messages, " echoed"));
  }
  ok = ok && g_errors == 0;
  printf(
      "proto=%s conns=%d window=%d size=%zu messages=%llu open=%d seconds=%.3f msgs_per_s=%.0f "
      "MB_per_s=%.1f client_cpu_s=%.3f checked=%llu errors=%llu%s%s\n",
      g_opt.proto.c_str(), g_opt.conns, g_opt.window, g_opt.size,
      static_cast<unsigned long long>(g_echoed), g_open, secs, static_cast<double>(g_echoed) / secs,
      static_cast<double>(g_echoed) * static_cast<double>(g_opt.size) / secs / 1e6, cpu,
      static_cast<unsigned long long>(g_checked), static_cast<unsigned long long>(g_errors),
      g_first_error.empty() ? "" : " first_error=", g_first_error.c_str());
  return ok ? 0 : 1;
}
