// Prose of the internal system messages of K3's chat template (spec §5.4).
// The real bytes are template data in Moonshot's encoding_k3.py, which is
// not available to this project: these are RECONSTRUCTIONS that follow the
// spec's description of each message. Token ids of prompts that contain
// them will differ from upstream until they are replaced by the upstream
// bytes and checked against gold ids (spec §10, item 11).
#pragma once

namespace deltafin::tokenizer::prose {

// {effort} is replaced by the chosen effort.
inline constexpr const char* kThinkingEffort =
    "Reasoning effort sets how much to think in the thinking channel, not the response channel. "
    "Valid efforts: low, medium, high, max.\n"
    "This system is invoked with reasoning effort: {effort}.";

// {tools} is replaced by the deep-sorted compact tools JSON.
inline constexpr const char* kToolDeclare =
    "# Tools\n\nYou have access to the following tools, described in JSONSchema format:\n```json\n{tools}\n```";
inline constexpr const char* kToolDeclareDynamic =
    "# Tools\n\nThe following tools were added dynamically, described in JSONSchema format:\n```json\n{tools}\n```";

inline constexpr const char* kToolChoiceRequired = "You must call at least one tool in this response.";
inline constexpr const char* kToolChoiceNone = "Do not call any tool in this response.";

inline constexpr const char* kResponseFormatJsonObject = "Respond with a single valid JSON object.";
// {schema} is replaced by the deep-sorted compact schema JSON.
inline constexpr const char* kResponseFormatJsonSchema =
    "Respond with a single JSON object that conforms to this JSONSchema:\n```json\n{schema}\n```";

// Tool-call argument values that are not strings are rendered as Python's
// json.dumps with ", " / ": " separators; whether upstream escapes non-ASCII
// there (ensure_ascii) is unknown, and we keep it as-is.
inline constexpr bool kArgumentJsonEnsureAscii = false;

}  // namespace deltafin::tokenizer::prose
