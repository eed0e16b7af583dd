// The route table and the handlers: authentication, body checks, queueing (429), and the two ways an answer goes
// out: one JSON body once the job is done, or an SSE stream that follows the job's events. Handlers never touch
// the engine: they read the job's event channel and mark the job cancelled when the client goes away.
#include <chrono>
#include <ctime>
#include <string_view>

#include <fmt/format.h>

#include "server/guard.h"
#include "server/peer_socket.h"
#include "server/responses.h"
#include "server/server.h"
#include "server/sse.h"

namespace dg::server {
namespace {

using namespace std::chrono_literals;
constexpr auto kPoll = 200ms;        // how often a waiting handler looks at its job
constexpr auto kHeartbeat = 1s;      // silence after which a stream writes an SSE comment (finds closed sockets)
constexpr auto kDeadlineGrace = 2s;  // the worker answers timeouts; a handler gives up on its own only after this
constexpr int kRetryAfterSeconds = 1;  // 429 / 503: the queue moves every denoise step; clients back off from here

// An OpenAI error body; `code` defaults to the status's (error_code_of). Busy and unavailable answers say when to
// come back.
void reply_error(HttpResponse& res, int status, const std::string& message, std::string code = "",
                 const std::string& param = "", std::string type = "") {
  if (type.empty()) type = error_type_of(status);
  if (code.empty()) code = error_code_of(status);
  res.status = status;
  res.content_type = "application/json";
  res.body = error_body(message, type, code, param).dump(-1, ' ', false, Json::error_handler_t::replace);
  if (status == 429 || status == 503) res.headers.emplace_back("Retry-After", std::to_string(kRetryAfterSeconds));
}

void reply_json(HttpResponse& res, const Json& j) {
  res.status = 200;
  res.content_type = "application/json";
  res.body = j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// A fixed set of labels for /metrics (unknown paths share one).
std::string route_label(const std::string& path) {
  for (const char* r : {"/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/models", "/health",
                        "/metrics"})
    if (path == r) return r;
  if (path.rfind("/v1/models/", 0) == 0) return "/v1/models/{id}";
  return "other";
}

// A path segment with its %XX escapes decoded (RFC 3986): the OpenAI SDKs encode a model id's '/' and spaces
// (models.retrieve("google/diffusiongemma-26B-A4B-it") asks for /v1/models/google%2Fdiffusiongemma-26B-A4B-it).
// A malformed escape is kept as written.
std::string percent_decoded(std::string_view s) {
  const auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const int hi = s[i] == '%' && i + 2 < s.size() ? hex(s[i + 1]) : -1;
    const int lo = hi >= 0 ? hex(s[i + 2]) : -1;
    if (lo < 0) {
      out += s[i];
    } else {
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    }
  }
  return out;
}

bool is_json_route(const std::string& path) {
  return path == "/v1/chat/completions" || path == "/v1/completions" || path == "/v1/responses";
}

// The methods a route takes, as a 405's Allow header lists them (RFC 9110 15.5.6); nullptr: no such route.
const char* allowed_methods(const std::string& path) {
  if (is_json_route(path)) return "POST";
  if (path == "/v1/models" || path == "/metrics" || path == "/health" || path.rfind("/v1/models/", 0) == 0)
    return "GET, HEAD";
  return nullptr;
}

// OpenAI sampling fields the entropy-bound sampler has no counterpart for: a request that sets one is answered with
// their names (X-Diffgemma-Ignored-Fields, diffgemma_ignored_fields), never silently.
constexpr const char* kIgnoredSamplingFields[] = {"temperature", "top_p", "presence_penalty", "frequency_penalty",
                                                  "logit_bias", "top_k", "min_p", "repetition_penalty"};

// A finished job as a response object (POST /v1/responses).
Json responses_answer_of(const ResponseMeta& meta, const Json& request, const JobEvent& done) {
  Json r = response_object(meta, request, response_status(done.finish), response_items(meta, done.reply),
                           &done.usage, done.finish);
  if (!done.reply.errors.empty()) {
    r["diffgemma_tool_call_errors"] = Json::array();
    for (const ToolCallError& e : done.reply.errors)
      r["diffgemma_tool_call_errors"].push_back({{"message", e.message}, {"raw", e.raw}});
  }
  return r;
}

bool same_secret(const std::string& a, const std::string& b) {
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

}  // namespace

HttpHandlers Server::handlers() {
  HttpHandlers h;
  h.quick = [this](const HttpRequest& req, HttpResponse& res) { return quick(req, res); };
  h.slow = [this](const HttpRequest& req, HttpResponse& res) { slow(req, res); };
  h.refusal = [](int status, const std::string& message, const std::string& code) {
    HttpResponse res;
    reply_error(res, status, message, code);
    return res;
  };
  h.done = [this](const HttpRequest& req, int status) { http_stats_.count(route_label(req.path), status); };
  return h;
}

bool Server::quick(const HttpRequest& req, HttpResponse& res) {
  const std::string& path = req.path;
  // HEAD is GET without the body (the connection drops it), as RFC 9110 asks of every GET route.
  const bool get = req.method == "GET" || req.method == "HEAD", post = req.method == "POST";
  const std::string host = req.header("Host");
  if (!host_allowed(host, opt_.allowed_hosts)) {
    reply_error(res, 403, fmt::format("this server does not answer to the host name '{}' (a web page can reach a "
                                      "local server through a name of its own); start it with --allowed-hosts {} "
                                      "if that name is yours", host_name(host), host_name(host)),
                "host_not_allowed");
    return true;
  }
  if (path == "/health" && get) {
    reply_json(res, {{"status", "ok"}});
    return true;
  }
  const bool keyed = !opt_.api_keys.empty();
  if (keyed && key_of(req) < 0) {
    reply_error(res, 401, "invalid or missing API key: send the header 'Authorization: Bearer KEY'",
                "invalid_api_key");
    return true;
  }
  // Without an API key, nothing but the network stands between a web page and the server: a page of another site
  // (its Origin) is refused. With a key a page cannot send the key, and a proxy may do CORS for pages it trusts.
  if (!keyed && !origin_allowed(req.header("Origin"), host)) {
    reply_error(res, 403, fmt::format("requests from web pages of other sites are refused (Origin '{}'); this "
                                      "server does not do CORS", req.header("Origin")),
                "cross_origin");
    return true;
  }
  // Without an API key, a JSON body must say so: a page of another site can send a form or text/plain body to a
  // local server without asking first, but not application/json. With a key it cannot send the key.
  if (post && is_json_route(path) && !keyed && !is_json_content_type(req.header("Content-Type"))) {
    const std::string sent = req.header("Content-Type");
    reply_error(res, 415, fmt::format("the request body must be sent as 'Content-Type: application/json' (got '{}'; "
                                      "with curl: -H 'Content-Type: application/json')", sent),
                "unsupported_media_type");
    return true;
  }
  if (path == "/v1/models" && get) {
    reply_json(res, model_list(opt_.model_id, started_));
  } else if (path.rfind("/v1/models/", 0) == 0 && get) {
    const std::string id = percent_decoded(std::string_view(path).substr(std::string_view("/v1/models/").size()));
    if (id == opt_.model_id)
      reply_json(res, model_object(opt_.model_id, started_));
    else
      reply_error(res, 404, fmt::format("this server serves the model '{}', not '{}'", opt_.model_id, id),
                  "model_not_found", "model");
  } else if (path == "/metrics" && get) {
    const QueueGauges q{queue_.size(), queue_.capacity(), opt_.slots, opt_.max_batch};
    res.content_type = "text/plain; version=0.0.4";
    res.body = prometheus_text(http_stats_, worker_stats_, q, http_->counters());
  } else if (is_json_route(path) && post) {
    return false;  // parsed, rendered and queued on a handler thread
  } else if (const char* allow = allowed_methods(path)) {
    reply_error(res, 405, fmt::format("{} does not accept {} (it accepts {})", path, req.method, allow));
    res.headers.emplace_back("Allow", allow);
  } else {
    reply_error(res, 404, "no route " + req.method + " " + path);
  }
  return true;
}

int Server::key_of(const HttpRequest& req) const {
  const std::string token = bearer_token(req.header("Authorization"));
  int found = -1;
  for (size_t i = 0; i < opt_.api_keys.size(); ++i)  // every key compared in full: the time says nothing
    if (same_secret(token, opt_.api_keys[i])) found = static_cast<int>(i);
  return found;
}

std::string Server::tenant_of(const HttpRequest& req, const std::string& user, uint64_t job) const {
  if (!opt_.prefix_reuse) return fmt::format("#{}", job);  // a tenant of its own: nothing is reused
  std::string t = opt_.api_keys.empty() ? std::string() : fmt::format("key{}", key_of(req));
  if (!user.empty()) t += "\x1fuser:" + user;
  return t;
}

void Server::slow(const HttpRequest& req, HttpResponse& res) {
  handle_generate(req, res, req.path == "/v1/chat/completions" ? Api::kChat
                            : req.path == "/v1/responses"      ? Api::kResponses
                                                               : Api::kCompletion);
}

void Server::handle_generate(const HttpRequest& req, HttpResponse& res, Api api) {
  ParsedRequest p;
  Answer a;
  a.api = api;
  try {
    a.request = parse_body(req.body);
    p = api == Api::kChat         ? parse_chat_request(a.request, wire_)
        : api == Api::kCompletion ? parse_completion_request(a.request, wire_)
                                  : parse_responses_request(a.request, wire_);
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
  job->spec.tenant = tenant_of(req, p.user, job->id);
  job->enqueued = Clock::now();
  job->deadline = job->enqueued + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(opt_.timeout_s));
  const char* kind = api == Api::kChat ? "chatcmpl-" : api == Api::kCompletion ? "cmpl-" : "resp_";
  a.meta = {fmt::format("{}{}{}", kind, id_prefix_, job->id), static_cast<int64_t>(std::time(nullptr)),
            opt_.model_id};
  a.include_usage = p.include_usage;
  for (const char* k : kIgnoredSamplingFields)
    if (const auto it = a.request.find(k); it != a.request.end() && !it->is_null()) a.ignored.push_back(k);
  res.headers.emplace_back("X-Request-Id", a.meta.id);
  if (!a.ignored.empty()) {
    std::string names;
    for (const Json& k : a.ignored) names += (names.empty() ? "" : ", ") + k.get<std::string>();
    res.headers.emplace_back("X-Diffgemma-Ignored-Fields", names);
    say(fmt::format("job {}: ignored {} (the entropy-bound sampler has its own knobs)", job->id, names));
  }
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
    stream_answer(res, job, a);
  else
    wait_for_answer(req, res, job, a);
}

void Server::wait_for_answer(const HttpRequest& req, HttpResponse& res, const std::shared_ptr<Job>& job,
                             const Answer& a) {
  // Nothing is written until the answer is ready, so a hang-up is seen on the socket itself (docs/SERVER.md).
  Clock::time_point next_look = Clock::now() + kPoll;
  for (;;) {
    std::optional<JobEvent> e = job->events.pop(kPoll);
    if (e && e->kind == JobEvent::Kind::kDone) {
      Json body = a.api == Api::kChat         ? chat_completion(a.meta, *e)
                  : a.api == Api::kCompletion ? text_completion(a.meta, *e)
                                              : responses_answer_of(a.meta, a.request, *e);
      if (!a.ignored.empty()) body["diffgemma_ignored_fields"] = a.ignored;
      reply_json(res, body);
      return;
    }
    if (e && e->kind == JobEvent::Kind::kError) {
      reply_error(res, e->status, e->text, e->code);  // the same code as the stream's error event
      res.hang_up = e->status == 499;
      return;
    }
    const Clock::time_point now = Clock::now();
    if (req.fd >= 0 && now >= next_look) {
      next_look = now + kPoll;
      if (socket_peer_gone(req.fd)) {
        job->cancelled = true;  // the job leaves at its next denoise step
        reply_error(res, 499, "the client closed the connection");
        res.hang_up = true;
        return;
      }
    }
    if (now > job->deadline + kDeadlineGrace) {
      job->cancelled = true;
      reply_error(res, 504, "the request timed out");
      return;
    }
  }
}

void Server::stream_answer(HttpResponse& res, const std::shared_ptr<Job>& job, const Answer& a) {
  res.content_type = "text/event-stream";
  res.headers.emplace_back("Cache-Control", "no-cache");
  res.headers.emplace_back("X-Accel-Buffering", "no");
  const Json first = a.ignored.empty() ? Json::object() : Json{{"diffgemma_ignored_fields", a.ignored}};
  std::shared_ptr<StreamEncoder> enc;
  if (a.api == Api::kResponses)
    enc = std::make_shared<ResponsesStream>(a.meta, a.request, first);
  else
    enc = std::make_shared<SseEncoder>(a.meta, a.api == Api::kChat, a.include_usage, first);
  res.stream = [job, enc](const StreamWrite& sink) {
    Clock::time_point last_write = Clock::now();
    auto write = [&](const std::string& s) {
      if (s.empty()) return true;
      if (!sink(s)) {
        job->cancelled = true;  // the client went away: the job leaves at its next denoise step
        return false;
      }
      last_write = Clock::now();
      return true;
    };
    if (!write(enc->start())) return;  // the first bytes go out at once, before the worker takes the job
    while (!enc->finished()) {
      std::optional<JobEvent> e = job->events.pop(kPoll);
      if (!e) {
        if (Clock::now() > job->deadline + kDeadlineGrace) {
          job->cancelled = true;
          write(enc->error(504, "the request timed out"));
          return;
        }
        if (Clock::now() - last_write >= kHeartbeat && !write(kSseHeartbeat)) return;
        continue;
      }
      if (!write(enc->encode(*e))) return;
    }
  };
}

}  // namespace dg::server
