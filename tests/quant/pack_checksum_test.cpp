// The per-tensor checksums of a .dgq pack: quantize records the XXH3-64 of every tensor's bytes (manifest version
// 2); `--verify` and `diffgemma verify` find a corrupted byte and name its tensor; a version-1 pack (no checksums)
// is still read, and verifying it says to re-quantize; a version-2 entry without a well-formed checksum is refused.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/engine_core.h"
#include "io/json_fields.h"
#include "model/integrity.h"
#include "quant/pack_manifest.h"
#include "quant/quant_test_util.h"
#include "support/expect_error.h"
#include "support/paths.h"
#include "support/process.h"
#include "support/tiny_checkpoint.h"

namespace dg::test {
namespace pack_checksum_test {

const std::string& base_pack() {
  static const std::string p = quantize_fixture("checksum-base", source_path("tests/fixtures/tiny_a"), "q4");
  return p;
}

nlohmann::json manifest(const std::string& pack) {
  return nlohmann::json::parse(read_text_file(pack + "/" + kPackManifestFile));
}

// A copy of the base pack with one byte of tensor `index` flipped; returns its path and the tensor's name.
std::pair<std::string, std::string> corrupted_pack(size_t index) {
  const std::string p = edited_pack(base_pack(), [](nlohmann::json&) {});
  const nlohmann::json t = manifest(p)["tensors"][index];
  std::vector<uint8_t> blob = read_bytes(p + "/" + kPackBlobFile);
  blob[t["offset"].get<uint64_t>() + t["bytes"].get<uint64_t>() / 2] ^= 0x10;
  write_bytes(p + "/" + kPackBlobFile, blob);
  return {p, t["name"].get<std::string>()};
}

TEST(PackChecksum, EveryTensorRecordsTheXxh3OfItsBytes) {
  const nlohmann::json j = manifest(base_pack());
  EXPECT_EQ(j["version"], 2);
  const std::vector<uint8_t> blob = read_bytes(base_pack() + "/" + kPackBlobFile);
  uint64_t bytes = 0;
  for (const nlohmann::json& t : j["tensors"]) {
    const uint64_t offset = t["offset"], n = t["bytes"];
    EXPECT_EQ(t["xxh3"], fmt::format("{:016x}", pack_checksum(blob.data() + offset, n))) << t["name"];
    bytes += n;
  }
  EXPECT_EQ(verify_pack_checksums(Checkpoint::open(base_pack())), bytes);
}

TEST(PackChecksum, AFlippedByteIsFoundAndNamed) {
  const auto [pack, name] = corrupted_pack(3);
  const Checkpoint ck = Checkpoint::open(pack);  // the structure is intact: only the checksum sees it
  DG_EXPECT_ERROR(verify_pack_checksums(ck), "tensor '" + name + "'", kPackBlobFile, "XXH3-64",
                  "the blob is corrupt", "diffgemma quantize");
  EngineOptions eo;
  eo.model_dir = pack;
  eo.verify = true;
  DG_EXPECT_ERROR(EngineCore::open(eo), name, "XXH3-64");
}

TEST(PackChecksum, VersionOnePacksAreReadAndVerifyingThemSaysToRequantize) {
  const std::string v1 = edited_pack(base_pack(), [](nlohmann::json& j) {
    j["version"] = 1;
    for (nlohmann::json& t : j["tensors"]) t.erase("xxh3");
  });
  const Checkpoint ck = Checkpoint::open(v1);
  EXPECT_EQ(ck.pack->version, 1);
  DG_EXPECT_ERROR(verify_pack_checksums(ck), "format version 1, which stores no checksums",
                  "re-create it with `diffgemma quantize`");
  const std::string missing = edited_pack(base_pack(), [](nlohmann::json& j) { j["tensors"][2].erase("xxh3"); });
  DG_EXPECT_ERROR(Checkpoint::open(missing), "has no 'xxh3'");
  const std::string bad = edited_pack(base_pack(), [](nlohmann::json& j) { j["tensors"][2]["xxh3"] = "12zz"; });
  DG_EXPECT_ERROR(Checkpoint::open(bad), "malformed 'xxh3' ('12zz'", "16 hex digits");
}

TEST(PackChecksum, TheVerifyCommand) {
  const std::string cli = cli_path();
  ProcessResult r = run_command(cli + " verify -m " + base_pack(), true);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("checksums    ok"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("all finite"), std::string::npos) << r.out;
  r = run_command(cli + " verify -m " + source_path("models/dg-tiny") + " --json", false);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["checksums"].is_null());
  EXPECT_GT(j["finite"]["values"].get<int64_t>(), 1000000);

  const auto [pack, name] = corrupted_pack(5);
  r = run_command(cli + " verify -m " + pack, true);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find(name), std::string::npos) << r.out;
  r = run_command(cli + " ask --verify -m " + pack + " --prompt-ids 2,5 -q --steps 1", true);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find(name), std::string::npos) << r.out;
  r = run_command(cli + " ask -m " + pack + " --prompt-ids 2,5 -q --steps 1 --max-new-tokens 4", true);
  EXPECT_EQ(r.code, 0) << "without --verify the pack loads: " << r.out;
}

}  // namespace pack_checksum_test
}  // namespace dg::test
