// Internal: a response body compressed as it streams. It pulls the body it wraps only when the
// engine pulls it, one chunk at a time, so a large body is never held whole and the handler
// behind it feels the peer's pace exactly as without compression.
#ifndef PETREL_HTTP_COMPRESSION_COMPRESSING_PRODUCER_H_
#define PETREL_HTTP_COMPRESSION_COMPRESSING_PRODUCER_H_

#include <memory>
#include <string>

#include "http/compression/encoder.h"
#include "petrel/http/body.h"

namespace petrel::http_internal {

class CompressingProducer final : public BodyProducer {
 public:
  // Bytes pulled from the wrapped body per read.
  static constexpr size_t kInputChunk = 16 * 1024;

  CompressingProducer(std::unique_ptr<BodyProducer> inner, std::unique_ptr<Encoder> encoder);
  ~CompressingProducer() override;

  // The wrapped body's trailers.
  HeaderMap TakeTrailers() override { return inner_->TakeTrailers(); }

 private:
  BodyReadResult DoRead(size_t max_bytes, std::string* out) override;

  std::unique_ptr<BodyProducer> inner_;
  std::unique_ptr<Encoder> encoder_;
  std::string input_;       // the chunk just pulled
  std::string output_;      // compressed bytes not yet handed to the engine
  size_t output_head_ = 0;  // bytes of output_ already handed out
  bool unflushed_ = false;  // input went in since the last flush
  bool finished_ = false;   // the encoder wrote its trailer
};

}  // namespace petrel::http_internal

#endif  // PETREL_HTTP_COMPRESSION_COMPRESSING_PRODUCER_H_
