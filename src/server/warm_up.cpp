// Server::warm_up: one short chat request through the worker before the listener accepts, so that the first
// client's answer does not carry the device's first-use costs (module loads, library heuristics, the first graph
// capture, allocator growth); docs/SERVER.md, "Warm-up".
#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "core/error.h"
#include "server/server.h"

namespace dg::server {

Json warm_up_body() {
  return Json{{"messages", Json::array({Json{{"role", "user"}, {"content", "Hello! Please say hello back."}}})},
              {"seed", 0}};
}

std::optional<double> Server::warm_up() {
  // Parsed as a client's request is: the same sampler profile, steps and render; the answer budget is the rest of
  // the context held to one block.
  ParsedRequest p;
  try {
    p = parse_chat_request(warm_up_body(), wire_);
  } catch (const ApiError& e) {
    fail("the warm-up request was refused: {}", e.what());
  }
  auto job = std::make_shared<Job>();
  job->id = 0;  // requests count from 1
  job->spec = std::move(p.spec);
  job->spec.sampler.max_new_tokens = std::min(job->spec.sampler.max_new_tokens, engine_.config().canvas);
  job->spec.max_tokens_given = true;
  job->spec.call_id_prefix = fmt::format("call_{}0_", id_prefix_);
  job->spec.tenant = "#warm-up";  // no request's tenant (tenant_of), and the slot is reset after
  job->enqueued = Clock::now();
  job->deadline = job->enqueued + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(opt_.timeout_s));
  worker_->start();
  const JobEvent last = worker_->warm_up(job);
  if (stopping_) return std::nullopt;
  DG_CHECK(last.kind == JobEvent::Kind::kDone, "the warm-up generation failed ({}): {}", last.status, last.text);
  return std::chrono::duration<double>(Clock::now() - job->enqueued).count();
}

}  // namespace dg::server
