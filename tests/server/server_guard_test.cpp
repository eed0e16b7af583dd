// What a request must show before a route runs: a Host this server answers to (DNS rebinding), no Origin of
// another site (a web page), a JSON content type unless it carries the API key (a page can post a form or
// text/plain cross-site without asking first), and the key with the Bearer scheme in any case. Also the guard's
// header parsing on its own.
#include <gtest/gtest.h>

#include <unistd.h>

#include "server/guard.h"
#include "server_test_util.h"

namespace dg::test {
namespace server_guard_test {

constexpr const char* kChat = "/v1/chat/completions";

struct Raw {
  int status = 0;
  json error;
};

// One request over a raw socket with exactly these headers (Host included); the status and error object.
Raw raw(int port, const std::string& method, const std::string& path, const std::string& headers,
        const std::string& body = "") {
  const std::string req = method + " " + path + " HTTP/1.1\r\n" + headers + "Content-Length: " +
                          std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  const int fd = connect_and_send(port, req);
  Raw r;
  if (fd < 0) return r;
  const std::string got = recv_all(fd, 30);
  ::close(fd);
  if (got.rfind("HTTP/1.1 ", 0) == 0) r.status = std::atoi(got.c_str() + 9);
  const size_t at = got.find("\r\n\r\n");
  const json j = at == std::string::npos ? json() : json::parse(got.substr(at + 4), nullptr, false);
  if (j.is_object() && j.contains("error")) r.error = j["error"];
  return r;
}

TEST(ServerGuard, AHostNameThatIsNotOursIsRefused) {
  server::ServerOptions o;
  o.allowed_hosts = {"api.example.com"};
  TestServer s(o, true);
  const std::string body = chat_request("rebinding").dump(), json_ct = "Content-Type: application/json\r\n";
  // A page of rebind.example whose name now resolves to 127.0.0.1 sends its own name.
  Raw r = raw(s.port, "POST", kChat, "Host: rebind.example:" + std::to_string(s.port) + "\r\n" + json_ct, body);
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(r.error["code"], "host_not_allowed") << r.error;
  EXPECT_EQ(raw(s.port, "GET", "/v1/models", "Host: rebind.example\r\n").status, 403);
  for (const std::string& host : {"127.0.0.1:" + std::to_string(s.port), std::string("localhost:8080"),
                                 std::string("[::1]:8080"), std::string("API.example.com")})
    EXPECT_EQ(raw(s.port, "POST", kChat, "Host: " + host + "\r\n" + json_ct, body).status, 200) << host;
}

TEST(ServerGuard, APageOfAnotherSiteIsRefused) {
  TestServer s({}, true);
  const std::string host = "Host: 127.0.0.1:" + std::to_string(s.port) + "\r\n";
  const std::string body = chat_request("csrf").dump();
  // A cross-site fetch or form post carries its page's Origin.
  Raw r = raw(s.port, "POST", kChat, host + "Origin: https://evil.example\r\nContent-Type: application/json\r\n", body);
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(r.error["code"], "cross_origin") << r.error;
  EXPECT_EQ(raw(s.port, "POST", kChat, host + "Origin: null\r\nContent-Type: application/json\r\n", body).status, 403);
  // A body that is not declared JSON: a page can send text/plain or a form without a CORS preflight.
  for (const char* ct : {"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"}) {
    r = raw(s.port, "POST", kChat, host + "Content-Type: " + ct + "\r\n", body);
    EXPECT_EQ(r.status, 415) << ct;
    EXPECT_NE(r.error["message"].get<std::string>().find("application/json"), std::string::npos) << r.error;
  }
  EXPECT_EQ(raw(s.port, "POST", kChat, host, body).status, 415) << "no Content-Type";
  EXPECT_EQ(raw(s.port, "POST", kChat, host + "Content-Type: Application/JSON; charset=utf-8\r\n", body).status, 200);
  EXPECT_EQ(raw(s.port, "POST", kChat,
                host + "Origin: http://127.0.0.1:" + std::to_string(s.port) + "\r\nContent-Type: application/json\r\n",
                body).status,
            200)
      << "the server's own origin";
}

TEST(ServerGuard, TheBearerSchemeIsCaseInsensitive) {
  server::ServerOptions o;
  o.api_keys = {"sk-case"};
  TestServer s(o, true);
  for (const char* scheme : {"Bearer", "bearer", "BEARER"}) {
    auto r = s.post(kChat, chat_request("key"), {{"Authorization", std::string(scheme) + " sk-case"}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << scheme << " " << r->body;
  }
  // With a key, a page cannot send it unless a proxy lets it (CORS): Origin and content type are the key's business.
  auto proxied = s.client().Post(kChat, {{"Authorization", "Bearer sk-case"}, {"Origin", "https://app.example"}},
                                 chat_request("key").dump(), "text/plain");
  ASSERT_TRUE(proxied);
  EXPECT_EQ(proxied->status, 200) << proxied->body;
  for (const char* bad : {"Bearer sk-Case", "Basic sk-case", "Bearersk-case", "sk-case"}) {
    auto r = s.post(kChat, chat_request("key"), {{"Authorization", bad}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << bad;
  }
}

TEST(Guard, ParsesTheHeadersItChecks) {
  using namespace server;
  EXPECT_EQ(bearer_token("Bearer abc"), "abc");
  EXPECT_EQ(bearer_token("  bEaReR \t abc  "), "abc");
  EXPECT_EQ(bearer_token("Bearer"), "");
  EXPECT_EQ(bearer_token("Token abc"), "");
  EXPECT_EQ(host_name("[::1]:8080"), "::1");
  EXPECT_EQ(host_name("Example.COM:80"), "example.com");
  EXPECT_EQ(host_name("::1"), "::1");
  EXPECT_TRUE(host_allowed("", {}));
  EXPECT_TRUE(host_allowed("10.1.2.3:9", {}));
  EXPECT_TRUE(host_allowed("LOCALHOST", {}));
  EXPECT_FALSE(host_allowed("localhost.evil.example", {}));
  EXPECT_FALSE(host_allowed("127.0.0.1.nip.io:8080", {}));
  EXPECT_TRUE(host_allowed("gpu-box:8080", {"GPU-box"}));
  EXPECT_TRUE(host_allowed("anything", {"*"}));
  EXPECT_TRUE(origin_allowed("", "x"));
  EXPECT_TRUE(origin_allowed("http://127.0.0.1:8080", "127.0.0.1:8080"));
  EXPECT_FALSE(origin_allowed("http://127.0.0.1:9999", "127.0.0.1:8080"));
  EXPECT_FALSE(origin_allowed("null", "127.0.0.1:8080"));
  EXPECT_TRUE(is_json_content_type("application/json"));
  EXPECT_TRUE(is_json_content_type(" APPLICATION/JSON ;charset=UTF-8"));
  EXPECT_FALSE(is_json_content_type("text/plain"));
  EXPECT_FALSE(is_json_content_type("application/jsonx"));
  EXPECT_FALSE(is_json_content_type(""));
}

}  // namespace server_guard_test
}  // namespace dg::test
