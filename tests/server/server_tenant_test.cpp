// Prefix reuse is scoped by tenant: a request reuses only the KV cache of its own API key and `user`, so its
// cached_tokens (and its latency) never tell what another tenant sent; a slot taken over from another tenant is
// cleared first; --no-prefix-reuse turns reuse off. The probe is the attack of the issue: send another tenant's
// likely prompt and read cached_tokens.
#include <gtest/gtest.h>

#include "server_test_util.h"

namespace dg::test {
namespace server_tenant_test {

constexpr const char* kChat = "/v1/chat/completions";

// cached_tokens of one chat request (-1 when it failed).
int cached(const TestServer& s, const json& body, const std::string& key = "") {
  httplib::Headers h;
  if (!key.empty()) h.emplace("Authorization", "Bearer " + key);
  auto r = s.post(kChat, body, h);
  if (!r || r->status != 200) {
    ADD_FAILURE() << (r ? r->body : "no answer");
    return -1;
  }
  return json::parse(r->body)["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
}

TEST(ServerTenant, AnotherKeysPromptIsNeverInTheCachedTokens) {
  for (const int slots : {1, 2}) {  // one slot: the probe must take the victim's; two: it may not prefer it
    server::ServerOptions o;
    o.api_keys = {"sk-victim", "sk-prober"};
    o.slots = slots;
    TestServer s(o, true);
    const json secret = chat_request("my PIN is 4711");
    EXPECT_EQ(cached(s, secret, "sk-victim"), 0);
    EXPECT_GT(cached(s, secret, "sk-victim"), 10) << slots << " slot(s): a key reuses its own cache";
    EXPECT_EQ(cached(s, secret, "sk-prober"), 0) << slots << " slot(s): the prober learns nothing";
    EXPECT_GT(cached(s, secret, "sk-prober"), 10) << slots << " slot(s): its own earlier prompt it may reuse";
  }
}

TEST(ServerTenant, UsersAreTenantsToo) {
  server::ServerOptions o;
  o.slots = 1;
  TestServer s(o, true);
  EXPECT_EQ(cached(s, chat_request("my PIN is 4711", {{"user", "alice"}})), 0);
  EXPECT_EQ(cached(s, chat_request("my PIN is 4711", {{"user", "bob"}})), 0);
  EXPECT_EQ(cached(s, chat_request("my PIN is 4711")), 0) << "no user is a tenant of its own";
  EXPECT_GT(cached(s, chat_request("my PIN is 4711")), 10);
  auto r = s.post(kChat, chat_request("x", {{"user", 7}}));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
}

TEST(ServerTenant, PrefixReuseCanBeTurnedOff) {
  server::ServerOptions o;
  o.prefix_reuse = false;
  TestServer s(o, true);
  const json req = chat_request("the same prompt twice");
  EXPECT_EQ(cached(s, req), 0);
  EXPECT_EQ(cached(s, req), 0);
  EXPECT_EQ(s.metric("diffgemma_prompt_tokens_cached_total"), 0);
}

}  // namespace server_tenant_test
}  // namespace dg::test
