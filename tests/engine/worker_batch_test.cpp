// The device worker without HTTP, on each backend: concurrent chat jobs on the embedded model are denoised
// together (--max-batch 4) and each answer equals the one-job-at-a-time worker's. On CUDA this is the server's
// batched GPU path (the HTTP layer above it is CPU-only code, tested in tests/server/); skipped without a GPU.
#include <gtest/gtest.h>

#include <cctype>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine_core.h"
#include "chat/chat_tokens.h"
#include "chat/template.h"
#include "serving/worker.h"
#include "support/paths.h"

#if defined(DG_WITH_CUDA)
#include "core/cuda/cuda_check.h"
#endif

namespace dg {
namespace worker_batch_test {

struct Answer {
  std::string text, finish;
};

// Pushes one chat job per user message at once, then collects every job's final event.
std::vector<Answer> run_jobs(const EngineCore& engine, int max_batch, const std::vector<std::string>& prompts,
                             double* occupancy_mean) {
  JobQueue queue(16);
  WorkerStats stats(max_batch);
  WorkerOptions opt;
  opt.max_batch = max_batch;
  opt.slots = 4;
  Worker worker(engine, queue, stats, opt);
  worker.start();
  const ChatTokens chat = ChatTokens::from(engine.tokenizer());
  std::vector<std::shared_ptr<Job>> jobs;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto job = std::make_shared<Job>();
    job->id = i + 1;
    job->spec.kind = JobSpec::Kind::kChat;
    Message m;
    m.content = prompts[i];
    job->spec.conversation.messages.push_back(m);
    const RenderedPrompt r = render_chat(job->spec.conversation, job->spec.render, engine.tokenizer(), chat);
    job->spec.prompt = r.ids;
    job->spec.prompt_end = r.end;
    job->spec.sampler = engine.default_sampler(SamplerProfile::kContract);
    job->spec.sampler.seed = 10 + i;
    job->spec.sampler.max_new_tokens = 96;
    job->spec.sampler.steps = 4;
    job->spec.sampler.confidence_threshold = 1e-30;  // no confident stop: the jobs overlap for several blocks
    jobs.push_back(job);
  }
  for (const auto& job : jobs) EXPECT_TRUE(queue.push(job));
  std::vector<Answer> out;
  for (const auto& job : jobs) {
    Answer a;
    for (;;) {
      const std::optional<JobEvent> e = job->events.pop(std::chrono::minutes(5));
      if (!e) {
        ADD_FAILURE() << "job " << job->id << ": no final event within 5 minutes";
        break;
      }
      if (e->kind == JobEvent::Kind::kDone) {
        a.text = e->reply.content;
        a.finish = e->finish;
        break;
      }
      if (e->kind == JobEvent::Kind::kError) {
        ADD_FAILURE() << "job " << job->id << ": " << e->text;
        break;
      }
    }
    out.push_back(a);
  }
  worker.stop();
  const Histogram::Snapshot occ = stats.batch_occupancy.snapshot();
  *occupancy_mean = occ.count > 0 ? occ.sum / static_cast<double>(occ.count) : 0.0;
  return out;
}

class WorkerBatch : public ::testing::TestWithParam<std::string> {};

TEST_P(WorkerBatch, ConcurrentJobsAreDenoisedTogetherAndAnswerAsAlone) {
  const std::string backend = GetParam();
#if defined(DG_WITH_CUDA)
  if (backend == "cuda" && cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
#else
  if (backend == "cuda") GTEST_SKIP() << "a build without CUDA";
#endif
  EngineOptions eo;
  eo.model_dir = test::source_path("models/dg-tiny");
  eo.backend = backend;
  const std::unique_ptr<EngineCore> engine = EngineCore::open(eo);
  const std::vector<std::string> prompts = {"Count from 1 to 40.", "Name some colours.", "Tell me about cats.",
                                            "Write a poem about the sea."};
  double alone_occ = 0, batch_occ = 0;
  const std::vector<Answer> alone = run_jobs(*engine, 1, prompts, &alone_occ);
  const std::vector<Answer> together = run_jobs(*engine, 4, prompts, &batch_occ);
  ASSERT_EQ(alone.size(), together.size());
  for (size_t i = 0; i < alone.size(); ++i) {
    EXPECT_FALSE(alone[i].text.empty()) << "job " << i;
    EXPECT_EQ(together[i].text, alone[i].text) << "job " << i;
    EXPECT_EQ(together[i].finish, alone[i].finish) << "job " << i;
  }
  std::cout << "  " << backend << ": mean batch occupancy " << batch_occ << " (one at a time: " << alone_occ << ")\n";
  EXPECT_GT(batch_occ, 1.0) << "some step must denoise more than one job";
}

INSTANTIATE_TEST_SUITE_P(Backends, WorkerBatch, ::testing::Values("cpu", "cuda"),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string s = i.param;
                           s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
                           return s;
                         });

}  // namespace worker_batch_test
}  // namespace dg
