// The route table and the handlers: authentication, body checks, queueing (429), and the two ways an answer goes
// out: one JSON body once the job is done, or an SSE stream that follows the job's events. HTTP threads never
// touch the engine: they read the job's event channel and mark the job cancelled when the client goes away.
#include <chrono>
#include <ctime>

#include <fmt/format.h>
#include <httplib.h>

#include "server/peer_socket.h"
#include "server/server.h"
#include "server/sse.h"

namespace dg::server {
namespace {

using namespace std::chrono_literals;
constexpr auto kPoll = 200ms;        // how often a waiting handler looks at its job
constexpr auto kHeartbeat = 1s;      // silence after which a stream writes an SSE comment (finds closed sockets)
constexpr auto kDeadlineGrace = 2s;  // the worker answers timeouts; a handler gives up on its own only after this

void reply_error(httplib::Response& res, int status, const std::string& message, const std::string& code = "",
                 const std::string& param = "", std::string type = "") {
  if (type.empty()) type = error_type_of(status);
  res.status = status;
  res.set_content(error_body(message, type, code, param).dump(-1, ' ', false, Json::error_handler_t::replace),
                  "application/json");
}

void reply_json(httplib::Response& res, const Json& j) {
  res.status = 200;
  res.set_content(j.dump(-1, ' ', false, Json::error_handler_t::replace), "application/json");
}

// A fixed set of labels for /metrics (unknown paths share one).
std::string route_label(const std::string& path) {
  for (const char* r : {"/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics"})
    if (path == r) return r;
  return "other";
}

bool same_secret(const std::string& a, const std::string& b) {
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

}  // namespace

void Server::install_routes() {
  httplib::Server& h = *http_;
  h.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (opt_.api_key.empty() || req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
    if (same_secret(req.get_header_value("Authorization"), "Bearer " + opt_.api_key))
      return httplib::Server::HandlerResponse::Unhandled;
    reply_error(res, 401, "invalid or missing API key: send the header 'Authorization: Bearer KEY'",
                "invalid_api_key");
    return httplib::Server::HandlerResponse::Handled;
  });
  h.Get("/health", [](const httplib::Request&, httplib::Response& res) { reply_json(res, {{"status", "ok"}}); });
  h.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    reply_json(res, model_list(opt_.model_id, started_));
  });
  h.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    const QueueGauges q{queue_.size(), queue_.capacity(), opt_.slots, opt_.max_batch};
    res.set_content(prometheus_text(http_stats_, worker_stats_, q), "text/plain; version=0.0.4");
  });
  h.Post("/v1/chat/completions",
         [this](const httplib::Request& req, httplib::Response& res) { handle_generate(req, res, true); });
  h.Post("/v1/completions",
         [this](const httplib::Request& req, httplib::Response& res) { handle_generate(req, res, false); });
  // Statuses httplib sets itself (404 unknown route, 413 body too large, 400 unreadable request) get a JSON body.
  h.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const std::string msg = res.status == 404   ? "no route " + req.method + " " + req.path
                            : res.status == 413 ? std::string("the request body is larger than this server accepts")
                                                : "the request could not be read (HTTP " + std::to_string(res.status) + ")";
    reply_error(res, res.status, msg);
  });
  h.set_exception_handler([this](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    say("internal error: " + what);
    reply_error(res, 500, "internal error: " + what);
  });
  h.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    http_stats_.count(route_label(req.path), res.status);
  });
}

void Server::handle_generate(const httplib::Request& req, httplib::Response& res, bool chat) {
  ParsedRequest p;
  try {
    const Json body = parse_body(req.body);
    p = chat ? parse_chat_request(body, wire_) : parse_completion_request(body, wire_);
  } catch (const ApiError& e) {
    reply_error(res, e.status, e.what(), e.code, e.param, e.type);
    return;
  } catch (const std::exception& e) {  // a tokenizer or template error the parser did not name
    reply_error(res, 400, e.what());
    return;
  }
  auto job = std::make_shared<Job>();
  job->id = next_job_++;
  job->spec = std::move(p.spec);
  job->spec.call_id_prefix = fmt::format("call_{}{}_", id_prefix_, job->id);
  job->enqueued = Clock::now();
  job->deadline = job->enqueued + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(opt_.timeout_s));
  const ResponseMeta meta{fmt::format("{}-{}{}", chat ? "chatcmpl" : "cmpl", id_prefix_, job->id),
                          static_cast<int64_t>(std::time(nullptr)), opt_.model_id};
  if (!queue_.push(job)) {
    if (queue_.closed()) {
      reply_error(res, 503, "the server is shutting down");
      return;
    }
    reply_error(res, 429, fmt::format("the server is busy ({} requests are waiting); retry later", queue_.capacity()),
                "queue_full");
    return;
  }
  if (p.stream)
    stream_answer(res, job, meta, chat, p.include_usage);
  else
    wait_for_answer(req, res, job, meta, chat);
}

void Server::wait_for_answer(const httplib::Request& req, httplib::Response& res, const std::shared_ptr<Job>& job,
                             const ResponseMeta& meta, bool chat) {
  // Nothing is written until the answer is ready, so a hang-up is seen on the socket itself (docs/SERVER.md).
  const int fd = socket_find({req.local_addr, req.local_port, req.remote_addr, req.remote_port});
  if (fd < 0)
    say(fmt::format("job {}: the socket of {}:{} was not found: a hang-up will not cancel this request", job->id,
                    req.remote_addr, req.remote_port));
  Clock::time_point next_look = Clock::now() + kPoll;
  for (;;) {
    std::optional<JobEvent> e = job->events.pop(kPoll);
    if (e && e->kind == JobEvent::Kind::kDone) {
      reply_json(res, chat ? chat_completion(meta, *e) : text_completion(meta, *e));
      return;
    }
    if (e && e->kind == JobEvent::Kind::kError) {
      reply_error(res, e->status, e->text);
      return;
    }
    const Clock::time_point now = Clock::now();
    if (fd >= 0 && now >= next_look) {
      next_look = now + kPoll;
      if (socket_peer_gone(fd)) {
        job->cancelled = true;  // the job leaves at its next denoise step
        reply_error(res, 499, "the client closed the connection", "client_closed");
        return;
      }
    }
    if (now > job->deadline + kDeadlineGrace) {
      job->cancelled = true;
      reply_error(res, 504, "the request timed out", "timeout");
      return;
    }
  }
}

void Server::stream_answer(httplib::Response& res, const std::shared_ptr<Job>& job, const ResponseMeta& meta,
                           bool chat, bool include_usage) {
  struct State {
    SseEncoder enc;
    bool started = false;
    Clock::time_point last_write = Clock::now();
  };
  auto st = std::make_shared<State>(State{SseEncoder(meta, chat, include_usage)});
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [job, st](size_t, httplib::DataSink& sink) {
        auto write = [&](const std::string& s) {
          if (s.empty()) return true;
          if (!sink.write(s.data(), s.size())) {
            job->cancelled = true;  // the client went away: the job leaves at its next denoise step
            return false;
          }
          st->last_write = Clock::now();
          return true;
        };
        if (!st->started) {  // the first bytes go out at once, before the worker takes the job
          st->started = true;
          return write(st->enc.start());
        }
        std::optional<JobEvent> e = job->events.pop(kPoll);
        if (!e) {
          if (Clock::now() > job->deadline + kDeadlineGrace) {
            job->cancelled = true;
            const bool ok = write(st->enc.error(504, "the request timed out"));
            sink.done();
            return ok;
          }
          return Clock::now() - st->last_write < kHeartbeat || write(kSseHeartbeat);
        }
        if (!write(st->enc.encode(*e))) return false;
        if (st->enc.finished()) sink.done();
        return true;
      },
      [job](bool success) {
        if (!success) job->cancelled = true;
      });
}

}  // namespace dg::server
