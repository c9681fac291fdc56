// RFC 9001 Appendix A and RFC 9369 Appendix A, byte for byte, through Petrel's crypto
// primitives and the ngtcp2 callbacks built on them; plus the negative cases.
#include <openssl/aes.h>
#include <openssl/digest.h>

#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "quic/crypto/aead.h"
#include "quic/crypto/cipher_suite.h"
#include "quic/crypto/header_protection.h"
#include "quic/crypto/hkdf.h"
#include "quic/crypto/ngtcp2_callbacks.h"
#include "quic/crypto/packet_keys.h"
#include "quic/crypto/retry.h"
#include "quic/crypto/version_params.h"
#include "quic/crypto_test_util.h"
#include "quic/packet/versions.h"

namespace petrel::quic::crypto {
namespace {

using testing::Hex;
using testing::MakeContexts;
using testing::ProtectionContexts;
using testing::ProtectPacket;
using testing::ToHex;
using testing::Unprotected;
using testing::UnprotectPacket;

constexpr char kDcid[] = "8394c8f03e515708";

// The CRYPTO frame of the client Initial, the same in both RFCs (A.2).
constexpr char kClientCryptoFrame[] =
    "060040f1010000ed0303ebf8fa56f129 39b9584a3896472ec40bb863cfd3e868"
    "04fe3a47f06a2b69484c000004130113 02010000c000000010000e00000b6578"
    "616d706c652e636f6dff01000100000a 00080006001d00170018001000070005"
    "04616c706e0005000501000000000033 00260024001d00209370b2c9caa47fba"
    "baf4559fedba753de171fa71f50f1ce1 5d43e994ec74d748002b000302030400"
    "0d0010000e0403050306030203080408 050806002d00020101001c0002400100"
    "3900320408ffffffffffffffff050480 00ffff07048000ffff08011001048000"
    "75300901100f088394c8f03e51570806 048000ffff";

// The server Initial payload (ACK + CRYPTO), the same in both RFCs (A.3).
constexpr char kServerPayload[] =
    "02000000000600405a020000560303ee fce7f7b37ba1d1632e96677825ddf739"
    "88cfc79825df566dc5430b9a045a1200 130100002e00330024001d00209d3c94"
    "0d89690b84d08a60993c144eca684d10 81287c834d5311bcf32bb9da1a002b00"
    "020304";

// Secret of the A.5 ChaCha20-Poly1305 short-header sample, the same in both RFCs.
constexpr char kChaChaSecret[] =
    "9ac312a7f877468ebe69422748ad00a1 5443f18203a07d6060f688f30f21632b";

// Everything one RFC's Appendix A states.
struct AppendixA {
  uint32_t version;
  const char* client_initial_secret;
  const char* client_key;
  const char* client_iv;
  const char* client_hp;
  const char* server_initial_secret;
  const char* server_key;
  const char* server_iv;
  const char* server_hp;
  const char* client_header;  // unprotected, packet number 2 in 4 octets
  const char* client_sample;
  const char* client_mask;
  const char* client_packet;  // protected, 1200 octets
  const char* server_header;  // unprotected, packet number 1 in 2 octets
  const char* server_sample;
  const char* server_mask;
  const char* server_packet;
  const char* retry_packet;
  const char* chacha_key;
  const char* chacha_iv;
  const char* chacha_hp;
  const char* chacha_ku;
  const char* chacha_nonce;
  const char* chacha_ciphertext;
  const char* chacha_sample;
  const char* chacha_mask;
  const char* chacha_packet;
};

const AppendixA kRfc9001 = {
    kVersion1,
    "c00cf151ca5be075ed0ebfb5c80323c4 2d6b7db67881289af4008f1f6c357aea",
    "1f369613dd76d5467730efcbe3b1a22d",
    "fa044b2f42a3fd3b46fb255c",
    "9f50449e04a0e810283a1e9933adedd2",
    "3c199828fd139efd216c155ad844cc81 fb82fa8d7446fa7d78be803acdda951b",
    "cf3a5331653c364c88f0f379b6067e37",
    "0ac1493ca1905853b0bba03e",
    "c206b8d9b9f0f37644430b490eeaa314",
    "c300000001088394c8f03e5157080000449e00000002",
    "d1b1c98dd7689fb8ec11d242b123dc9b",
    "437b9aec36",
    "c000000001088394c8f03e5157080000 449e7b9aec34d1b1c98dd7689fb8ec11"
    "d242b123dc9bd8bab936b47d92ec356c 0bab7df5976d27cd449f63300099f399"
    "1c260ec4c60d17b31f8429157bb35a12 82a643a8d2262cad67500cadb8e7378c"
    "8eb7539ec4d4905fed1bee1fc8aafba1 7c750e2c7ace01e6005f80fcb7df6212"
    "30c83711b39343fa028cea7f7fb5ff89 eac2308249a02252155e2347b63d58c5"
    "457afd84d05dfffdb20392844ae81215 4682e9cf012f9021a6f0be17ddd0c208"
    "4dce25ff9b06cde535d0f920a2db1bf3 62c23e596d11a4f5a6cf3948838a3aec"
    "4e15daf8500a6ef69ec4e3feb6b1d98e 610ac8b7ec3faf6ad760b7bad1db4ba3"
    "485e8a94dc250ae3fdb41ed15fb6a8e5 eba0fc3dd60bc8e30c5c4287e53805db"
    "059ae0648db2f64264ed5e39be2e20d8 2df566da8dd5998ccabdae053060ae6c"
    "7b4378e846d29f37ed7b4ea9ec5d82e7 961b7f25a9323851f681d582363aa5f8"
    "9937f5a67258bf63ad6f1a0b1d96dbd4 faddfcefc5266ba6611722395c906556"
    "be52afe3f565636ad1b17d508b73d874 3eeb524be22b3dcbc2c7468d54119c74"
    "68449a13d8e3b95811a198f3491de3e7 fe942b330407abf82a4ed7c1b311663a"
    "c69890f4157015853d91e923037c227a 33cdd5ec281ca3f79c44546b9d90ca00"
    "f064c99e3dd97911d39fe9c5d0b23a22 9a234cb36186c4819e8b9c5927726632"
    "291d6a418211cc2962e20fe47feb3edf 330f2c603a9d48c0fcb5699dbfe58964"
    "25c5bac4aee82e57a85aaf4e2513e4f0 5796b07ba2ee47d80506f8d2c25e50fd"
    "14de71e6c418559302f939b0e1abd576 f279c4b2e0feb85c1f28ff18f58891ff"
    "ef132eef2fa09346aee33c28eb130ff2 8f5b766953334113211996d20011a198"
    "e3fc433f9f2541010ae17c1bf202580f 6047472fb36857fe843b19f5984009dd"
    "c324044e847a4f4a0ab34f719595de37 252d6235365e9b84392b061085349d73"
    "203a4a13e96f5432ec0fd4a1ee65accd d5e3904df54c1da510b0ff20dcc0c77f"
    "cb2c0e0eb605cb0504db87632cf3d8b4 dae6e705769d1de354270123cb11450e"
    "fc60ac47683d7b8d0f811365565fd98c 4c8eb936bcab8d069fc33bd801b03ade"
    "a2e1fbc5aa463d08ca19896d2bf59a07 1b851e6c239052172f296bfb5e724047"
    "90a2181014f3b94a4e97d117b4381303 68cc39dbb2d198065ae3986547926cd2"
    "162f40a29f0c3c8745c0f50fba3852e5 66d44575c29d39a03f0cda721984b6f4"
    "40591f355e12d439ff150aab7613499d bd49adabc8676eef023b15b65bfc5ca0"
    "6948109f23f350db82123535eb8a7433 bdabcb909271a6ecbcb58b936a88cd4e"
    "8f2e6ff5800175f113253d8fa9ca8885 c2f552e657dc603f252e1a8e308f76f0"
    "be79e2fb8f5d5fbbe2e30ecadd220723 c8c0aea8078cdfcb3868263ff8f09400"
    "54da48781893a7e49ad5aff4af300cd8 04a6b6279ab3ff3afb64491c85194aab"
    "760d58a606654f9f4400e8b38591356f bf6425aca26dc85244259ff2b19c41b9"
    "f96f3ca9ec1dde434da7d2d392b905dd f3d1f9af93d1af5950bd493f5aa731b4"
    "056df31bd267b6b90a079831aaf579be 0a39013137aac6d404f518cfd4684064"
    "7e78bfe706ca4cf5e9c5453e9f7cfd2b 8b4c8d169a44e55c88d4a9a7f9474241"
    "e221af44860018ab0856972e194cd934",
    "c1000000010008f067a5502a4262b50040750001",
    "2cd0991cd25b0aac406a5816b6394100",
    "2ec0d8356a",
    "cf000000010008f067a5502a4262b500 4075c0d95a482cd0991cd25b0aac406a"
    "5816b6394100f37a1c69797554780bb3 8cc5a99f5ede4cf73c3ec2493a1839b3"
    "dbcba3f6ea46c5b7684df3548e7ddeb9 c3bf9c73cc3f3bded74b562bfb19fb84"
    "022f8ef4cdd93795d77d06edbb7aaf2f 58891850abbdca3d20398c276456cbc4"
    "2158407dd074ee",
    "ff000000010008f067a5502a4262b574 6f6b656e04a265ba2eff4d829058fb3f"
    "0f2496ba",
    "c6d98ff3441c3fe1b2182094f69caa2e d4b716b65488960a7a984979fb23e1c8",
    "e0459b3474bdd0e44a41c144",
    "25a282b9e82f06f21f488917a4fc8f1b 73573685608597d0efcb076b0ab7a7a4",
    "1223504755036d556342ee9361d25342 1a826c9ecdf3c7148684b36b714881f9",
    "e0459b3474bdd0e46d417eb0",
    "655e5cd55c41f69080575d7999c25a5bfb",
    "5e5cd55c41f69080575d7999c25a5bfb",
    "aefefe7d03",
    "4cfe4189655e5cd55c41f69080575d7999c25a5bfb",
};

const AppendixA kRfc9369 = {
    kVersion2,
    "14ec9d6eb9fd7af83bf5a668bc17a7e2 83766aade7ecd0891f70f9ff7f4bf47b",
    "8b1a0bc121284290a29e0971b5cd045d",
    "91f73e2351d8fa91660e909f",
    "45b95e15235d6f45a6b19cbcb0294ba9",
    "0263db1782731bf4588e7e4d93b74639 07cb8cd8200b5da55a8bd488eafc37c1",
    "82db637861d55e1d011f19ea71d5d2a7",
    "dd13c276499c0249d3310652",
    "edf6d05c83121201b436e16877593c3a",
    "d36b3343cf088394c8f03e5157080000449e00000002",
    "ffe67b6abcdb4298b485dd04de806071",
    "94a0c95e80",
    "d76b3343cf088394c8f03e5157080000 449ea0c95e82ffe67b6abcdb4298b485"
    "dd04de806071bf03dceebfa162e75d6c 96058bdbfb127cdfcbf903388e99ad04"
    "9f9a3dd4425ae4d0992cfff18ecf0fdb 5a842d09747052f17ac2053d21f57c5d"
    "250f2c4f0e0202b70785b7946e992e58 a59ac52dea6774d4f03b55545243cf1a"
    "12834e3f249a78d395e0d18f4d766004 f1a2674802a747eaa901c3f10cda5500"
    "cb9122faa9f1df66c392079a1b40f0de 1c6054196a11cbea40afb6ef5253cd68"
    "18f6625efce3b6def6ba7e4b37a40f77 32e093daa7d52190935b8da58976ff33"
    "12ae50b187c1433c0f028edcc4c2838b 6a9bfc226ca4b4530e7a4ccee1bfa2a3"
    "d396ae5a3fb512384b2fdd851f784a65 e03f2c4fbe11a53c7777c023462239dd"
    "6f7521a3f6c7d5dd3ec9b3f233773d4b 46d23cc375eb198c63301c21801f6520"
    "bcfb7966fc49b393f0061d974a2706df 8c4a9449f11d7f3d2dcbb90c6b877045"
    "636e7c0c0fe4eb0f697545460c806910 d2c355f1d253bc9d2452aaa549e27a1f"
    "ac7cf4ed77f322e8fa894b6a83810a34 b361901751a6f5eb65a0326e07de7c12"
    "16ccce2d0193f958bb3850a833f7ae43 2b65bc5a53975c155aa4bcb4f7b2c4e5"
    "4df16efaf6ddea94e2c50b4cd1dfe060 17e0e9d02900cffe1935e0491d77ffb4"
    "fdf85290fdd893d577b1131a610ef6a5 c32b2ee0293617a37cbb08b847741c3b"
    "8017c25ca9052ca1079d8b78aebd4787 6d330a30f6a8c6d61dd1ab5589329de7"
    "14d19d61370f8149748c72f132f0fc99 f34d766c6938597040d8f9e2bb522ff9"
    "9c63a344d6a2ae8aa8e51b7b90a4a806 105fcbca31506c446151adfeceb51b91"
    "abfe43960977c87471cf9ad4074d30e1 0d6a7f03c63bd5d4317f68ff325ba3bd"
    "80bf4dc8b52a0ba031758022eb025cdd 770b44d6d6cf0670f4e990b22347a7db"
    "848265e3e5eb72dfe8299ad7481a4083 22cac55786e52f633b2fb6b614eaed18"
    "d703dd84045a274ae8bfa73379661388 d6991fe39b0d93debb41700b41f90a15"
    "c4d526250235ddcd6776fc77bc97e7a4 17ebcb31600d01e57f32162a8560cacc"
    "7e27a096d37a1a86952ec71bd89a3e9a 30a2a26162984d7740f81193e8238e61"
    "f6b5b984d4d3dfa033c1bb7e4f0037fe bf406d91c0dccf32acf423cfa1e70710"
    "10d3f270121b493ce85054ef58bada42 310138fe081adb04e2bd901f2f13458b"
    "3d6758158197107c14ebb193230cd115 7380aa79cae1374a7c1e5bbcb80ee23e"
    "06ebfde206bfb0fcbc0edc4ebec30966 1bdd908d532eb0c6adc38b7ca7331dce"
    "8dfce39ab71e7c32d318d136b6100671 a1ae6a6600e3899f31f0eed19e3417d1"
    "34b90c9058f8632c798d4490da498730 7cba922d61c39805d072b589bd52fdf1"
    "e86215c2d54e6670e07383a27bbffb5a ddf47d66aa85a0c6f9f32e59d85a44dd"
    "5d3b22dc2be80919b490437ae4f36a0a e55edf1d0b5cb4e9a3ecabee93dfc6e3"
    "8d209d0fa6536d27a5d6fbb17641cde2 7525d61093f1b28072d111b2b4ae5f89"
    "d5974ee12e5cf7d5da4d6a31123041f3 3e61407e76cffcdcfd7e19ba58cf4b53"
    "6f4c4938ae79324dc402894b44faf8af bab35282ab659d13c93f70412e85cb19"
    "9a37ddec600545473cfb5a05e08d0b20 9973b2172b4d21fb69745a262ccde96b"
    "a18b2faa745b6fe189cf772a9f84cbfc",
    "d16b3343cf0008f067a5502a4262b50040750001",
    "6f05d8a4398c47089698baeea26b91eb",
    "4dd92e91ea",
    "dc6b3343cf0008f067a5502a4262b500 4075d92faaf16f05d8a4398c47089698"
    "baeea26b91eb761d9b89237bbf872630 17915358230035f7fd3945d88965cf17"
    "f9af6e16886c61bfc703106fbaf3cb4c fa52382dd16a393e42757507698075b2"
    "c984c707f0a0812d8cd5a6881eaf21ce da98f4bd23f6fe1a3e2c43edd9ce7ca8"
    "4bed8521e2e140",
    "cf6b3343cf0008f067a5502a4262b574 6f6b656ec8646ce8bfe33952d9555436"
    "65dcc7b6",
    "3bfcddd72bcf02541d7fa0dd1f5f9eee a817e09a6963a0e6c7df0f9a1bab90f2",
    "a6b5bc6ab7dafce30ffff5dd",
    "d659760d2ba434a226fd37b35c69e2da 8211d10c4f12538787d65645d5d1b8e2",
    "c69374c49e3d2a9466fa689e49d476db 5d0dfbc87d32ceeaa6343fd0ae4c7d88",
    "a6b5bc6ab7dafce328ff4a29",
    "0ae7b6b932bc27d786f4bc2bb20f2162ba",
    "e7b6b932bc27d786f4bc2bb20f2162ba",
    "97580e32bf",
    "5558b1c60ae7b6b932bc27d786f4bc2bb20f2162ba",
};

constexpr size_t kClientPayloadLen = 1162;

std::vector<uint8_t> ClientPayload() {
  std::vector<uint8_t> payload = Hex(kClientCryptoFrame);
  payload.resize(kClientPayloadLen, 0x00);  // PADDING frames
  return payload;
}

const VersionParams& Params(uint32_t version) {
  const VersionParams* params = FindVersionParams(version);
  EXPECT_NE(params, nullptr);
  return *params;
}

struct Keys {
  PacketProtectionKeys client;
  PacketProtectionKeys server;
};

void DeriveInitialKeys(uint32_t version, Keys* keys) {
  InitialSecrets secrets;
  ASSERT_TRUE(DeriveInitialSecrets(Params(version), Hex(kDcid), &secrets));
  ASSERT_TRUE(DerivePacketProtectionKeys(InitialCipherSuite(), Params(version), secrets.client,
                                         &keys->client));
  ASSERT_TRUE(DerivePacketProtectionKeys(InitialCipherSuite(), Params(version), secrets.server,
                                         &keys->server));
}

class AppendixATest : public ::testing::TestWithParam<const AppendixA*> {
 protected:
  const AppendixA& v() const { return *GetParam(); }
};

TEST_P(AppendixATest, InitialSecretsKeysIvsAndHpKeys) {
  InitialSecrets secrets;
  ASSERT_TRUE(DeriveInitialSecrets(Params(v().version), Hex(kDcid), &secrets));
  EXPECT_EQ(ToHex(secrets.client), ToHex(Hex(v().client_initial_secret)));
  EXPECT_EQ(ToHex(secrets.server), ToHex(Hex(v().server_initial_secret)));
  Keys keys;
  DeriveInitialKeys(v().version, &keys);
  EXPECT_EQ(ToHex(keys.client.key()), ToHex(Hex(v().client_key)));
  EXPECT_EQ(ToHex(keys.client.iv()), ToHex(Hex(v().client_iv)));
  EXPECT_EQ(ToHex(keys.client.hp()), ToHex(Hex(v().client_hp)));
  EXPECT_EQ(ToHex(keys.server.key()), ToHex(Hex(v().server_key)));
  EXPECT_EQ(ToHex(keys.server.iv()), ToHex(Hex(v().server_iv)));
  EXPECT_EQ(ToHex(keys.server.hp()), ToHex(Hex(v().server_hp)));
}

TEST_P(AppendixATest, HeaderProtectionMaskOfTheSamples) {
  Keys keys;
  DeriveInitialKeys(v().version, &keys);
  for (const auto& [hp, sample, mask] :
       {std::tuple{keys.client.hp(), v().client_sample, v().client_mask},
        std::tuple{keys.server.hp(), v().server_sample, v().server_mask}}) {
    auto ctx = HeaderProtectionContext::Create(*InitialCipherSuite().hp, hp);
    ASSERT_NE(ctx, nullptr);
    uint8_t out[kHpMaskOutputLen];
    ASSERT_TRUE(ctx->Mask(Hex(sample).data(), out));
    EXPECT_EQ(ToHex(absl::MakeConstSpan(out, 5)), ToHex(Hex(mask)));
  }
}

TEST_P(AppendixATest, ClientInitialIsProtectedByteForByteAndOpensBack) {
  Keys keys;
  DeriveInitialKeys(v().version, &keys);
  const std::vector<uint8_t> payload = ClientPayload();
  ProtectionContexts client_tx = MakeContexts(InitialCipherSuite(), keys.client);
  const std::vector<uint8_t> packet =
      ProtectPacket(client_tx, Hex(v().client_header), 4, 2, payload);
  const std::vector<uint8_t> expected = Hex(v().client_packet);
  ASSERT_EQ(expected.size(), 1200u);
  ASSERT_EQ(packet.size(), expected.size());
  EXPECT_EQ(packet.front(), expected.front());
  EXPECT_EQ(packet.back(), expected.back());
  EXPECT_EQ(ToHex(packet), ToHex(expected));

  // The server's receive keys are the client's send keys.
  ProtectionContexts server_rx = MakeContexts(InitialCipherSuite(), keys.client);
  Unprotected opened;
  ASSERT_TRUE(UnprotectPacket(server_rx, expected, 18, &opened));
  EXPECT_EQ(ToHex(opened.header), ToHex(Hex(v().client_header)));
  EXPECT_EQ(opened.truncated_pn, 2u);
  EXPECT_EQ(opened.payload, payload);
}

TEST_P(AppendixATest, ServerInitialIsProtectedByteForByteAndOpensBack) {
  Keys keys;
  DeriveInitialKeys(v().version, &keys);
  const std::vector<uint8_t> payload = Hex(kServerPayload);
  ProtectionContexts server_tx = MakeContexts(InitialCipherSuite(), keys.server);
  const std::vector<uint8_t> packet =
      ProtectPacket(server_tx, Hex(v().server_header), 2, 1, payload);
  EXPECT_EQ(ToHex(packet), ToHex(Hex(v().server_packet)));

  ProtectionContexts client_rx = MakeContexts(InitialCipherSuite(), keys.server);
  Unprotected opened;
  ASSERT_TRUE(UnprotectPacket(client_rx, Hex(v().server_packet), 18, &opened));
  EXPECT_EQ(ToHex(opened.header), ToHex(Hex(v().server_header)));
  EXPECT_EQ(opened.truncated_pn, 1u);
  EXPECT_EQ(opened.payload, payload);
}

TEST_P(AppendixATest, TamperedClientInitialFailsToOpen) {
  Keys keys;
  DeriveInitialKeys(v().version, &keys);
  const std::vector<uint8_t> good = Hex(v().client_packet);
  ProtectionContexts server_rx = MakeContexts(InitialCipherSuite(), keys.client);
  Unprotected opened;
  ASSERT_TRUE(UnprotectPacket(server_rx, good, 18, &opened));

  // A flipped bit in the ciphertext, in the tag, and in the header (associated data: a DCID
  // octet) each fail authentication.
  for (size_t index : {size_t{100}, good.size() - 1, size_t{8}}) {
    std::vector<uint8_t> bad = good;
    bad[index] ^= 0x01;
    EXPECT_FALSE(UnprotectPacket(server_rx, bad, 18, &opened)) << "bit flipped at " << index;
  }
  // The other direction's keys do not open it.
  ProtectionContexts wrong = MakeContexts(InitialCipherSuite(), keys.server);
  EXPECT_FALSE(UnprotectPacket(wrong, good, 18, &opened));
}

TEST_P(AppendixATest, RetryIntegrityTag) {
  const std::vector<uint8_t> retry = Hex(v().retry_packet);
  ASSERT_EQ(retry.size(), 36u);
  const auto without_tag = absl::MakeConstSpan(retry).subspan(0, retry.size() - kRetryTagLen);
  uint8_t tag[kRetryTagLen];
  ASSERT_TRUE(ComputeRetryIntegrityTag(v().version, Hex(kDcid), without_tag, tag));
  EXPECT_EQ(ToHex(tag), ToHex(absl::MakeConstSpan(retry).subspan(retry.size() - kRetryTagLen)));
  EXPECT_TRUE(VerifyRetryIntegrityTag(v().version, Hex(kDcid), retry));

  std::vector<uint8_t> odcid = Hex(kDcid);
  odcid[0] ^= 0x80;
  EXPECT_FALSE(VerifyRetryIntegrityTag(v().version, odcid, retry));
  for (size_t index : {size_t{7}, size_t{17}, retry.size() - 1}) {
    std::vector<uint8_t> bad = retry;
    bad[index] ^= 0x01;
    EXPECT_FALSE(VerifyRetryIntegrityTag(v().version, Hex(kDcid), bad)) << index;
  }
}

TEST_P(AppendixATest, ChaCha20Poly1305ShortHeaderPacket) {
  const CipherSuite* suite = FindCipherSuite(kTlsChaCha20Poly1305Sha256);
  ASSERT_NE(suite, nullptr);
  const std::vector<uint8_t> secret = Hex(kChaChaSecret);
  PacketProtectionKeys keys;
  ASSERT_TRUE(DerivePacketProtectionKeys(*suite, Params(v().version), secret, &keys));
  EXPECT_EQ(ToHex(keys.key()), ToHex(Hex(v().chacha_key)));
  EXPECT_EQ(ToHex(keys.iv()), ToHex(Hex(v().chacha_iv)));
  EXPECT_EQ(ToHex(keys.hp()), ToHex(Hex(v().chacha_hp)));
  std::vector<uint8_t> ku(secret.size());
  ASSERT_TRUE(DeriveNextTrafficSecret(suite->md, Params(v().version), secret, absl::MakeSpan(ku)));
  EXPECT_EQ(ToHex(ku), ToHex(Hex(v().chacha_ku)));

  constexpr uint64_t kPn = 654360564;
  uint8_t nonce[kAeadNonceLen];
  MakeNonce(keys.iv(), kPn, nonce);
  EXPECT_EQ(ToHex(nonce), ToHex(Hex(v().chacha_nonce)));

  ProtectionContexts tx = MakeContexts(*suite, keys);
  uint8_t mask[kHpMaskOutputLen];
  ASSERT_TRUE(tx.hp->Mask(Hex(v().chacha_sample).data(), mask));
  EXPECT_EQ(ToHex(absl::MakeConstSpan(mask, 5)), ToHex(Hex(v().chacha_mask)));

  const std::vector<uint8_t> payload = {0x01};  // PING
  const std::vector<uint8_t> packet = ProtectPacket(tx, Hex("4200bff4"), 3, kPn, payload);
  EXPECT_EQ(ToHex(packet), ToHex(Hex(v().chacha_packet)));
  EXPECT_EQ(ToHex(absl::MakeConstSpan(packet).subspan(4)), ToHex(Hex(v().chacha_ciphertext)));

  ProtectionContexts rx = MakeContexts(*suite, keys);
  Unprotected opened;
  ASSERT_TRUE(UnprotectPacket(rx, packet, 1, &opened, kPn));
  EXPECT_EQ(opened.truncated_pn, 49140u);
  EXPECT_EQ(opened.payload, payload);
  std::vector<uint8_t> bad = packet;
  bad[10] ^= 0x10;
  EXPECT_FALSE(UnprotectPacket(rx, bad, 1, &opened, kPn));
}

// The ngtcp2 callbacks, fed like ngtcp2 feeds them, give the same bytes as the RFC.
TEST_P(AppendixATest, Ngtcp2CallbacksReproduceTheClientInitial) {
  Keys keys;
  DeriveInitialKeys(v().version, &keys);
  const CipherSuite& suite = InitialCipherSuite();
  AeadContextPtr aead_owner = NewAeadContext(suite, keys.client.key());
  auto hp_owner = HeaderProtectionContext::Create(*suite.hp, keys.client.hp());
  ASSERT_NE(aead_owner, nullptr);
  ASSERT_NE(hp_owner, nullptr);
  ngtcp2_crypto_ctx crypto_ctx;
  FillCryptoCtx(suite, &crypto_ctx);
  const ngtcp2_crypto_aead_ctx aead_ctx{aead_owner.get()};
  const ngtcp2_crypto_cipher_ctx hp_ctx{hp_owner.get()};

  const std::vector<uint8_t> header = Hex(v().client_header);
  const std::vector<uint8_t> payload = ClientPayload();
  const std::vector<uint8_t> expected = Hex(v().client_packet);
  uint8_t nonce[kAeadNonceLen];
  MakeNonce(keys.client.iv(), 2, nonce);

  // In place, as ngtcp2 does.
  std::vector<uint8_t> buf = payload;
  buf.resize(payload.size() + crypto_ctx.aead.max_overhead);
  ASSERT_EQ(Encrypt(buf.data(), &crypto_ctx.aead, &aead_ctx, buf.data(), payload.size(), nonce,
                    sizeof(nonce), header.data(), header.size()),
            0);
  EXPECT_EQ(ToHex(buf), ToHex(absl::MakeConstSpan(expected).subspan(header.size())));

  uint8_t mask[NGTCP2_HP_SAMPLELEN];
  ASSERT_EQ(HpMask(mask, &crypto_ctx.hp, &hp_ctx, buf.data()), 0);
  EXPECT_EQ(ToHex(absl::MakeConstSpan(mask, 5)), ToHex(Hex(v().client_mask)));

  std::vector<uint8_t> plain(payload.size());
  ASSERT_EQ(Decrypt(plain.data(), &crypto_ctx.aead, &aead_ctx, buf.data(), buf.size(), nonce,
                    sizeof(nonce), header.data(), header.size()),
            0);
  EXPECT_EQ(plain, payload);
  buf[3] ^= 0x04;
  EXPECT_EQ(Decrypt(plain.data(), &crypto_ctx.aead, &aead_ctx, buf.data(), buf.size(), nonce,
                    sizeof(nonce), header.data(), header.size()),
            NGTCP2_ERR_DECRYPT);
  EXPECT_EQ(Decrypt(plain.data(), &crypto_ctx.aead, &aead_ctx, buf.data(), 15, nonce, sizeof(nonce),
                    header.data(), header.size()),
            NGTCP2_ERR_DECRYPT);
}

INSTANTIATE_TEST_SUITE_P(Rfcs, AppendixATest, ::testing::Values(&kRfc9001, &kRfc9369),
                         [](const ::testing::TestParamInfo<const AppendixA*>& param_info) {
                           return param_info.param->version == kVersion1 ? std::string("Rfc9001")
                                                                         : std::string("Rfc9369");
                         });

// 0x709a50c4 carries the constants ngtcp2 0.12.1 uses (see version_params.cc), not RFC 9369's.
TEST(VersionParamsTest, ProvisionalV2MatchesNgtcp2) {
  const VersionParams& draft = Params(kVersion2Draft);
  EXPECT_EQ(ToHex(draft.initial_salt), "a707c203a59b47184a1d62ca570406ea7ae3e5d3");
  EXPECT_EQ(draft.key_label, "quicv2 key");
  EXPECT_EQ(draft.iv_label, "quicv2 iv");
  EXPECT_EQ(draft.hp_label, "quicv2 hp");
  EXPECT_EQ(draft.ku_label, "quic ku");
  // The Retry nonce is hard-coded in ngtcp2's core; the key must be its partner.
  EXPECT_EQ(0, std::memcmp(draft.retry_key.data(), NGTCP2_RETRY_KEY_V2_DRAFT, kRetryKeyLen));
  EXPECT_EQ(0, std::memcmp(draft.retry_nonce.data(), NGTCP2_RETRY_NONCE_V2_DRAFT, kRetryNonceLen));
  const VersionParams& v1 = Params(kVersion1);
  EXPECT_EQ(0, std::memcmp(v1.retry_key.data(), NGTCP2_RETRY_KEY_V1, kRetryKeyLen));
  EXPECT_EQ(0, std::memcmp(v1.retry_nonce.data(), NGTCP2_RETRY_NONCE_V1, kRetryNonceLen));
  EXPECT_EQ(FindVersionParams(0xff00001d), nullptr);
}

TEST(VersionParamsTest, ProvisionalV2KeyUpdateUsesTheV1Label) {
  const CipherSuite* suite = FindCipherSuite(kTlsChaCha20Poly1305Sha256);
  const std::vector<uint8_t> secret = Hex(kChaChaSecret);
  std::vector<uint8_t> ku(secret.size());
  ASSERT_TRUE(
      DeriveNextTrafficSecret(suite->md, Params(kVersion2Draft), secret, absl::MakeSpan(ku)));
  EXPECT_EQ(ToHex(ku), ToHex(Hex(kRfc9001.chacha_ku)));
}

// ngtcp2's own Retry writer, keyed by us, yields packets our verifier accepts — for v1 the
// RFC's bytes exactly — and for the provisional v2 proves the table key pairs with the nonce
// ngtcp2 0.12.1 builds in.
TEST(RetryPacketWriterTest, WritesVerifiableRetryPackets) {
  absl::StatusOr<RetryPacketWriter> writer = RetryPacketWriter::Create();
  ASSERT_TRUE(writer.ok()) << writer.status();
  const std::vector<uint8_t> odcid_bytes = Hex(kDcid);
  const std::vector<uint8_t> scid_bytes = Hex("f067a5502a4262b5");
  ngtcp2_cid dcid, scid, odcid;
  ngtcp2_cid_init(&dcid, nullptr, 0);
  ngtcp2_cid_init(&scid, scid_bytes.data(), scid_bytes.size());
  ngtcp2_cid_init(&odcid, odcid_bytes.data(), odcid_bytes.size());
  const std::string token = "token";
  const auto token_bytes =
      absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(token.data()), token.size());
  for (uint32_t version : {kVersion1, kVersion2Draft}) {
    uint8_t out[256];
    absl::StatusOr<size_t> n = writer->Write(version, dcid, scid, odcid, token_bytes, out);
    ASSERT_TRUE(n.ok()) << n.status();
    const auto packet = absl::MakeConstSpan(out, *n);
    EXPECT_TRUE(VerifyRetryIntegrityTag(version, odcid_bytes, packet)) << std::hex << version;
    if (version == kVersion1) {
      // ngtcp2 0.12.1 writes the four unused bits of the first octet as 0 (0xf0), the RFC's
      // sample as 1s (0xff), so the tags differ; everything between must match.
      const std::vector<uint8_t> rfc = Hex(kRfc9001.retry_packet);
      ASSERT_EQ(packet.size(), rfc.size());
      EXPECT_EQ(packet[0] & 0xf0, rfc[0] & 0xf0);
      EXPECT_EQ(ToHex(packet.subspan(1, rfc.size() - 1 - kRetryTagLen)),
                ToHex(absl::MakeConstSpan(rfc).subspan(1, rfc.size() - 1 - kRetryTagLen)));
      if (packet[0] == rfc[0]) {
        EXPECT_EQ(ToHex(packet), ToHex(rfc));
      }
    }
    std::vector<uint8_t> bad(packet.begin(), packet.end());
    bad[bad.size() - 5] ^= 0x01;
    EXPECT_FALSE(VerifyRetryIntegrityTag(version, odcid_bytes, bad));
  }
  uint8_t out[256];
  EXPECT_FALSE(writer->Write(0x0a0a0a0a, dcid, scid, odcid, token_bytes, out).ok());
}

// AES-256-GCM has no RFC sample: check its pieces against independent BoringSSL calls.
TEST(CipherSuiteTest, Aes256GcmKeysHeaderProtectionAndRoundTrip) {
  const CipherSuite* suite = FindCipherSuite(kTlsAes256GcmSha384);
  ASSERT_NE(suite, nullptr);
  EXPECT_EQ(suite->md, EVP_sha384());
  std::vector<uint8_t> secret(48);
  for (size_t i = 0; i < secret.size(); ++i) secret[i] = static_cast<uint8_t>(i * 7 + 1);
  PacketProtectionKeys keys;
  ASSERT_TRUE(DerivePacketProtectionKeys(*suite, Params(kVersion1), secret, &keys));
  ASSERT_EQ(keys.key().size(), 32u);
  ASSERT_EQ(keys.hp().size(), 32u);
  std::vector<uint8_t> expected_key(32);
  ASSERT_TRUE(HkdfExpandLabel(EVP_sha384(), secret, "quic key", {}, absl::MakeSpan(expected_key)));
  EXPECT_EQ(ToHex(keys.key()), ToHex(expected_key));

  const std::vector<uint8_t> sample = Hex("000102030405060708090a0b0c0d0e0f");
  AES_KEY aes;
  ASSERT_EQ(AES_set_encrypt_key(keys.hp().data(), 256, &aes), 0);
  uint8_t expected_mask[16];
  AES_encrypt(sample.data(), expected_mask, &aes);
  auto hp = HeaderProtectionContext::Create(*suite->hp, keys.hp());
  ASSERT_NE(hp, nullptr);
  uint8_t mask[kHpMaskOutputLen];
  ASSERT_TRUE(hp->Mask(sample.data(), mask));
  EXPECT_EQ(ToHex(mask), ToHex(expected_mask));

  ProtectionContexts tx = MakeContexts(*suite, keys);
  ProtectionContexts rx = MakeContexts(*suite, keys);
  const std::vector<uint8_t> payload(300, 0x5a);
  const std::vector<uint8_t> packet = ProtectPacket(tx, Hex("41aabbccdd0007"), 2, 7, payload);
  Unprotected opened;
  ASSERT_TRUE(UnprotectPacket(rx, packet, 5, &opened));
  EXPECT_EQ(opened.payload, payload);
  std::vector<uint8_t> bad = packet;
  bad[40] ^= 0x02;
  EXPECT_FALSE(UnprotectPacket(rx, bad, 5, &opened));

  std::vector<uint8_t> next(48);
  ASSERT_TRUE(DeriveNextTrafficSecret(suite->md, Params(kVersion1), secret, absl::MakeSpan(next)));
  std::vector<uint8_t> expected_next(48);
  ASSERT_TRUE(HkdfExpandLabel(EVP_sha384(), secret, "quic ku", {}, absl::MakeSpan(expected_next)));
  EXPECT_EQ(next, expected_next);
  std::vector<uint8_t> wrong_len(32);
  EXPECT_FALSE(
      DeriveNextTrafficSecret(suite->md, Params(kVersion1), secret, absl::MakeSpan(wrong_len)));
}

TEST(CipherSuiteTest, LookupAndLimits) {
  EXPECT_EQ(FindCipherSuite(0x1304), nullptr);  // TLS_AES_128_CCM_SHA256: not offered
  for (uint16_t id : {kTlsAes128GcmSha256, kTlsAes256GcmSha384, kTlsChaCha20Poly1305Sha256}) {
    const CipherSuite* suite = FindCipherSuite(id);
    ASSERT_NE(suite, nullptr);
    EXPECT_EQ(FindCipherSuiteByAead(suite->aead), suite);
    ngtcp2_crypto_ctx ctx;
    FillCryptoCtx(*suite, &ctx);
    EXPECT_EQ(ctx.aead.max_overhead, 16u);
    EXPECT_EQ(ctx.max_encryption, suite->max_encryption);
  }
  EXPECT_EQ(FindCipherSuite(kTlsAes128GcmSha256)->max_encryption, uint64_t{1} << 23);
  EXPECT_EQ(FindCipherSuite(kTlsChaCha20Poly1305Sha256)->max_decryption_failure, uint64_t{1} << 36);
  EXPECT_EQ(&InitialCipherSuite(), FindCipherSuite(kTlsAes128GcmSha256));
}

TEST(HkdfTest, RejectsOversizedLabelsAndContexts) {
  const std::vector<uint8_t> secret(32, 1);
  uint8_t out[16];
  EXPECT_TRUE(HkdfExpandLabel(EVP_sha256(), secret, std::string(249, 'a'), {}, out));
  EXPECT_FALSE(HkdfExpandLabel(EVP_sha256(), secret, std::string(250, 'a'), {}, out));
  const std::vector<uint8_t> context(256, 2);
  EXPECT_FALSE(HkdfExpandLabel(EVP_sha256(), secret, "quic key", context, out));
  uint8_t prk[16];  // shorter than SHA-256's output
  EXPECT_FALSE(HkdfExtract(EVP_sha256(), secret, secret, prk));
}

TEST(AeadTest, NonceIsIvXorPacketNumber) {
  const std::vector<uint8_t> iv = Hex("000102030405060708090a0b");
  uint8_t nonce[kAeadNonceLen];
  MakeNonce(iv, 0x1122334455667788, nonce);
  EXPECT_EQ(ToHex(nonce),
            "0001020315273543"
            "5d6f7d83");
  EXPECT_EQ(NewAeadContext(InitialCipherSuite(), Hex("0011")), nullptr);  // wrong key length
}

}  // namespace
}  // namespace petrel::quic::crypto
