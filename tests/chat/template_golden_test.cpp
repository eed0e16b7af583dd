// Golden renders: conversations rendered by the reference Gemma 4 chat template (tests/fixtures/chat/golden.jsonl,
// made by make_goldens.py with jinja2) must come out of render_chat as the same token ids, marker ids included.
#include <gtest/gtest.h>

#include <fstream>

#include "chat/template.h"
#include "chat_test_util.h"

namespace dg::test {
namespace template_golden_test {

struct Golden {
  std::string name, text;
  bool thinking = false, generation_prompt = true;
  Conversation conv;
  std::vector<int32_t> ids;
};

std::vector<Golden> load_goldens() {
  std::ifstream in(source_path("tests/fixtures/chat/golden.jsonl"));
  std::vector<Golden> out;
  std::string line;
  while (std::getline(in, line)) {
    const Json j = Json::parse(line);
    Golden g;
    g.name = j["name"];
    g.text = j["text"];
    g.thinking = j["thinking"];
    g.generation_prompt = j["add_generation_prompt"];
    for (size_t i = 0; i < j["messages"].size(); ++i)
      g.conv.messages.push_back(message_from_json(j["messages"][i], "messages[" + std::to_string(i) + "]"));
    g.conv.tools = j["tools"];
    g.ids = j["ids"].get<std::vector<int32_t>>();
    out.push_back(std::move(g));
  }
  return out;
}

RenderedPrompt render(const Golden& g, bool open_thought) {
  RenderOptions o;
  o.thinking = g.thinking;
  o.add_generation_prompt = g.generation_prompt;
  o.open_thought = open_thought;
  return render_chat(g.conv, o, tiny_tokenizer(), tiny_chat_tokens());
}

TEST(ChatGolden, AtLeastFifteenConversationsCoverTheFormat) {
  const auto goldens = load_goldens();
  ASSERT_GE(goldens.size(), 15u);
  int with_tools = 0, thinking = 0, calls = 0;
  for (const Golden& g : goldens) {
    with_tools += !g.conv.tools.empty();
    thinking += g.thinking;
    for (const Message& m : g.conv.messages) calls += static_cast<int>(m.tool_calls.size());
  }
  EXPECT_GE(with_tools, 5);
  EXPECT_GE(thinking, 4);
  EXPECT_GE(calls, 6);
}

TEST(ChatGolden, RendersMatchTheReferenceTemplateIdForId) {
  for (const Golden& g : load_goldens()) {
    SCOPED_TRACE(g.name);
    if (g.name == "special_literals_are_text") continue;  // the reference would turn them into markers
    // The golden ids are the reference text tokenized with markers recognised (what HF does).
    ASSERT_TRUE(same_ids(tiny_tokenizer().encode(g.text, SpecialTokens::kMatch), g.ids))
        << "models/dg-tiny/tokenizer.json changed: regenerate the goldens with tests/fixtures/chat/make_goldens.py";
    EXPECT_TRUE(same_ids(render(g, false).ids, g.ids));
  }
}

TEST(ChatGolden, PlainTurnIdsArePinned) {
  // <bos><|turn>user\nHello<turn|>\n<|turn>model\n<|channel>thought\n<channel|>
  std::vector<int32_t> want = {2, 105};
  for (int32_t id : plain("user")) want.push_back(id);
  want.push_back(107);
  for (int32_t id : plain("Hello")) want.push_back(id);
  for (int32_t id : {106, 107, 105}) want.push_back(id);
  for (int32_t id : plain("model")) want.push_back(id);
  for (int32_t id : {107, 100}) want.push_back(id);
  for (int32_t id : plain("thought")) want.push_back(id);
  for (int32_t id : {107, 101}) want.push_back(id);
  for (const Golden& g : load_goldens())
    if (g.name == "plain") {
      EXPECT_TRUE(same_ids(g.ids, want));
      EXPECT_TRUE(same_ids(render(g, true).ids, want));
    }
}

TEST(ChatGolden, ClientTextCannotSmuggleAMarker) {
  for (const Golden& g : load_goldens()) {
    if (g.name != "special_literals_are_text") continue;
    const std::vector<int32_t> ids = render(g, false).ids;
    const ChatTokens& t = tiny_chat_tokens();
    auto count = [&](int32_t id) { return std::count(ids.begin(), ids.end(), id); };
    EXPECT_EQ(count(t.turn_open), 2);  // the user's turn and the generation prompt, nothing from the text
    EXPECT_EQ(count(t.channel_open), 1);
    EXPECT_EQ(count(t.quote), 0);
    EXPECT_EQ(count(t.call_close), 0);
    EXPECT_NE(ids, g.ids) << "the reference (text + tokenizer) promotes the literals to markers; we must not";
    // Decoded, the text is the same: the literals survive as characters.
    EXPECT_EQ(tiny_tokenizer().decode(ids), g.text);
    return;
  }
  FAIL() << "golden 'special_literals_are_text' missing";
}

TEST(ChatGolden, ThinkingOpensTheThoughtChannelForTheModel) {
  const std::vector<int32_t> opener = [] {
    std::vector<int32_t> v = {100};
    for (int32_t id : plain("thought")) v.push_back(id);
    v.push_back(107);
    return v;
  }();
  int checked = 0;
  for (const Golden& g : load_goldens()) {
    SCOPED_TRACE(g.name);
    const RenderedPrompt ref = render(g, false), ours = render(g, true);
    if (!g.thinking || !g.generation_prompt) {
      EXPECT_EQ(ours.ids, ref.ids);
      continue;
    }
    std::vector<int32_t> want = g.ids;
    want.insert(want.end(), opener.begin(), opener.end());
    EXPECT_TRUE(same_ids(ours.ids, want));
    EXPECT_EQ(ours.end, PromptEnd::kThought);
    ++checked;
  }
  EXPECT_GE(checked, 3);
}

TEST(ChatGolden, PromptEndTellsWhatComesNext) {
  for (const Golden& g : load_goldens()) {
    SCOPED_TRACE(g.name);
    const PromptEnd e = render(g, false).end;
    if (g.name == "tool_call_awaiting_response") {
      EXPECT_EQ(e, PromptEnd::kToolResponse);
    } else if (g.name == "plain" || g.name == "tool_call_and_response") {
      EXPECT_EQ(e, PromptEnd::kAnswer);
    } else if (g.name == "settled_no_generation_prompt") {
      EXPECT_EQ(e, PromptEnd::kClosed);
    }
  }
}

}  // namespace template_golden_test
}  // namespace dg::test
