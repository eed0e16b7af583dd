#include "model/quantize.h"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/packed_layout.h"
#include "core/parallel.h"
#include "model/checkpoint.h"
#include "quant/pack_reader.h"
#include "quant/pack_writer.h"

namespace dg {

namespace fs = std::filesystem;

namespace {

constexpr const char* kSidecars[] = {"config.json",           "generation_config.json",  "tokenizer.json",
                                     "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
                                     "chat_template.json"};
constexpr WeightClass kClassOrder[] = {WeightClass::kEmbed, WeightClass::kAttn, WeightClass::kDense,
                                       WeightClass::kRouter, WeightClass::kExpertsGateUp, WeightClass::kExpertsDown,
                                       WeightClass::kSc, WeightClass::kNorms};

fs::path clean(const std::string& p) {
  fs::path q = fs::path(p).lexically_normal();
  if (q.has_parent_path() && q.filename().empty()) q = q.parent_path();
  return q;
}

void sync_path(const fs::path& p, bool dir) {
  const int fd = ::open(p.c_str(), (dir ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) return;  // best effort: the data itself was flushed before
  ::fsync(fd);
  ::close(fd);
}

// Every tensor's checksum, read back from the written blob (what a reader will see), pages released as they go.
void checksum_blob(const fs::path& blob, PackManifest& m) {
  const MappedFile map(blob.string());
  DG_CHECK(map.size() == m.blob_bytes, "'{}' has {} bytes after writing, expected {}", blob.string(), map.size(),
           m.blob_bytes);
  parallel_for(static_cast<int64_t>(m.tensors.size()), 1, [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) {
      PackEntry& e = m.tensors[static_cast<size_t>(i)];
      e.xxh3 = pack_checksum(map.data() + e.offset, static_cast<size_t>(e.bytes));
      map.release(map.data() + e.offset, static_cast<size_t>(e.bytes));
    }
  });
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) fail("cannot write '{}'", p.string());
  sync_path(p, false);
}

// Refuses outputs that would overwrite something that is not a pack of ours.
void check_output(const fs::path& out, const fs::path& model, bool force) {
  std::error_code ec;
  if (fs::exists(model, ec) && fs::exists(out, ec) && fs::equivalent(out, model, ec))
    fail("the output '{}' is the source checkpoint; choose another -o", out.string());
  if (!fs::exists(out, ec)) {
    const fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
    if (fs::exists(parent, ec) && !fs::is_directory(parent, ec))
      fail("cannot create '{}': '{}' is not a directory", out.string(), parent.string());
    return;  // missing parents are created with the pack
  }
  if (!force) fail("'{}' already exists; choose another -o, or pass --force to replace the pack there", out.string());
  const bool empty_dir = fs::is_directory(out, ec) && fs::is_empty(out, ec);
  if (!empty_dir && !is_pack_dir(out.string()))
    fail("'{}' exists and is not a .dgq pack; --force only replaces a pack, so remove it yourself", out.string());
}

}  // namespace

PackManifest plan_pack(const ModelConfig& cfg, const TensorStore& src, const QuantPolicy& policy) {
  PackManifest m;
  m.profile = policy.profile;
  m.sets = policy.sets;
  for (WeightClass c : kClassOrder)
    m.classes.emplace_back(std::string(weight_class_name(c)), pack_format_name(policy.format_of(c)));
  std::vector<std::string> bad;
  uint64_t at = 0;
  for (const WeightEntry& w : expected_weights(cfg)) {
    const TensorInfo& t = src.info(w.name);
    const WeightClass cls = weight_class(w.name);
    const PackFormat f = weight_class_locked(cls) ? PackFormat{} : policy.format_of(cls);
    if (f) {
      if (const char* why = packed_shape_error(*f, t.shape)) {
        bad.push_back(fmt::format("'{}' (class {}) {} as {}: {}", w.name, weight_class_name(cls), t.shape.str(),
                                  dtype_name(*f), why));
        continue;
      }
    }
    PackEntry e;
    e.name = w.name;
    e.cls = std::string(weight_class_name(cls));
    e.dtype = f ? *f : t.dtype;
    e.shape = t.shape;
    e.offset = at;
    e.bytes = pack_entry_bytes(e.dtype, e.shape);
    at = (at + e.bytes + kPackAlign - 1) / kPackAlign * kPackAlign;
    m.tensors.push_back(std::move(e));
  }
  if (!bad.empty()) {
    std::string list;
    for (size_t i = 0; i < bad.size() && i < 8; ++i) list += "\n  " + bad[i];
    if (bad.size() > 8) list += fmt::format("\n  ... and {} more", bad.size() - 8);
    fail("{} tensor(s) cannot be stored in their format; nothing was written:{}\n"
         "choose another format for the class with --set CLASS=FORMAT (e.g. q8 or fp8, which take any shape)",
         bad.size(), list);
  }
  m.blob_bytes = m.tensors.empty() ? 0 : m.tensors.back().offset + m.tensors.back().bytes;
  return m;
}

PackManifest quantize_model(const QuantizeOptions& o, const QuantizeProgress& progress) {
  const QuantPolicy policy = make_quant_policy(o.profile, o.sets);
  const fs::path model = clean(o.model_dir), out = clean(o.out_dir);
  if (is_pack_dir(model.string()))
    fail("'{}' is already a .dgq pack; quantize reads a Hugging Face checkpoint directory", model.string());
  const Checkpoint ck = Checkpoint::open(model.string());
  PackManifest m = plan_pack(ck.config, ck.store, policy);
  m.source = model.filename().string();
  for (const char* s : kSidecars)
    if (fs::is_regular_file(model / s)) m.sidecars.emplace_back(s);
  check_output(out, model, o.force);

  const fs::path tmp = fs::path(out.string() + ".dgq-partial");
  std::error_code ec;
  fs::remove_all(tmp, ec);  // a leftover of an interrupted run (never loadable: it has no manifest at `out`)
  try {
    fs::create_directories(tmp);
    uint64_t total = 0, done = 0;
    for (const PackEntry& e : m.tensors) total += ck.store.info(e.name).nbytes;
    BlobFile blob((tmp / kPackBlobFile).string(), m.blob_bytes);
    for (const PackEntry& e : m.tensors)
      write_pack_tensor(blob, ck.store.info(e.name), e, [&](uint64_t n) {
        done += n;
        if (progress) progress(done, total);
      });
    blob.finish();
    checksum_blob(tmp / kPackBlobFile, m);
    for (const std::string& s : m.sidecars) fs::copy_file(model / s, tmp / s, fs::copy_options::overwrite_existing);
    for (const std::string& s : m.sidecars) sync_path(tmp / s, false);
    write_file(tmp / kPackManifestFile, manifest_to_json(m));  // last: a directory without it is not a pack
    sync_path(tmp, true);
    if (fs::exists(out)) fs::remove_all(out);  // check_output allowed only a pack or an empty directory here
    fs::rename(tmp, out);
    sync_path(out.has_parent_path() ? out.parent_path() : fs::path("."), true);
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(tmp, ec);
    fail("writing the pack '{}': {}", out.string(), e.what());
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  return m;
}

}  // namespace dg
