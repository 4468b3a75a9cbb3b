// The fixed bytes of Kimi K3's chat template: the bodies of its internal
// system messages and its tag, attribute and type names. Model-interface
// data, reproduced exactly from K3's published Jinja chat template
// (`models/templates/Kimi-K3.jinja` in the llama.cpp repository; our test
// copy with its provenance is tests/chat/Kimi-K3.chat-template.jinja). The
// model was trained on prompts rendered with these bytes: do not edit them.
#pragma once
#include <string_view>

namespace deltafin::tokenizer::k3 {

// Structural special tokens (docs/design/tokenizer.md).
inline constexpr std::string_view kOpen = "<|open|>";
inline constexpr std::string_view kClose = "<|close|>";
inline constexpr std::string_view kSep = "<|sep|>";
inline constexpr std::string_view kEndOfMsg = "<|end_of_msg|>";

// "thinking-effort": kThinkingEffortHead + effort + kThinkingEffortTail.
inline constexpr std::string_view kThinkingEffortHead =
    "`thinking_effort` guides on how much to think in your thinking channel (not including the response channel), "
    "supported values include `low`, `medium`, `high`, and `max`.\n"
    "Now the system is invoked with `thinking_effort=";
inline constexpr std::string_view kThinkingEffortTail = "`.";

// "tool-declare": head + sorted compact tools JSON + kToolDeclareTail. The
// dynamic head is for a system message that carries `tools`.
inline constexpr std::string_view kToolDeclareHead =
    "# Tools\nHere are the available tools, described in JSONSchema.\n\n```json\n";
inline constexpr std::string_view kToolDeclareDynamicHead =
    "## New Tools Available\nThe system dynamically extends the toolset via lazy-loading.\n"
    "You have access to all existing and extended tools.\nHere are the specs for the extended tools.\n\n```json\n";
inline constexpr std::string_view kToolDeclareTail = "\n```";

// "tool-choice".
inline constexpr std::string_view kToolChoiceRequired =
    "The system is invoked with `tool_choice=required`.\nYou MUST call tools in the next message.";
inline constexpr std::string_view kToolChoiceNone =
    "The system is invoked with `tool_choice=none`.\nYou MUST NOT call any tools in the next message.";

// "response-format"; json_schema: kResponseFormatJsonSchemaHead + sorted
// compact schema JSON + kResponseFormatJsonSchemaTail.
inline constexpr std::string_view kResponseFormatJsonObject =
    "The system is invoked with `response_format=json_object`.\n"
    "Your response must be raw JSON data without markdown code blocks (```json) or any additional formatting.";
inline constexpr std::string_view kResponseFormatJsonSchemaHead =
    "The system is invoked with `response_format=json_schema`.\n"
    "Your response must be raw JSON data without markdown code blocks (```json) or any additional formatting.\n"
    "The JSON data must match the following schema:\n```json\n";
inline constexpr std::string_view kResponseFormatJsonSchemaTail = "\n```";

// Tool-call argument types, as `type="..."` on <argument> tags.
inline constexpr std::string_view kTypeString = "string";
inline constexpr std::string_view kTypeNumber = "number";
inline constexpr std::string_view kTypeBoolean = "boolean";
inline constexpr std::string_view kTypeNull = "null";
inline constexpr std::string_view kTypeObject = "object";
inline constexpr std::string_view kTypeArray = "array";

// Efforts the template accepts (it names `medium` in the prose but refuses it).
inline constexpr std::string_view kEfforts[] = {"low", "high", "max"};

}  // namespace deltafin::tokenizer::k3
