// The <think>/<tool_call> output parser of template families (Qwen3):
// reasoning and answer, tool calls (whole and split at every byte),
// malformed calls as text, and valid UTF-8 deltas.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/qwen3_output.h"
#include "tokenizer/utf8.h"

namespace deltafin::server {
namespace {

struct Parsed {
  std::string reasoning, content;
  std::vector<ToolCall> calls;
  std::vector<Delta> deltas;
};

// Feeds `pieces` one after another.
Parsed parse(const std::vector<std::string>& pieces, bool in_thinking = false, std::string prefix = "call_") {
  Qwen3OutputParser p(in_thinking, std::move(prefix));
  std::vector<Delta> out;
  for (const auto& s : pieces) p.push(s, out);
  p.finish(out);
  Parsed r;
  for (const auto& d : out) {
    EXPECT_EQ(tokenizer::first_invalid_utf8(d.text), tokenizer::kUtf8Valid) << d.text;
    if (d.channel == Channel::Reasoning) r.reasoning += d.text;
    if (d.channel == Channel::Content) r.content += d.text;
    if (d.channel == Channel::Tool) r.calls.push_back(d.call);
    EXPECT_NE(d.channel, Channel::Text);
  }
  EXPECT_EQ(p.tool_calls(), r.calls.size());
  r.deltas = std::move(out);
  return r;
}

// The same text fed whole, and one byte at a time: both must agree.
Parsed parse_both(const std::string& text, bool in_thinking = false, std::string prefix = "call_") {
  Parsed whole = parse({text}, in_thinking, prefix);
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  Parsed split = parse(bytes, in_thinking, prefix);
  EXPECT_EQ(whole.reasoning, split.reasoning) << text;
  EXPECT_EQ(whole.content, split.content) << text;
  EXPECT_EQ(whole.calls, split.calls) << text;
  return whole;
}

TEST(Qwen3Output, ThinkThenAnswer) {
  const Parsed r = parse_both("<think>\nLet me see.\nTwo lines.\n</think>\n\nThe answer is 4.");
  EXPECT_EQ(r.reasoning, "Let me see.\nTwo lines.");
  EXPECT_EQ(r.content, "The answer is 4.");
  EXPECT_TRUE(r.calls.empty());
}

TEST(Qwen3Output, PromptOpenedThinking) {
  const Parsed r = parse_both("Hmm.\n</think>\n\nYes.", /*in_thinking=*/true);
  EXPECT_EQ(r.reasoning, "Hmm.");
  EXPECT_EQ(r.content, "Yes.");
}

TEST(Qwen3Output, NoThinkIsAllAnswer) {
  const Parsed r = parse_both("Hello <think> is just text </think> here.\n");
  EXPECT_EQ(r.reasoning, "");
  EXPECT_EQ(r.content, "Hello <think> is just text </think> here.\n");
}

TEST(Qwen3Output, LeadingWhitespace) {
  // Newlines before <think> are dropped; a long run of them ends the wait for <think>.
  EXPECT_EQ(parse_both("\n\n<think>r</think>a").reasoning, "r");
  const Parsed r = parse_both(std::string(1000, '\n') + "<think>x</think>");
  EXPECT_EQ(r.reasoning, "");
  EXPECT_EQ(r.content, "<think>x</think>");
}

TEST(Qwen3Output, EmptyThinkBlock) {
  const Parsed r = parse_both("\n<think>\n\n</think>\n\nHi");
  EXPECT_EQ(r.reasoning, "");
  EXPECT_EQ(r.content, "Hi");
}

TEST(Qwen3Output, ToolCalls) {
  const std::string text =
      "<think>\nI need the weather.\n</think>\n\nLet me check.\n\n<tool_call>\n"
      "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2, \"units\": [\"C\"]}}\n"
      "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  const Parsed r = parse_both(text, false, "call_7_");
  EXPECT_EQ(r.reasoning, "I need the weather.");
  EXPECT_EQ(r.content, "Let me check.");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, R"({"city": "Paris", "days": 2, "units": ["C"]})");
  EXPECT_EQ(r.calls[0].id, "call_7_0");
  EXPECT_EQ(r.calls[0].index, 0u);
  EXPECT_EQ(r.calls[1].name, "get_time");
  EXPECT_EQ(r.calls[1].arguments, "{}");
  EXPECT_EQ(r.calls[1].id, "call_7_1");
}

TEST(Qwen3Output, ToolCallStreamsWhenItCloses) {
  Qwen3OutputParser p(false, "c");
  std::vector<Delta> out;
  p.push("<tool_call>\n{\"name\": \"f\", \"argu", out);
  EXPECT_TRUE(out.empty());  // nothing certain yet
  p.push("ments\": {\"x\": \"\xC3", out);
  EXPECT_TRUE(out.empty());
  p.push("\xA9\"}}\n</tool_", out);
  EXPECT_TRUE(out.empty());
  p.push("call>", out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].channel, Channel::Tool);
  EXPECT_EQ(out[0].call.arguments, "{\"x\": \"\xC3\xA9\"}");
}

TEST(Qwen3Output, ArgumentsAsJsonString) {
  const Parsed r = parse_both("<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\":1}\"}</tool_call>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, R"({"a": 1})");
}

TEST(Qwen3Output, MalformedCallsAreText) {
  for (const std::string body : {"{not json}", "{\"arguments\": {}}", "{\"name\": 3}", "[1, 2]",
                                 "{\"name\": \"f\", \"arguments\": [1]}", "{\"name\": \"f\", \"arguments\": \"x\"}",
                                 "{\"name\": \"\"}"}) {
    const std::string text = "<tool_call>\n" + body + "\n</tool_call>";
    const Parsed r = parse_both(text);
    EXPECT_TRUE(r.calls.empty()) << body;
    EXPECT_EQ(r.content, text) << body;
  }
  // A good call after a bad one still parses.
  const Parsed r = parse_both("<tool_call>{oops</tool_call><tool_call>{\"name\": \"g\"}</tool_call>");
  EXPECT_EQ(r.content, "<tool_call>{oops</tool_call>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "g");
  EXPECT_EQ(r.calls[0].index, 0u);
}

TEST(Qwen3Output, DeepJsonIsTextNotACrash) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string text = "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": " + deep + "}}</tool_call>";
  const Parsed r = parse({text});
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.content, text);
}

TEST(Qwen3Output, LongCallFedByteByByte) {
  const std::string value(100000, 'a');
  const std::string text = "<tool_call>{\"name\": \"f\", \"arguments\": {\"v\": \"" + value + "\"}}</tool_call>";
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  const Parsed r = parse(bytes);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, "{\"v\": \"" + value + "\"}");
  // The closing tag split at every point is still found.
  for (size_t cut = 1; cut < 12; ++cut) {
    const std::string call = "<tool_call>{\"name\": \"g\"}</tool_call>";
    const size_t at = call.size() - 12 + cut;
    const Parsed p = parse({call.substr(0, at), call.substr(at)});
    ASSERT_EQ(p.calls.size(), 1u) << cut;
  }
}

TEST(Qwen3Output, CutOffCallIsText) {
  const Parsed r = parse_both("Ok.\n<tool_call>\n{\"name\": \"f\", \"argum");
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.content, "Ok.<tool_call>\n{\"name\": \"f\", \"argum");
}

TEST(Qwen3Output, WithoutToolsCallsAreText) {
  const std::string text = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
  const Parsed r = parse_both(text, false, /*prefix=*/"");
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.content, text);
}

TEST(Qwen3Output, PartialTagAtTheEndIsText) {
  const Parsed r = parse_both("a < b and <tool_ca", false, "c");
  EXPECT_EQ(r.content, "a < b and <tool_ca");
  const Parsed t = parse_both("deep thought </thi", /*in_thinking=*/true);
  EXPECT_EQ(t.reasoning, "deep thought </thi");
}

TEST(Qwen3Output, Utf8SplitAcrossPiecesStaysValid) {
  const std::string text = "<think>\xE6\x80\x9D\xE8\x80\x83</think>\xF0\x9F\x98\x80 ok";
  const Parsed r = parse_both(text);
  EXPECT_EQ(r.reasoning, "\xE6\x80\x9D\xE8\x80\x83");
  EXPECT_EQ(r.content, "\xF0\x9F\x98\x80 ok");
  // Invalid bytes become U+FFFD, never a broken delta.
  const Parsed bad = parse({"x\xC3", "</think>y"}, /*in_thinking=*/true);
  EXPECT_EQ(bad.reasoning, "x\xEF\xBF\xBD");
  EXPECT_EQ(bad.content, "y");
}

TEST(Qwen3Output, NewlinesInsideTheAnswerAreKept) {
  const Parsed r = parse_both("</think>\n\nLine 1\n\nLine 2\n", /*in_thinking=*/true);
  EXPECT_EQ(r.content, "Line 1\n\nLine 2\n");
}

}  // namespace
}  // namespace deltafin::server
