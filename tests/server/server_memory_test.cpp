// Memory and the server: a device that runs out of memory mid-request answers 503 with Retry-After and the code
// out_of_memory (plain and streamed) while the server goes on; `serve --plan` prints the memory plan of a model
// without loading it (the full 26B-A4B shape on an H200 and an H100 here), and an explicit batch that does not fit
// is an error naming the numbers.
#include <gtest/gtest.h>

#include <thread>

#include "core/error.h"
#include "server_test_util.h"
#include "support/paths.h"
#include "support/process.h"

namespace dg::test {
namespace server_memory_test {

// Encodes through the model; every denoise step finds the device full.
class FullDevice final : public Denoiser {
 public:
  explicit FullDevice(const Model& m) : m_(m) {}
  int canvas() const override { return m_.config().canvas; }
  int64_t vocab() const override { return m_.config().vocab; }
  void encode(KvCache& kv, std::span<const int32_t> ids) override { m_.encode(kv, ids); }
  void denoise(const KvCache&, std::span<const int32_t>, ScKind, float, float, RowStats*) override {
    throw OutOfMemory("CUDA error in cudaMallocAsync: out of memory");
  }
  void draw(std::span<const double>, int32_t*) override {}

 private:
  const Model& m_;
};

TEST(ServerMemory, RunningOutOfMemoryAnswers503WithRetryAfterAndTheServerGoesOn) {
  server::ServerOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  server::Server srv(tiny_server_engine(), o, nullptr,
                     [](const Model& m, const Job&) { return std::make_unique<FullDevice>(m); });
  const int port = srv.bind();
  std::thread t([&] { srv.run(); });
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60, 0);
  for (int i = 0; i < 2; ++i) {
    const auto r = c.Post("/v1/chat/completions", chat_request("Hi").dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 503) << r->body;
    EXPECT_EQ(r->get_header_value("Retry-After"), "1");
    const json err = json::parse(r->body)["error"];
    EXPECT_EQ(err["code"], "out_of_memory") << err;
    EXPECT_NE(err["message"].get<std::string>().find("ran out of memory for this request"), std::string::npos);
  }
  const std::string streamed = stream_post(port, "/v1/chat/completions", chat_request("Hi", {{"stream", true}}),
                                           [](const std::string&) { return true; });
  EXPECT_NE(streamed.find("\"code\":\"out_of_memory\""), std::string::npos) << streamed;
  const auto health = c.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  srv.stop();
  t.join();
}

std::string plan(const std::string& args) {
  const ProcessResult r = run_command(cli_path() + " serve --plan " + args);
  EXPECT_EQ(r.code, 0) << r.out;
  return r.out;
}

TEST(ServerMemory, PlanPrintsWhatAStreamHoldsAndWhatFitsWithoutLoadingTheModel) {
  // 26B-A4B, bf16 weights, 8k context: 64 streams (the cap) on an H200 (143,771 MiB), fewer on an H100 (81,559).
  const std::string h200 = plan("-m synthetic:26b-a4b:bf16 --backend cuda --ctx 8192 --device-memory 140.4");
  EXPECT_NE(h200.find("KV cache 0.75 GiB"), std::string::npos) << h200;
  EXPECT_NE(h200.find("self-conditioning 0.12 GiB"), std::string::npos) << h200;
  EXPECT_NE(h200.find("--max-batch  64 with 64 slots"), std::string::npos) << h200;
  const std::string h100 = plan("-m synthetic:26b-a4b:bf16 --backend cuda --ctx 8192 --device-memory 79.6");
  EXPECT_EQ(h100.find("--max-batch  64 "), std::string::npos) << h100;
  const std::string q4 = plan("-m synthetic:26b-a4b:q4 --backend cuda --ctx 8192 --device-memory 79.6");
  EXPECT_LT(q4.find("weights"), q4.size());
  const ProcessResult over =
      run_command(cli_path() + " serve --plan -m synthetic:26b-a4b:bf16 --backend cuda --device-memory 79.6 "
                               "--max-batch 64");
  EXPECT_NE(over.code, 0);
  EXPECT_NE(over.out.find("--max-batch 64 with 64 slots needs"), std::string::npos) << over.out;
  // A checkpoint directory on this machine's CPU.
  const std::string tiny = plan("-m " + source_path("models/dg-tiny") + " --ctx 512");
  EXPECT_NE(tiny.find("on cpu, --ctx 512"), std::string::npos) << tiny;
  EXPECT_NE(tiny.find("--max-batch  8 with 8 slots"), std::string::npos) << tiny;
}

}  // namespace server_memory_test
}  // namespace dg::test
