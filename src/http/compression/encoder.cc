#include "http/compression/encoder.h"

#include <brotli/encode.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace petrel::http_internal {
namespace {

// Output grows by at least this much per library call.
constexpr size_t kOutputStep = 16 * 1024;

// The smallest window of at least `size` bytes, within [low, high] bits (high when unknown).
int WindowBitsFor(uint64_t size, int low, int high) {
  if (size == 0) return high;
  int bits = low;
  while (bits < high && (uint64_t{1} << bits) < size) ++bits;
  return bits;
}

// Room for at least `want` more bytes at the end of `*out`; returns where it starts. The string
// is shrunk back to what was written by the caller.
char* Grow(std::string* out, size_t used, size_t want) {
  out->resize(used + want);
  return out->data() + used;
}

class GzipEncoder final : public Encoder {
 public:
  GzipEncoder(int level, uint64_t size_hint)
      : level_(std::clamp(level, 1, 9)), window_bits_(WindowBitsFor(size_hint, 9, 15)) {}
  ~GzipEncoder() override {
    if (initialized_) deflateEnd(&stream_);
  }

  bool Init() {
    // + 16: the gzip header and trailer. A 32 KiB window (15 bits) with zlib's default memLevel 8
    // is 256 KiB of state; a smaller body gets a window to fit and the hash table to match.
    const int mem_level = std::clamp(window_bits_ - 7, 1, 8);
    initialized_ = deflateInit2(&stream_, level_, Z_DEFLATED, window_bits_ + 16, mem_level,
                                Z_DEFAULT_STRATEGY) == Z_OK;
    return initialized_;
  }

  absl::Status Encode(absl::string_view input, Flush flush, std::string* out) override {
    if (finished_) return absl::FailedPreconditionError("gzip: body already finished");
    const int mode = flush == Flush::kFinish ? Z_FINISH
                     : flush == Flush::kSync ? Z_SYNC_FLUSH
                                             : Z_NO_FLUSH;
    stream_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(input.data()));
    stream_.avail_in = static_cast<uInt>(input.size());
    size_t used = out->size();
    for (;;) {
      const size_t room = std::max(kOutputStep, static_cast<size_t>(stream_.avail_in) / 2);
      stream_.next_out = reinterpret_cast<Bytef*>(Grow(out, used, room));
      stream_.avail_out = static_cast<uInt>(room);
      const int rc = deflate(&stream_, mode);
      used += room - stream_.avail_out;
      out->resize(used);
      if (rc == Z_STREAM_END) {
        finished_ = true;
        return absl::OkStatus();
      }
      if (rc != Z_OK && rc != Z_BUF_ERROR) {
        return absl::InternalError(absl::StrCat("gzip: deflate failed (", rc, ")"));
      }
      // Done when the input is consumed and deflate did not fill the output (it would have more
      // to say); Z_FINISH goes on until Z_STREAM_END.
      if (stream_.avail_in == 0 && stream_.avail_out != 0 && mode != Z_FINISH) {
        return absl::OkStatus();
      }
    }
  }

 private:
  const int level_;
  const int window_bits_;
  z_stream stream_{};
  bool initialized_ = false;
  bool finished_ = false;
};

class BrotliEncoder final : public Encoder {
 public:
  BrotliEncoder() : state_(BrotliEncoderCreateInstance(nullptr, nullptr, nullptr)) {}
  ~BrotliEncoder() override {
    if (state_ != nullptr) BrotliEncoderDestroyInstance(state_);
  }

  bool Init(const EncoderSettings& settings, uint64_t size_hint) {
    if (state_ == nullptr) return false;
    const int max_window =
        std::clamp(settings.brotli_window_bits, BROTLI_MIN_WINDOW_BITS, BROTLI_MAX_WINDOW_BITS);
    BrotliEncoderSetParameter(
        state_, BROTLI_PARAM_QUALITY,
        static_cast<uint32_t>(
            std::clamp(settings.brotli_quality, BROTLI_MIN_QUALITY, BROTLI_MAX_QUALITY)));
    // The window stays as configured: measured on a 4 KiB body, a window cut to fit made
    // quality 5 slower (32 against 27 µs), not faster as deflate's does. Brotli sizes its ring
    // buffer from the hint by itself.
    BrotliEncoderSetParameter(state_, BROTLI_PARAM_LGWIN, static_cast<uint32_t>(max_window));
    if (size_hint > 0 && size_hint <= (uint64_t{1} << 30)) {
      BrotliEncoderSetParameter(state_, BROTLI_PARAM_SIZE_HINT, static_cast<uint32_t>(size_hint));
    }
    // Input blocks of 64 KiB: the encoder emits (and the producer pulls more) at least that
    // often, whatever the window.
    BrotliEncoderSetParameter(state_, BROTLI_PARAM_LGBLOCK, 16);
    return true;
  }

  absl::Status Encode(absl::string_view input, Flush flush, std::string* out) override {
    if (BrotliEncoderIsFinished(state_)) {
      return absl::FailedPreconditionError("brotli: body already finished");
    }
    const BrotliEncoderOperation op = flush == Flush::kFinish ? BROTLI_OPERATION_FINISH
                                      : flush == Flush::kSync ? BROTLI_OPERATION_FLUSH
                                                              : BROTLI_OPERATION_PROCESS;
    size_t available_in = input.size();
    const uint8_t* next_in = reinterpret_cast<const uint8_t*>(input.data());
    size_t used = out->size();
    for (;;) {
      const size_t room = std::max(kOutputStep, available_in / 2);
      uint8_t* next_out = reinterpret_cast<uint8_t*>(Grow(out, used, room));
      size_t available_out = room;
      const bool ok = BrotliEncoderCompressStream(state_, op, &available_in, &next_in,
                                                  &available_out, &next_out, nullptr);
      used += room - available_out;
      out->resize(used);
      if (!ok) return absl::InternalError("brotli: compression failed");
      const bool more = BrotliEncoderHasMoreOutput(state_);
      if (op == BROTLI_OPERATION_FINISH) {
        if (BrotliEncoderIsFinished(state_)) return absl::OkStatus();
      } else if (available_in == 0 && !more) {
        return absl::OkStatus();
      }
    }
  }

 private:
  BrotliEncoderState* state_;
};

}  // namespace

std::unique_ptr<Encoder> Encoder::Make(ContentCoding coding, const EncoderSettings& settings,
                                       uint64_t size_hint) {
  switch (coding) {
    case ContentCoding::kGzip: {
      auto gzip = std::make_unique<GzipEncoder>(settings.gzip_level, size_hint);
      if (!gzip->Init()) return nullptr;
      return gzip;
    }
    case ContentCoding::kBrotli: {
      auto brotli = std::make_unique<BrotliEncoder>();
      if (!brotli->Init(settings, size_hint)) return nullptr;
      return brotli;
    }
    case ContentCoding::kIdentity:
      break;
  }
  return nullptr;
}

absl::Status EncodeAll(Encoder& encoder, absl::string_view input, std::string* out) {
  return encoder.Encode(input, Encoder::Flush::kFinish, out);
}

}  // namespace petrel::http_internal
