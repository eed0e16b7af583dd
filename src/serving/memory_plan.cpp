#include "serving/memory_plan.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"

namespace dg {
namespace {

constexpr size_t kGiB = size_t{1} << 30;
constexpr int kMostStreams = 1 << 16;  // the search for what fits stops here

size_t u(int64_t v) { return static_cast<size_t>(std::max<int64_t>(v, 0)); }

}  // namespace

std::string gib(size_t bytes) { return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / kGiB); }

size_t activation_bytes_per_row(const ModelConfig& c, int act_bytes) {
  // The buffers Model::layer holds at once (src/model/forward.cpp), the MoE's inside it (the grouped-GEMM path of
  // the CUDA backend, the widest), per row.
  size_t most = 0;
  for (const LayerSpec& s : c.layers) {
    const int64_t kv = int64_t{s.n_kv_heads} * s.head_dim, q = int64_t{c.n_heads} * s.head_dim;
    const int64_t values = 9 * int64_t{c.hidden}             // input, norm, attn, h1, u, z, m1, m2, out
                           + (s.sliding ? 4 : 3) * kv        // k, v (sliding layers), k and v normed
                           + 3 * q                           // q, q normed, attention output
                           + c.intermediate                  // the dense MLP's gate
                           + c.hidden + c.n_experts          // router input and scores
                           + 2 * int64_t{c.top_k} * c.hidden      // gathered rows, expert outputs
                           + 3 * int64_t{c.top_k} * c.expert_ff;  // gate|up, activation
    most = std::max(most, u(values) * static_cast<size_t>(act_bytes) + u(c.top_k) * 16);  // + routing indices
  }
  return most;
}

StreamMemory stream_memory(const ModelConfig& c, const MemoryRequest& r) {
  StreamMemory m;
  for (const LayerSpec& s : c.layers) {
    const int64_t slots = s.sliding ? std::max<int64_t>(1, c.window - 1 + r.ring_slack) : r.context;
    m.kv += u(slots) * u(s.n_kv_heads) * u(s.head_dim) * 2 * static_cast<size_t>(r.bytes.kv);
  }
  m.tempered = u(c.canvas) * u(c.vocab) * static_cast<size_t>(r.bytes.tempered);
  m.activations = u(c.canvas) * activation_bytes_per_row(c, r.bytes.act);
  m.canvas = u(c.canvas) * (4 + 12 + 8 + 4);  // id, RowStats, uniform, draw
  return m;
}

SharedMemory shared_memory(const ModelConfig& c, const MemoryRequest& r, bool batched) {
  SharedMemory m;
  const int64_t rows = batched ? std::max<int64_t>(r.logit_rows, c.canvas) : c.canvas;
  m.logits = u(rows) * u(c.vocab) * 4;
  m.prefill = u(r.prefill_rows) * activation_bytes_per_row(c, r.bytes.act);
  m.soft_embed = u(c.canvas) * u(c.vocab) * static_cast<size_t>(r.bytes.act);
  return m;
}

size_t MemoryPlan::need(int batch, int n_slots) const {
  return static_cast<size_t>(n_slots) * stream.kv + static_cast<size_t>(batch) * stream.working() + shared.total();
}

MemoryPlan plan_memory(const ModelConfig& c, const MemoryRequest& r, MemoryInfo memory) {
  DG_CHECK(r.max_batch >= 0 && r.slots >= 0 && r.cap >= 1, "memory plan: --max-batch {} and --slots {} must be >= 0",
           r.max_batch, r.slots);
  MemoryPlan p;
  p.stream = stream_memory(c, r);
  p.memory = memory;
  p.margin = std::max(kGiB, memory.total / 20);
  const size_t budget = memory.free > p.margin ? memory.free - p.margin : 0;
  const SharedMemory serial = shared_memory(c, r, false), batched = shared_memory(c, r, true);
  const auto slots_for = [&](int b) { return r.slots > 0 ? r.slots : std::max(b, kMinSlots); };
  const auto shared_for = [&](int b) { return b > 1 ? batched : serial; };  // a batch of 1 runs the serial worker
  const auto need = [&](int b, int s) {
    return static_cast<size_t>(s) * p.stream.kv + static_cast<size_t>(std::min(b, s)) * p.stream.working() +
           shared_for(b).total();
  };
  while (p.fits < kMostStreams && need(p.fits + 1, slots_for(p.fits + 1)) <= budget) ++p.fits;

  const std::string each =
      fmt::format("a stream holds {} (KV cache {} at {} tokens, self-conditioning {}, activations {})",
                  gib(p.stream.kv + p.stream.working()), gib(p.stream.kv), r.context, gib(p.stream.tempered),
                  gib(p.stream.activations + p.stream.canvas));
  const std::string room = fmt::format("{} free of {}, {} kept as margin", gib(memory.free), gib(memory.total),
                                       gib(p.margin));
  if (r.max_batch == 0) {
    const int bound = r.slots > 0 ? std::min(r.cap, r.slots) : r.cap;
    p.max_batch = std::min(p.fits, bound);
    p.slots = slots_for(p.max_batch);
    DG_CHECK(p.max_batch >= 1,
             "not even one stream fits: {} KV caches ({} slots) and one stream need {} with {} shared, but there is "
             "{}; lower --ctx or --slots, or give more memory",
             gib(static_cast<size_t>(slots_for(1)) * p.stream.kv), slots_for(1), gib(need(1, slots_for(1))),
             gib(serial.total()), room);
    const char* reason = p.max_batch == p.fits ? "as many as fit"
                         : p.max_batch == r.slots ? "--slots"
                                                  : "the backend's cap";
    p.shared = shared_for(p.max_batch);
    p.why = fmt::format("{} ({}; {} would fit): {}, {} shared; {}", p.max_batch, reason, p.fits, each,
                        gib(p.shared.total()), room);
    return p;
  }
  p.slots = slots_for(r.max_batch);
  p.max_batch = std::min(r.max_batch, p.slots);
  p.shared = shared_for(p.max_batch);
  const size_t needed = need(p.max_batch, p.slots);
  DG_CHECK(needed <= budget,
           "--max-batch {} with {} slots needs {} ({} KV caches of {} at {} tokens, {} streams in flight of {} each, "
           "{} shared), but there is {}: {} fit; lower --max-batch, --slots or --ctx",
           r.max_batch, p.slots, gib(needed), p.slots, gib(p.stream.kv), r.context, p.max_batch,
           gib(p.stream.working()), gib(p.shared.total()), room, p.fits);
  p.why = fmt::format("{} (as given; {} would fit): {}, {} shared; {}", p.max_batch, p.fits, each,
                      gib(p.shared.total()), room);
  return p;
}

}  // namespace dg
