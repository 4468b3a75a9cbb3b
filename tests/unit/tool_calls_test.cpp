// The tool-call output parser: what the template renders for assistant tool
// calls parses back to the same calls (whole, split byte by byte, and fed as
// token ids); malformed output comes back as text; random and mutated input
// never crashes and always yields valid calls and valid UTF-8.
#include <gtest/gtest.h>

#include <random>

#include "server/output_filter.h"
#include "server/tool_calls.h"
#include "tokenizer/chat.h"
#include "tokenizer/utf8.h"
#include "tokenizer_test_util.h"

namespace deltafin::server {
namespace {

using nlohmann::ordered_json;
using tokenizer::ChatSegment;
using Pieces = std::vector<ChatSegment>;

// The segments the template renders after an assistant's response closes:
// the tools block and the message close.
Pieces rendered_tool_output(const ordered_json& tool_calls) {
  tokenizer::ChatOptions o;
  o.thinking = false;
  o.thinking_effort.reset();
  o.add_generation_prompt = false;
  ordered_json msg = {{"role", "assistant"}, {"content", "ok"}, {"tool_calls", tool_calls}};
  auto segs = tokenizer::render_chat(ordered_json::array({msg}), o);
  EXPECT_TRUE(segs.ok()) << segs.message();
  const Pieces& s = segs.value();
  for (size_t i = 0; i + 2 < s.size(); ++i)
    if (s[i] == ChatSegment{true, "<|close|>"} && s[i + 1] == ChatSegment{false, "response"})
      return Pieces(s.begin() + long(i) + 3, s.end() - 1);  // without <|end_of_msg|>
  ADD_FAILURE() << "no response close";
  return {};
}

// Every ordinary piece cut into single bytes.
Pieces bytewise(const Pieces& in) {
  Pieces out;
  for (const auto& p : in) {
    if (p.control) out.push_back(p);
    else
      for (char c : p.text) out.push_back({false, std::string(1, c)});
  }
  return out;
}

Pieces split_at_specials(const std::string& text) {
  Pieces out;
  const std::string specials[] = {"<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"};
  size_t i = 0, start = 0;
  while (i < text.size()) {
    bool hit = false;
    for (const auto& s : specials) {
      if (text.compare(i, s.size(), s) == 0) {
        if (i > start) out.push_back({false, text.substr(start, i - start)});
        out.push_back({true, s});
        i += s.size();
        start = i;
        hit = true;
        break;
      }
    }
    if (!hit) ++i;
  }
  if (start < text.size()) out.push_back({false, text.substr(start)});
  return out;
}

const char* kCalls = R"([
  {"id":"a","type":"function","function":{"name":"get_weather","arguments":
    "{\"city\":\"Paris \\\"16e\\\" & <b>\\n\",\"days\":3,\"ratio\":0.25,\"big\":12345678901234567890,\"metric\":true,\"note\":null,\"opts\":{\"a\":[1,\"x\"],\"b\":{}},\"tags\":[\"é\",\"日本\"]}"}},
  {"id":"b","type":"function","function":{"name":"no_args","arguments":"{}"}},
  {"id":"c","type":"function","function":{"name":"raw","_xtml_json_block":"{\"q\": [1, 2]}"}}
])";

void expect_round_trip(const ParsedToolOutput& got) {
  ASSERT_EQ(got.calls.size(), 3u) << got.text;
  EXPECT_EQ(got.text, "");
  const auto calls = ordered_json::parse(kCalls);
  EXPECT_EQ(got.calls[0].name, "get_weather");
  EXPECT_EQ(nlohmann::json::parse(got.calls[0].arguments),
            nlohmann::json::parse(calls[0]["function"]["arguments"].get<std::string>()));
  EXPECT_EQ(got.calls[1].name, "no_args");
  EXPECT_EQ(got.calls[1].arguments, "{}");
  EXPECT_EQ(got.calls[2].name, "raw");
  EXPECT_EQ(got.calls[2].arguments, "{\"q\": [1, 2]}");
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(got.calls[i].index, i);
    EXPECT_EQ(got.calls[i].id, "call_x_" + std::to_string(i));
  }
}

TEST(ToolCalls, RenderedCallsParseBack) {
  const Pieces out = rendered_tool_output(ordered_json::parse(kCalls));
  expect_round_trip(parse_tool_calls(out, "call_x_"));
  expect_round_trip(parse_tool_calls(bytewise(out), "call_x_"));
  // Numbers keep the model's spelling: no rounding of a 20-digit integer.
  EXPECT_NE(parse_tool_calls(out).calls[0].arguments.find("12345678901234567890"), std::string::npos);
}

TEST(ToolCalls, TokenIdsFeedTheParser) {
  // The way the server will drive it: each generated id as its bytes, specials by spelling.
  tokenizer::testing::TempDir dir;
  auto tok = tokenizer::testing::checkpoint_tokenizer(dir, tokenizer::testing::byte_vocab({"argument", "call"}));
  const Pieces out = rendered_tool_output(ordered_json::parse(kCalls));
  auto ids = tokenizer::encode_segments(tok, out, false);
  ASSERT_TRUE(ids.ok()) << ids.message();
  ToolCallParser p("call_x_");
  std::vector<ToolCallEvent> events;
  size_t first_call_at = 0;
  for (size_t i = 0; i < ids->size(); ++i) {
    const uint32_t id = (*ids)[i];
    p.push(tok.token_bytes(id).value(), tok.is_special(id), events);
    if (!first_call_at && !events.empty()) first_call_at = i + 1;
  }
  p.finish(events);
  ParsedToolOutput got;
  for (const auto& e : events) {
    if (e.kind == ToolCallEvent::Kind::Call) got.calls.push_back(e.call);
    else got.text += e.text;
  }
  expect_round_trip(got);
  // The first call is emitted as soon as its closing <|sep|> arrives, before the other calls are read.
  ASSERT_GT(first_call_at, 0u);
  EXPECT_EQ(tok.token_bytes((*ids)[first_call_at - 1]).value(), "<|sep|>");
  EXPECT_EQ(tok.token_bytes((*ids)[first_call_at - 2]).value(), "call");
  EXPECT_LT(first_call_at + 50, ids->size());
}

TEST(ToolCalls, NoToolsIsNothing) {
  EXPECT_TRUE(parse_tool_calls(split_at_specials("<|close|>message<|sep|>")).calls.empty());
  EXPECT_EQ(parse_tool_calls(split_at_specials("<|close|>message<|sep|>")).text, "");
  EXPECT_EQ(parse_tool_calls(split_at_specials("<|close|>message<|sep|><|end_of_msg|>")).text, "");
  EXPECT_EQ(parse_tool_calls({}).text, "");
}

TEST(ToolCalls, MalformedOutputIsText) {
  const std::string good = "<|open|>call tool=\"f\" index=\"1\"<|sep|><|open|>argument key=\"a\" type=\"number\"<|sep|>1"
                           "<|close|>argument<|sep|><|close|>call<|sep|>";
  // Each a second call (or a stray part) after one good call.
  const std::string bads[] = {
      "<|open|>call tool=\"g\"<|sep|><|open|>argument key=\"a\" type=\"integer\"<|sep|>1<|close|>argument<|sep|>",
      "<|open|>call tool=\"g\"<|sep|><|open|>argument key=\"a\" type=\"number\"<|sep|>abc<|close|>argument<|sep|>",
      "<|open|>call tool=\"g\"<|sep|><|open|>argument key=\"a\" type=\"boolean\"<|sep|>True<|close|>argument<|sep|>",
      "<|open|>call tool=\"g\"<|sep|><|open|>argument key=\"a\" type=\"object\"<|sep|>[1]<|close|>argument<|sep|>",
      "<|open|>call tool=\"g\"<|sep|><|open|>json type=\"object\"<|sep|>{not json<|close|>json<|sep|>",
      "<|open|>call tool=\"g\"<|sep|><|open|>json type=\"object\"<|sep|>[1, 2]<|close|>json<|sep|>",
      "<|open|>call tool=\"g\"<|sep|><|open|>argument key=\"a\" type=\"string\"<|sep|>x<|open|>y",
      "<|open|>call tool=\"g\"<|sep|><|open|>argument key=\"a\" type=\"string\"<|sep|>x<|close|>call<|sep|>",
      "<|open|>call index=\"2\"<|sep|><|close|>call<|sep|>",
      "<|open|>call tool=\"\"<|sep|><|close|>call<|sep|>",
      "<|open|>call tool=\"g\" index=\"two\"<|sep|><|close|>call<|sep|>",
      "<|open|>call tool=\"g\" color=\"red\"<|sep|><|close|>call<|sep|>",
      "<|open|>call tool=\"g\"  index=\"2\"<|sep|><|close|>call<|sep|>",
      "<|open|>call tool='g'<|sep|><|close|>call<|sep|>",
      "<|open|>call tool=\"g\"<|sep|>stray<|close|>call<|sep|>",
      "hello",
      "<|sep|>",
      "<|open|>tools<|sep|>",
      "<|open|>call tool=\"g\"<|sep|><|open|>argument key=\"a\" type=\"string\"<|sep|>unfinished",
  };
  for (const auto& bad : bads) {
    const auto got = parse_tool_calls(split_at_specials("<|open|>tools<|sep|>" + good + bad));
    ASSERT_EQ(got.calls.size(), 1u) << bad;
    EXPECT_EQ(got.calls[0].name, "f");
    EXPECT_EQ(got.calls[0].arguments, "{\"a\":1}");
    EXPECT_EQ(got.text, bad) << bad;  // the bad part, spelled as the model wrote it
  }
  // Nothing well-formed at all: everything is text, the tools marker included.
  const std::string lone = "<|open|>tools<|sep|><|open|>call tool=\"g\"<|sep|>oops<|close|>call<|sep|>";
  EXPECT_EQ(parse_tool_calls(split_at_specials(lone)).text, lone);
  EXPECT_TRUE(parse_tool_calls(split_at_specials(lone)).calls.empty());
  // Text after a finished message is text too.
  const auto after = parse_tool_calls(split_at_specials("<|open|>tools<|sep|>" + good + "<|close|>tools<|sep|>"
                                                       "<|close|>message<|sep|>more"));
  EXPECT_EQ(after.calls.size(), 1u);
  EXPECT_EQ(after.text, "more");
}

TEST(ToolCalls, AttributesAreUnescaped) {
  const auto got = parse_tool_calls(split_at_specials(
      "<|open|>tools<|sep|><|open|>call tool=\"a&amp;b&quot;c\" index=\"1\"<|sep|>"
      "<|open|>argument key=\"k&quot;\" type=\"string\"<|sep|>v<|close|>argument<|sep|><|close|>call<|sep|>"));
  ASSERT_EQ(got.calls.size(), 1u);
  EXPECT_EQ(got.calls[0].name, "a&b\"c");
  EXPECT_EQ(got.calls[0].arguments, "{\"k\\\"\":\"v\"}");
}

TEST(ToolCalls, TextIsValidUtf8EvenFromBrokenBytes) {
  // A malformed call holding a split character and a stray byte.
  const Pieces in = {{true, "<|open|>"}, {false, "tools"}, {true, "<|sep|>"}, {false, "\xe6\x97"},
                     {false, "\xa5 \xff"}, {false, "\xe2\x82"}};
  ToolCallParser p;
  std::vector<ToolCallEvent> events;
  for (const auto& x : in) p.push(x.text, x.control, events);
  p.finish(events);
  std::string text;
  for (const auto& e : events) {
    ASSERT_EQ(e.kind, ToolCallEvent::Kind::Text);
    EXPECT_EQ(tokenizer::first_invalid_utf8(e.text), tokenizer::kUtf8Valid);
    text += e.text;
  }
  EXPECT_EQ(text, "<|open|>tools<|sep|>\xe6\x97\xa5 \xef\xbf\xbd\xef\xbf\xbd");
}

// Invariants for any input: no crash, calls well-formed, text valid UTF-8,
// and the outcome does not depend on how ordinary text is cut into pieces.
void check_invariants(const Pieces& in, std::mt19937_64& rng) {
  const ParsedToolOutput whole = parse_tool_calls(in);
  for (size_t i = 0; i < whole.calls.size(); ++i) {
    const auto& c = whole.calls[i];
    EXPECT_EQ(c.index, i);
    EXPECT_EQ(c.id, "call_" + std::to_string(i));
    EXPECT_FALSE(c.name.empty());
    const auto j = nlohmann::json::parse(c.arguments, nullptr, false);
    ASSERT_TRUE(j.is_object()) << c.arguments;
  }
  EXPECT_EQ(tokenizer::first_invalid_utf8(whole.text), tokenizer::kUtf8Valid);
  Pieces cut;
  for (const auto& p : in) {
    if (p.control || p.text.size() < 2) {
      cut.push_back(p);
      continue;
    }
    size_t at = 0;
    while (at < p.text.size()) {
      const size_t n = 1 + rng() % p.text.size();
      cut.push_back({false, p.text.substr(at, n)});
      at += n;
    }
  }
  const ParsedToolOutput again = parse_tool_calls(cut);
  EXPECT_EQ(again.calls, whole.calls);
  EXPECT_EQ(again.text, whole.text);
}

TEST(ToolCalls, FuzzRandomPieces) {
  std::mt19937_64 rng(20240519);
  const std::vector<ChatSegment> vocab = {
      {true, "<|open|>"}, {true, "<|close|>"}, {true, "<|sep|>"}, {true, "<|end_of_msg|>"}, {true, "[BOS]"},
      {false, "tools"}, {false, "call"}, {false, "argument"}, {false, "json"}, {false, "message"},
      {false, " tool=\"f\""}, {false, " index=\"1\""}, {false, " key=\"k\""}, {false, " type=\"string\""},
      {false, " type=\"number\""}, {false, " type=\"object\""}, {false, " type=\"array\""}, {false, " type=\"null\""},
      {false, " type=\"boolean\""}, {false, "call tool=\"g\""}, {false, "argument key=\"a\" type=\"number\""},
      {false, "json type=\"object\""}, {false, "1"}, {false, "-2.5e3"}, {false, "true"}, {false, "null"},
      {false, "{\"a\":[1,{}]}"}, {false, "[1,"}, {false, "]"}, {false, "{"}, {false, "}"}, {false, "\""},
      {false, "&quot;"}, {false, "&amp;"}, {false, " "}, {false, "\n"}, {false, "="}, {false, "\xe6\x97"},
      {false, "\xa5"}, {false, "\xff"}, {false, "text"}, {false, std::string(70, '[')},
  };
  for (int iter = 0; iter < 5000; ++iter) {
    Pieces in;
    const size_t n = rng() % 40;
    for (size_t k = 0; k < n; ++k) in.push_back(vocab[rng() % vocab.size()]);
    check_invariants(in, rng);
  }
}

TEST(ToolCalls, FuzzMutatedRenders) {
  std::mt19937_64 rng(7);
  const Pieces base = rendered_tool_output(ordered_json::parse(kCalls));
  for (int iter = 0; iter < 3000; ++iter) {
    Pieces in = base;
    const int edits = 1 + int(rng() % 3);
    for (int e = 0; e < edits && !in.empty(); ++e) {
      const size_t at = rng() % in.size();
      switch (rng() % 4) {
        case 0: in.erase(in.begin() + long(at)); break;
        case 1: in.insert(in.begin() + long(at), in[rng() % in.size()]); break;
        case 2: std::swap(in[at], in[rng() % in.size()]); break;
        default:
          if (!in[at].control && !in[at].text.empty()) in[at].text[rng() % in[at].text.size()] = char(rng() % 256);
      }
    }
    check_invariants(in, rng);
  }
}

}  // namespace
}  // namespace deltafin::server

namespace deltafin::server {
namespace {

// The chat output filter with tools on: what the model writes after its
// response closes becomes Tool deltas (one per whole call); without tools the
// same output shows only reasoning and content, as before.
TEST(ToolCalls, ChatOutputFilterTurnsCallsIntoToolDeltas) {
  tokenizer::testing::TempDir dir;
  auto tok = tokenizer::testing::checkpoint_tokenizer(
      dir, tokenizer::testing::byte_vocab({"argument", "call", "think", "response", "tools", "message"}));
  Pieces out = split_at_specials("Let me look.<|close|>think<|sep|><|open|>response<|sep|>Checking the weather."
                                 "<|close|>response<|sep|>");
  const Pieces calls = rendered_tool_output(ordered_json::parse(kCalls));
  out.insert(out.end(), calls.begin(), calls.end());
  auto ids = tokenizer::encode_segments(tok, out, false);
  ASSERT_TRUE(ids.ok()) << ids.message();
  for (const std::string prefix : {"call_t_", ""}) {
    auto f = OutputFilter::create(tok, /*chat=*/true, /*thinking=*/true, prefix);
    ASSERT_TRUE(f.ok()) << f.message();
    std::vector<Delta> d;
    for (uint32_t id : *ids) ASSERT_TRUE(f->push(id, d).ok());
    ASSERT_TRUE(f->finish(d).ok());
    std::string reasoning, content;
    ParsedToolOutput got;
    for (const Delta& x : d) {
      if (x.channel == Channel::Reasoning) reasoning += x.text;
      else if (x.channel == Channel::Content) content += x.text;
      else if (x.channel == Channel::Tool) got.calls.push_back(x.call);
    }
    EXPECT_EQ(reasoning, "Let me look.");
    EXPECT_EQ(content, "Checking the weather.");
    if (prefix.empty()) {
      EXPECT_TRUE(got.calls.empty());
      EXPECT_EQ(f->tool_calls(), 0u);
      continue;
    }
    EXPECT_EQ(f->tool_calls(), 3u);
    for (auto& c : got.calls) c.id.replace(0, 7, "call_x_");  // expect_round_trip's ids
    expect_round_trip(got);
  }
  // A malformed block comes back as content, markers spelled.
  Pieces bad = split_at_specials("<|open|>response<|sep|>ok<|close|>response<|sep|><|open|>tools<|sep|>"
                                 "<|open|>call tool=\"g\"<|sep|>oops<|close|>call<|sep|>");
  auto bad_ids = tokenizer::encode_segments(tok, bad, false);
  ASSERT_TRUE(bad_ids.ok());
  auto f = OutputFilter::create(tok, true, false, "call_t_");
  ASSERT_TRUE(f.ok());
  std::vector<Delta> d;
  for (uint32_t id : *bad_ids) ASSERT_TRUE(f->push(id, d).ok());
  ASSERT_TRUE(f->finish(d).ok());
  std::string content;
  for (const Delta& x : d) {
    ASSERT_NE(x.channel, Channel::Tool);
    content += x.text;
  }
  EXPECT_EQ(content, "ok<|open|>tools<|sep|><|open|>call tool=\"g\"<|sep|>oops<|close|>call<|sep|>");
}

}  // namespace
}  // namespace deltafin::server
