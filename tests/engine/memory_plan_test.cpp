// The server's memory plan (src/serving/memory_plan.h): a stream's KV bytes are what KvCache allocates on a device,
// the self-conditioning state is canvas x vocab at the backend's tempered storage, the batch is the largest that
// fits less the margin (capped), and an explicit --max-batch or --slots that does not fit is an error naming the
// numbers. On the server: batching is on by default, --max-batch 1 keeps the serial worker.
#include <gtest/gtest.h>

#include "core/host_memory.h"
#include "serving/memory_plan.h"
#include "model/kv_cache.h"
#include "model/synthetic.h"
#include "support/expect_error.h"

namespace dg {
namespace memory_plan_test {

constexpr size_t kGiB = size_t{1} << 30;

MemoryRequest cuda_request(int64_t context) {
  MemoryRequest r;
  r.context = context;
  r.ring_slack = 2048;
  r.prefill_rows = 4096;
  r.bytes = StorageBytes{2, 2, 2, 2};
  return r;
}

// What a device KV cache allocates: every tensor's bytes, counted without allocating them.
size_t device_kv_bytes(const ModelConfig& cfg, int64_t context, int64_t slack) {
  size_t bytes = 0;
  KvOptions o;
  o.storage = Storage::kF16;
  o.ring_slack = slack;
  o.initial_capacity = context;
  o.device_alloc = [&bytes](Shape s) {
    Tensor t;
    t.dtype = DType::kF16;
    t.shape = s;
    bytes += t.nbytes();
    return t;
  };
  const KvCache kv(cfg, o);
  return bytes;
}

TEST(MemoryPlan, AStreamsKvBytesAreWhatTheDeviceCacheAllocates) {
  const ModelConfig cfg = diffusiongemma_26b_config();
  for (const int64_t ctx : {int64_t{1024 + 256}, int64_t{8192 + 256}, int64_t{32768 + 256}}) {
    const StreamMemory m = stream_memory(cfg, cuda_request(ctx));
    EXPECT_EQ(m.kv, device_kv_bytes(cfg, ctx, 2048)) << ctx;
  }
  const StreamMemory m = stream_memory(cfg, cuda_request(8192 + 256));
  EXPECT_EQ(m.tempered, size_t{256} * 262144 * 2) << "bf16 tempered logits [canvas, vocab]";
  // 25 sliding layers of 3,071 ring slots x 8 heads x 256 and 5 full layers of 8,448 positions x 2 heads x 512,
  // keys and values in f16.
  EXPECT_EQ(m.kv, size_t{25} * 3071 * 8 * 256 * 2 * 2 + size_t{5} * 8448 * 2 * 512 * 2 * 2);
}

TEST(MemoryPlan, TheBatchIsTheMostThatFitsCappedAndTheSlotsFollowIt) {
  const ModelConfig cfg = diffusiongemma_26b_config();
  MemoryRequest r = cuda_request(8192 + 256);
  const StreamMemory s = stream_memory(cfg, r);
  const size_t shared = shared_memory(cfg, r, true).total();
  const size_t per = s.kv + s.working();
  // Room for exactly 10 streams beside the shared buffers and the 1 GiB margin (5% of 10 GiB is less).
  const size_t free = kGiB + shared + 10 * per + per / 2;
  const MemoryPlan p = plan_memory(cfg, r, MemoryInfo{free, 10 * kGiB});
  EXPECT_EQ(p.fits, 10);
  EXPECT_EQ(p.max_batch, 10);
  EXPECT_EQ(p.slots, 10);
  EXPECT_LE(p.need(10, 10), free - p.margin);
  EXPECT_GT(p.need(11, 11), free - p.margin);
  EXPECT_NE(p.why.find("10 (as many as fit"), std::string::npos) << p.why;

  r.cap = 4;
  const MemoryPlan capped = plan_memory(cfg, r, MemoryInfo{free, 10 * kGiB});
  EXPECT_EQ(capped.max_batch, 4);
  EXPECT_EQ(capped.slots, kMinSlots);
  EXPECT_NE(capped.why.find("the backend's cap; 10 would fit"), std::string::npos) << capped.why;

  r.cap = 64;
  r.slots = 6;  // given: the batch stays within it, and its caches are counted
  const MemoryPlan slots = plan_memory(cfg, r, MemoryInfo{free, 10 * kGiB});
  EXPECT_EQ(slots.max_batch, 6);
  EXPECT_EQ(slots.slots, 6);

  // The margin is 5% of the total where that is more than 1 GiB.
  EXPECT_EQ(plan_memory(cfg, cuda_request(8192 + 256), MemoryInfo{free, 100 * kGiB}).margin, 5 * kGiB);
}

TEST(MemoryPlan, WhatDoesNotFitIsAnErrorNamingTheNumbers) {
  const ModelConfig cfg = diffusiongemma_26b_config();
  MemoryRequest r = cuda_request(8192 + 256);
  const StreamMemory s = stream_memory(cfg, r);
  const size_t free = kGiB + shared_memory(cfg, r, true).total() + 10 * (s.kv + s.working());
  r.max_batch = 12;
  DG_EXPECT_ERROR(plan_memory(cfg, r, MemoryInfo{free, 10 * kGiB}), "--max-batch 12 with 12 slots needs",
                  "12 KV caches of 0.75 GiB at 8448 tokens", "10 fit");
  r.max_batch = 10;
  EXPECT_EQ(plan_memory(cfg, r, MemoryInfo{free, 10 * kGiB}).max_batch, 10);
  r.max_batch = 1;  // the serial worker, with kMinSlots sessions
  const MemoryPlan serial = plan_memory(cfg, r, MemoryInfo{free, 10 * kGiB});
  EXPECT_EQ(serial.max_batch, 1);
  EXPECT_EQ(serial.slots, kMinSlots);
  r.max_batch = 0;
  DG_EXPECT_ERROR(plan_memory(cfg, r, MemoryInfo{2 * kGiB, 80 * kGiB}), "not even one stream fits",
                  "lower --ctx or --slots");
}

TEST(MemoryPlan, MeminfoGivesAvailableAndTotalBytes) {
  const MemoryInfo m = parse_meminfo("MemTotal:       16384 kB\nMemFree:  100 kB\nMemAvailable:    8192 kB\n");
  EXPECT_EQ(m.total, size_t{16384} * 1024);
  EXPECT_EQ(m.free, size_t{8192} * 1024);
  EXPECT_EQ(parse_meminfo("garbage").free, 0u);
  EXPECT_GT(host_memory().total, 0u);
}

}  // namespace memory_plan_test
}  // namespace dg
