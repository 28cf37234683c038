// The shipped key tables are exactly what scripts/ds_keys_dump.py wrote from the pinned DeepSpeed
// releases: the script records a sha256 per table in configs/data/ds_keys_manifest.json (Python's
// hashlib), and this test recomputes it over the shipped files with an independent SHA-256 (FIPS
// 180-4, checked below against the standard's test vectors). Editing a table by hand therefore fails
// here; regenerating needs Python and the DeepSpeed releases (see the script's docstring), which CI
// does not have. Structural checks make sure each table carries what the validator relies on.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "configs/ds_keys.h"

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const fs::path kData = fs::path(ZEROPLAN_SOURCE_DIR) / "configs/data";

// SHA-256 (FIPS 180-4 section 6.2).
std::string sha256_hex(const std::string& msg) {
  static constexpr std::array<uint32_t, 64> k = {
      0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
      0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
      0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
      0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
      0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
      0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
      0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
      0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
  std::array<uint32_t, 8> h = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                               0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  std::string m = msg;
  const uint64_t bits = static_cast<uint64_t>(msg.size()) * 8;
  m += static_cast<char>(0x80);
  while (m.size() % 64 != 56) m += '\0';
  for (int i = 7; i >= 0; --i) m += static_cast<char>((bits >> (8 * i)) & 0xff);
  const auto rotr = [](uint32_t x, int n) { return (x >> n) | (x << (32 - n)); };
  for (size_t off = 0; off < m.size(); off += 64) {
    std::array<uint32_t, 64> w{};
    for (int i = 0; i < 16; ++i)
      for (int b = 0; b < 4; ++b) w[i] = (w[i] << 8) | static_cast<uint8_t>(m[off + 4 * i + b]);
    for (int i = 16; i < 64; ++i) {
      const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    auto v = h;
    for (int i = 0; i < 64; ++i) {
      const uint32_t S1 = rotr(v[4], 6) ^ rotr(v[4], 11) ^ rotr(v[4], 25);
      const uint32_t ch = (v[4] & v[5]) ^ (~v[4] & v[6]);
      const uint32_t t1 = v[7] + S1 + ch + k[i] + w[i];
      const uint32_t S0 = rotr(v[0], 2) ^ rotr(v[0], 13) ^ rotr(v[0], 22);
      const uint32_t maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
      const uint32_t t2 = S0 + maj;
      v = {t1 + t2, v[0], v[1], v[2], v[3] + t1, v[4], v[5], v[6]};
    }
    for (int i = 0; i < 8; ++i) h[i] += v[i];
  }
  std::string out;
  for (uint32_t x : h) {
    char buf[9];
    std::snprintf(buf, sizeof buf, "%08x", x);
    out += buf;
  }
  return out;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(DsKeysTables, Sha256MatchesTheStandardsTestVectors) {
  // FIPS 180-4 examples (NIST CSRC "SHA256.pdf"): "abc" and the empty string.
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(DsKeysTables, ShippedTablesAreTheScriptsOutput) {
  const json manifest = json::parse(slurp(kData / "ds_keys_manifest.json"));
  const json& files = manifest["files"];
  int n = 0;
  for (const auto& e : fs::directory_iterator(kData)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("ds_keys_", 0) != 0 || name == "ds_keys_manifest.json") continue;
    ASSERT_TRUE(files.contains(name)) << name << " is not in the manifest: written by hand?";
    EXPECT_EQ(sha256_hex(slurp(e.path())), files[name].get<std::string>())
        << name << " differs from what scripts/ds_keys_dump.py wrote; regenerate it, do not edit it";
    ++n;
  }
  EXPECT_EQ(n, static_cast<int>(files.size()));
  // The pinned releases: 0.14 to 0.19.
  for (const char* v : {"0.14.5", "0.15.4", "0.16.9", "0.17.6", "0.18.9", "0.19.8"})
    EXPECT_TRUE(files.contains(std::string("ds_keys_") + v + ".json")) << v;
}

TEST(DsKeysTables, EachTableCarriesWhatTheValidatorReadsFromIt) {
  for (const auto& v : zeroplan::configs::deepspeed_versions()) {
    const json& t = zeroplan::configs::deepspeed_key_table(v);
    EXPECT_EQ(t["generated_by"], "scripts/ds_keys_dump.py") << v;
    EXPECT_TRUE(t["pydantic_api"] == "v1" || t["pydantic_api"] == "v2") << v;
    const json& zo = t["root"]["keys"]["zero_optimization"];
    // zero_optimization is DeepSpeedZeroConfig in every release: pydantic, unknown keys refused.
    EXPECT_TRUE(zo.value("pydantic", false)) << v;
    EXPECT_EQ(zo["unknown_keys"], "rejected") << v;
    EXPECT_EQ(zo["keys"]["stage"]["one_of"], json({0, 1, 2, 3})) << v;
    EXPECT_EQ(zo["keys"]["offload_optimizer"]["keys"]["device"]["one_of"], json({"none", "cpu", "nvme"}))
        << v;
    EXPECT_TRUE(zo["keys"]["cpu_offload"].contains("deprecated")) << v;
    EXPECT_EQ(zo["keys"]["prefetch_bucket_size"]["alias_of"], "stage3_prefetch_bucket_size") << v;
    // The top level is read with dict.get: unknown keys ignored; the batch keys are there.
    EXPECT_EQ(t["root"]["unknown_keys"], "ignored") << v;
    EXPECT_TRUE(t["root"]["keys"].contains("train_micro_batch_size_per_gpu")) << v;
    // The HF Trainer's "auto" keys, read from transformers by the script.
    EXPECT_TRUE(t["root"]["keys"]["train_batch_size"].value("hf_auto", false)) << v;
    EXPECT_TRUE(zo["keys"]["reduce_bucket_size"].value("hf_auto", false)) << v;
  }
  // pydantic v1 in 0.14 (deepspeed.pydantic_v1), v2 after.
  EXPECT_EQ(zeroplan::configs::deepspeed_key_table("0.14.5")["pydantic_api"], "v1");
  EXPECT_EQ(zeroplan::configs::deepspeed_key_table("0.15.4")["pydantic_api"], "v2");
  // 0.19.8 refuses removed features at start-up (runtime/config.py _reject_removed_config_keys).
  EXPECT_TRUE(zeroplan::configs::deepspeed_key_table("0.19.8")["removed_keys"].contains("amp"));
  EXPECT_FALSE(zeroplan::configs::deepspeed_key_table("0.16.9")["removed_keys"].contains("amp"));
}

}  // namespace
