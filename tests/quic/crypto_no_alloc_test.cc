// The per-packet crypto callbacks (Encrypt, Decrypt, HpMask) allocate nothing: every
// BoringSSL allocation (through its OPENSSL_memory_* hooks, which this binary defines) and
// every C++ allocation is counted around them, for each cipher suite. Context creation, which
// happens once per key, is shown to allocate, so the counters are known to work.
#include <malloc.h>
#include <ngtcp2/ngtcp2.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "gtest/gtest.h"
#include "quic/crypto/aead.h"
#include "quic/crypto/cipher_suite.h"
#include "quic/crypto/header_protection.h"
#include "quic/crypto/ngtcp2_callbacks.h"

namespace {
std::atomic<size_t> g_allocations{0};
}  // namespace

// BoringSSL calls these instead of malloc/free when the program defines them.
extern "C" {
void* OPENSSL_memory_alloc(size_t size) {
  ++g_allocations;
  return malloc(size);
}
void OPENSSL_memory_free(void* ptr) { free(ptr); }
size_t OPENSSL_memory_get_size(void* ptr) { return malloc_usable_size(ptr); }
}

// Out of line so that GCC does not pair the inlined free() with operator new and warn.
__attribute__((noinline)) void ReleaseMemory(void* ptr) { free(ptr); }

void* operator new(size_t size) {
  ++g_allocations;
  if (void* p = malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* ptr) noexcept { ReleaseMemory(ptr); }
void operator delete(void* ptr, size_t /*size*/) noexcept { ReleaseMemory(ptr); }

namespace petrel::quic::crypto {
namespace {

class NoAllocationTest : public ::testing::TestWithParam<uint16_t> {};

TEST_P(NoAllocationTest, EncryptDecryptAndHpMaskDoNotAllocate) {
  const CipherSuite* suite = FindCipherSuite(GetParam());
  ASSERT_NE(suite, nullptr);
  const std::vector<uint8_t> key(suite->key_len, 0x42);
  const std::vector<uint8_t> hp_key(suite->hp->key_len, 0x24);

  const size_t before_setup = g_allocations.load();
  AeadContextPtr aead = NewAeadContext(*suite, key);
  std::unique_ptr<HeaderProtectionContext> hp = HeaderProtectionContext::Create(*suite->hp, hp_key);
  ASSERT_NE(aead, nullptr);
  ASSERT_NE(hp, nullptr);
  EXPECT_GT(g_allocations.load(), before_setup) << "allocation counting is not hooked up";

  ngtcp2_crypto_ctx ctx;
  FillCryptoCtx(*suite, &ctx);
  const ngtcp2_crypto_aead_ctx aead_ctx{aead.get()};
  const ngtcp2_crypto_cipher_ctx hp_ctx{hp.get()};
  std::vector<uint8_t> packet(1400, 0x17);
  const size_t payload_len = packet.size() - 30 - ctx.aead.max_overhead;
  uint8_t* header = packet.data();
  uint8_t* payload = packet.data() + 30;
  uint8_t nonce[kAeadNonceLen] = {};
  uint8_t mask[NGTCP2_HP_SAMPLELEN];

  // BoringSSL allocates a thread's error state on the first error it records; a forged packet
  // is such an error, so take that one-time cost before counting.
  uint8_t junk[64] = {};
  EXPECT_EQ(
      Decrypt(junk, &ctx.aead, &aead_ctx, junk, sizeof(junk), nonce, sizeof(nonce), header, 30),
      NGTCP2_ERR_DECRYPT);

  const size_t before = g_allocations.load();
  for (uint64_t pn = 0; pn < 200; ++pn) {
    nonce[kAeadNonceLen - 1] = static_cast<uint8_t>(pn);
    ASSERT_EQ(Encrypt(payload, &ctx.aead, &aead_ctx, payload, payload_len, nonce, sizeof(nonce),
                      header, 30),
              0);
    ASSERT_EQ(HpMask(mask, &ctx.hp, &hp_ctx, payload), 0);
    ASSERT_EQ(Decrypt(payload, &ctx.aead, &aead_ctx, payload, payload_len + ctx.aead.max_overhead,
                      nonce, sizeof(nonce), header, 30),
              0);
  }
  // The failure path too: a forged packet (Decrypt clears BoringSSL's error queue again).
  payload[0] ^= 1;
  EXPECT_EQ(Decrypt(payload, &ctx.aead, &aead_ctx, payload, payload_len + ctx.aead.max_overhead,
                    nonce, sizeof(nonce), header, 30),
            NGTCP2_ERR_DECRYPT);
  EXPECT_EQ(g_allocations.load(), before);
}

INSTANTIATE_TEST_SUITE_P(Suites, NoAllocationTest,
                         ::testing::Values(kTlsAes128GcmSha256, kTlsAes256GcmSha384,
                                           kTlsChaCha20Poly1305Sha256));

}  // namespace
}  // namespace petrel::quic::crypto
