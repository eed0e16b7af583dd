// TensorStore and write_safetensors: round trips, sharded directories, and one clear dg::Error (naming the
// file and, where there is one, the tensor) for every malformed file.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "io/safetensors.h"
#include "support/expect_error.h"
#include "support/paths.h"
#include "support/tiny_checkpoint.h"

namespace dg {
namespace loader_safetensors_test {

using test::scratch_dir;
using test::write_raw_safetensors;

Tensor iota_tensor(DType t, Shape s) {
  Tensor x = host_tensor(t, s);
  auto* b = static_cast<uint8_t*>(x.data);
  for (size_t i = 0; i < x.nbytes(); ++i) b[i] = static_cast<uint8_t>(i * 7 + 3);
  return x;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data, b.data, a.nbytes()) == 0;
}

TEST(LoaderSafetensors, RoundTripKeepsDtypesShapesAndBytes) {
  const std::string path = scratch_dir("st-roundtrip") + "/x.safetensors";
  const std::vector<std::pair<std::string, Tensor>> in = {
      {"w.f32", iota_tensor(DType::kF32, {3, 5})},    {"w.bf16", iota_tensor(DType::kBF16, {7})},
      {"w.f16", iota_tensor(DType::kF16, {2, 3, 4})}, {"i.i32", iota_tensor(DType::kI32, {4})},
      {"i.i64", iota_tensor(DType::kI64, {1, 2})},    {"b.u8", iota_tensor(DType::kU8, {5})},
      {"b.bool", iota_tensor(DType::kBool, {3})},     {"r4", iota_tensor(DType::kF32, {1, 2, 1, 3})},
      {"scalar", iota_tensor(DType::kF32, Shape{})},  {"empty", iota_tensor(DType::kF32, {0, 4})},
  };
  write_safetensors(path, in, {{"format", "pt"}});

  const auto bytes = test::read_bytes(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u) << "header must be padded so the data section is 8-byte aligned";

  const TensorStore s = TensorStore::open_file(path);
  ASSERT_EQ(s.names().size(), in.size());
  EXPECT_EQ(s.files(), std::vector<std::string>{path});
  size_t total = 0;
  for (const auto& [name, t] : in) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(s.has(name));
    const TensorInfo& info = s.info(name);
    EXPECT_EQ(info.dtype, t.dtype);
    EXPECT_EQ(info.shape, t.shape);
    EXPECT_EQ(info.file, path);
    EXPECT_TRUE(same_bytes(s.view(name), t));
    total += t.nbytes();
  }
  EXPECT_EQ(s.total_bytes(), total);
  EXPECT_FALSE(s.has("__metadata__"));
  DG_EXPECT_ERROR(s.info("nope"), "nope");
}

TEST(LoaderSafetensors, ViewOutlivesTheStore) {
  const std::string path = scratch_dir("st-outlive") + "/x.safetensors";
  const Tensor t = iota_tensor(DType::kF32, {64});
  write_safetensors(path, {{"t", t}});
  Tensor v;
  {
    const TensorStore s = TensorStore::open_file(path);
    v = s.view("t");
  }
  EXPECT_TRUE(same_bytes(v, t));  // the view co-owns the mapping (ASan would flag a use after unmap)
}

TEST(LoaderSafetensors, MisalignedTensorIsReturnedAsAlignedCopy) {
  const std::string path = scratch_dir("st-align") + "/x.safetensors";
  // Header of 8*k bytes, then a 1-byte U8 tensor, so the F32 tensor starts at an odd address.
  std::string header = R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[1,9]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::vector<uint8_t> data(9);
  const float vals[2] = {1.5f, -2.25f};
  std::memcpy(data.data() + 1, vals, 8);
  write_raw_safetensors(path, header, data);
  const TensorStore s = TensorStore::open_file(path);
  const Tensor b = s.view("b");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data) % 4, 0u);
  EXPECT_EQ(b.f32()[0], 1.5f);
  EXPECT_EQ(b.f32()[1], -2.25f);
}

// One valid F32 tensor "w" [2, 3] in a file with a literal header; used to vary one thing at a time.
std::string raw_file(const std::string& tag, const std::string& header, size_t data_bytes = 24,
                     std::optional<uint64_t> len = std::nullopt) {
  const std::string path = scratch_dir(tag) + "/bad.safetensors";
  write_raw_safetensors(path, header, std::vector<uint8_t>(data_bytes, 0), len);
  return path;
}

constexpr const char* kGoodHeader = R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})";

TEST(LoaderSafetensors, LiteralGoodHeaderLoads) {
  const std::string path = raw_file("st-good", kGoodHeader);
  EXPECT_EQ(TensorStore::open_file(path).info("w").shape, (Shape{2, 3}));
}

TEST(LoaderSafetensors, FileShorterThanLengthFieldFails) {
  const std::string path = scratch_dir("st-short") + "/x.safetensors";
  test::write_bytes(path, {1, 2, 3});
  DG_EXPECT_ERROR(TensorStore::open_file(path), path, "too short");
  const std::string empty = scratch_dir("st-empty") + "/x.safetensors";
  test::write_bytes(empty, {});
  DG_EXPECT_ERROR(TensorStore::open_file(empty), empty);
}

TEST(LoaderSafetensors, HeaderLengthBeyondFileFails) {
  const std::string path = raw_file("st-len", kGoodHeader, 24, uint64_t{1} << 40);
  DG_EXPECT_ERROR(TensorStore::open_file(path), path, "header length");
  const std::string p2 = raw_file("st-len2", kGoodHeader, 0, std::string(kGoodHeader).size() + 1);
  DG_EXPECT_ERROR(TensorStore::open_file(p2), p2, "header length");
}

TEST(LoaderSafetensors, MalformedHeaderJsonFails) {
  const std::string path = raw_file("st-json", R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24])");
  DG_EXPECT_ERROR(TensorStore::open_file(path), path, "malformed");
  const std::string arr = raw_file("st-arr", "[1, 2, 3]");
  DG_EXPECT_ERROR(TensorStore::open_file(arr), arr, "not a JSON object");
  const std::string zero = raw_file("st-zero", "", 24);
  DG_EXPECT_ERROR(TensorStore::open_file(zero), zero, "malformed");
}

TEST(LoaderSafetensors, UnknownDtypeNamesTensorFileAndDtype) {
  for (const char* dt : {"F8_E4M3", "Q4", "F64", "bf16"}) {
    const std::string header = fmt::format(R"({{"w":{{"dtype":"{}","shape":[2,3],"data_offsets":[0,24]}}}})", dt);
    const std::string path = raw_file("st-dtype", header);
    DG_EXPECT_ERROR(TensorStore::open_file(path), path, "'w'", dt);
  }
}

TEST(LoaderSafetensors, BadEntriesNameTensorAndFile) {
  const char* cases[] = {
      R"({"w":{"dtype":"F32","shape":[2,4],"data_offsets":[0,24]}})",                    // size mismatch
      R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[24,0]}})",                    // end before begin
      R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[8,32]}})",                    // past the data section
      R"({"w":{"dtype":"F32","shape":[2,-3],"data_offsets":[0,24]}})",                   // negative dim
      R"({"w":{"dtype":"F32","shape":[2,3.5],"data_offsets":[0,24]}})",                  // fractional dim
      R"({"w":{"dtype":"F32","shape":"2x3","data_offsets":[0,24]}})",                    // shape not a list
      R"({"w":{"dtype":"F32","shape":[2,3]}})",                                          // no offsets
      R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0]}})",                       // one offset
      R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[-8,16]}})",                   // negative offset
      R"({"w":{"shape":[2,3],"data_offsets":[0,24]}})",                                  // no dtype
      R"({"w":{"dtype":7,"shape":[2,3],"data_offsets":[0,24]}})",                        // dtype not a string
      R"({"w":[1,2]})",                                                                  // entry not an object
      R"({"w":{"dtype":"F32","shape":[1,1,1,2,3],"data_offsets":[0,24]}})",              // rank 5
      R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,24]}})",  // overflow
      R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,18446744073709551615]}})",  // huge offset
  };
  for (const char* header : cases) {
    SCOPED_TRACE(header);
    const std::string path = raw_file("st-entry", header);
    DG_EXPECT_ERROR(TensorStore::open_file(path), path, "'w'");
  }
}

TEST(LoaderSafetensors, TruncatedFileNamesTensorAndFile) {
  const std::string path = scratch_dir("st-trunc") + "/x.safetensors";
  write_safetensors(path, {{"first", iota_tensor(DType::kF32, {16})}, {"second", iota_tensor(DType::kBF16, {16})}});
  auto bytes = test::read_bytes(path);
  ASSERT_GT(bytes.size(), 5u);
  bytes.erase(bytes.end() - 5, bytes.end());  // not resize(): GCC 12's -Wstringop-overflow sees its growing branch
  test::write_bytes(path, bytes);
  DG_EXPECT_ERROR(TensorStore::open_file(path), path, "'second'", "truncated");
}

TEST(LoaderSafetensors, OpenDirFindsSingleFile) {
  const std::string dir = scratch_dir("st-dir");
  write_safetensors(dir + "/model.safetensors", {{"t", iota_tensor(DType::kF32, {3})}});
  const TensorStore s = TensorStore::open_dir(dir);
  EXPECT_TRUE(s.has("t"));
  EXPECT_EQ(s.source(), dir);
}

TEST(LoaderSafetensors, OpenDirWithoutWeightsFails) {
  const std::string dir = scratch_dir("st-nofiles");
  DG_EXPECT_ERROR(TensorStore::open_dir(dir), "no model.safetensors or model.safetensors.index.json", dir);
  DG_EXPECT_ERROR(TensorStore::open_dir(dir + "/absent"), dir + "/absent", "does not exist");
}

// Two shards and an index; returns the directory.
std::string write_sharded(const std::string& tag, const nlohmann::json& weight_map) {
  const std::string dir = scratch_dir(tag);
  write_safetensors(dir + "/a.safetensors",
                    {{"x", iota_tensor(DType::kF32, {4})}, {"y", iota_tensor(DType::kF16, {2})}});
  write_safetensors(dir + "/b.safetensors", {{"z", iota_tensor(DType::kBF16, {3, 2})}});
  test::write_text_file(dir + "/model.safetensors.index.json",
                        nlohmann::json{{"metadata", {{"total_size", 40}}}, {"weight_map", weight_map}}.dump());
  return dir;
}

TEST(LoaderSafetensors, ShardedDirectoryLoadsEveryShard) {
  const std::string dir =
      write_sharded("st-shard", {{"x", "a.safetensors"}, {"y", "a.safetensors"}, {"z", "b.safetensors"}});
  const TensorStore s = TensorStore::open_dir(dir);
  EXPECT_EQ(s.names(), (std::vector<std::string>{"x", "y", "z"}));
  EXPECT_EQ(s.files().size(), 2u);
  EXPECT_EQ(s.info("z").file, dir + "/b.safetensors");
  EXPECT_TRUE(same_bytes(s.view("z"), iota_tensor(DType::kBF16, {3, 2})));
}

TEST(LoaderSafetensors, ShardTensorsMissingFromIndexAreAccepted) {
  const std::string dir = write_sharded("st-extra", {{"x", "a.safetensors"}, {"z", "b.safetensors"}});
  EXPECT_TRUE(TensorStore::open_dir(dir).has("y"));
}

TEST(LoaderSafetensors, IndexNamingMissingShardFails) {
  const std::string dir = write_sharded("st-noshard", {{"x", "a.safetensors"}, {"z", "c.safetensors"}});
  DG_EXPECT_ERROR(TensorStore::open_dir(dir), "model.safetensors.index.json", "c.safetensors", "'z'");
}

TEST(LoaderSafetensors, IndexNamingTensorAbsentFromShardFails) {
  const std::string dir = write_sharded("st-notensor", {{"x", "a.safetensors"}, {"z", "a.safetensors"}});
  DG_EXPECT_ERROR(TensorStore::open_dir(dir), "'z'", "a.safetensors");
}

TEST(LoaderSafetensors, DuplicateTensorAcrossShardsFails) {
  const std::string dir = write_sharded("st-dup", {{"x", "a.safetensors"}, {"z", "b.safetensors"}});
  write_safetensors(dir + "/b.safetensors",
                    {{"z", iota_tensor(DType::kBF16, {3, 2})}, {"x", iota_tensor(DType::kF32, {4})}});
  DG_EXPECT_ERROR(TensorStore::open_dir(dir), "'x'", "a.safetensors", "b.safetensors");
}

TEST(LoaderSafetensors, BadIndexFilesFail) {
  const std::string dir = write_sharded("st-badindex", {{"x", "a.safetensors"}});
  const std::string index = dir + "/model.safetensors.index.json";
  for (const char* text :
       {"{\"weight_map\": {", "[]", "{}", "{\"weight_map\": {}}", "{\"weight_map\": {\"x\": 3}}",
        "{\"weight_map\": {\"x\": \"../a.safetensors\"}}", "{\"weight_map\": {\"x\": \"/etc/passwd\"}}"}) {
    SCOPED_TRACE(text);
    test::write_text_file(index, text);
    DG_EXPECT_ERROR(TensorStore::open_dir(dir), index);
  }
}

TEST(LoaderSafetensors, WriteRejectsDuplicateNames) {
  const std::string path = scratch_dir("st-wdup") + "/x.safetensors";
  const Tensor t = iota_tensor(DType::kF32, {2});
  DG_EXPECT_ERROR(write_safetensors(path, {{"a", t}, {"a", t}}), "'a'");
  DG_EXPECT_ERROR(write_safetensors(scratch_dir("st-wdir"), {{"a", t}}), "cannot create");
}

}  // namespace loader_safetensors_test
}  // namespace dg
