#include "http/compression/compressing_producer.h"

#include <algorithm>
#include <utility>

namespace petrel::http_internal {

CompressingProducer::CompressingProducer(std::unique_ptr<BodyProducer> inner,
                                         std::unique_ptr<Encoder> encoder)
    : inner_(std::move(inner)), encoder_(std::move(encoder)) {
  // The wrapped body wakes the engine through this producer: the engine is parked here
  // exactly when this producer is parked on the wrapped one.
  inner_->SetResumeCallback([this] { NotifyResume(); });
}

CompressingProducer::~CompressingProducer() = default;

BodyReadResult CompressingProducer::DoRead(size_t max_bytes, std::string* out) {
  for (;;) {
    if (output_head_ < output_.size()) {
      const size_t n = std::min(max_bytes, output_.size() - output_head_);
      out->append(output_, output_head_, n);
      output_head_ += n;
      if (output_head_ == output_.size()) {
        output_.clear();
        output_head_ = 0;
        if (finished_) return BodyReadResult::End();
      }
      return BodyReadResult::Data();
    }
    if (finished_) return BodyReadResult::End();

    input_.clear();
    BodyReadResult read = inner_->Read(kInputChunk, &input_);
    Encoder::Flush flush = Encoder::Flush::kNone;
    switch (read.status) {
      case BodyReadStatus::kError:
        return read;
      case BodyReadStatus::kWouldBlock:
        // The body pauses: what it wrote so far goes out now, decodable, rather than waiting in
        // the encoder for bytes that may come much later (event streams, progress output).
        if (!unflushed_) return read;
        flush = Encoder::Flush::kSync;
        break;
      case BodyReadStatus::kEnd:
        flush = Encoder::Flush::kFinish;
        break;
      case BodyReadStatus::kData:
        break;
    }
    if (absl::Status s = encoder_->Encode(input_, flush, &output_); !s.ok()) {
      return BodyReadResult::Error(std::move(s));
    }
    unflushed_ = flush == Encoder::Flush::kNone;
    if (flush == Encoder::Flush::kFinish) finished_ = true;
    if (read.status == BodyReadStatus::kWouldBlock && output_.empty()) {
      return BodyReadResult::WouldBlock();
    }
  }
}

}  // namespace petrel::http_internal
