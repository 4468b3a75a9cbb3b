// Corpus for the tokenizer.json oracle test: gen_corpus.js's hard strings
// plus strings aimed at Hugging Face tokenizers: added-token spellings in
// text (whole, partial, nested, adjacent), NFC/NFD pairs, digit runs,
// contractions in every case, ZWJ emoji, code, long words.
// Usage: node gen_hf_corpus.js OUT.jsonl [BASE_COUNT] [EXTRA_COUNT]
// Deterministic: the same strings on every run.
"use strict";
const fs = require("fs");
const path = require("path");
const { execFileSync } = require("child_process");

const [out, baseArg, extraArg] = process.argv.slice(2);
if (!out) {
  console.error("usage: node gen_hf_corpus.js OUT.jsonl [BASE_COUNT] [EXTRA_COUNT]");
  process.exit(2);
}
execFileSync(process.execPath, [path.join(__dirname, "gen_corpus.js"), out, baseArg || "2000"], { stdio: "ignore" });
const extraTarget = Number.parseInt(extraArg || "1000", 10);

let seed = 0x0bfe3c11;  // mulberry32, as gen_corpus.js
function rand() {
  seed |= 0;
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (a) => a[Math.floor(rand() * a.length)];
const int = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));

const added = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
  "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>",
  "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>",
  "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<tool_response>",
  "</tool_response>", "<think>", "</think>"];
const nearMiss = ["<|im_", "<|im_start", "im_start|>", "<|IM_START|>", "< think>", "<think", "think>", "</think",
  "<<think>>", "<|<|im_end|>|>", "<|endoftext|", "|>", "<|", "<tool_call >", "<|fim_prefix|", "<thinking>"];
// Canonically equivalent spellings: NFC must make them encode alike.
const nfdPairs = [["é", "e\u0301"], ["Å", "A\u030a"], ["Å", "\u212b"], ["ñ", "n\u0303"], ["ệ", "e\u0323\u0302"],
  ["ệ", "e\u0302\u0323"], ["한", "\u1112\u1161\u11ab"], ["가", "\u1100\u1161"], ["ǖ", "u\u0308\u0304"],
  ["ά", "\u03b1\u0301"], ["ώ", "\u03c9\u0301"], ["ṩ", "s\u0323\u0307"], ["Ω", "\u2126"], ["が", "か\u3099"],
  ["ド", "ト\u3099"], ["क़", "\u0915\u093c"], ["ﬁ", "ﬁ"], ["①", "①"], ["ẛ̣", "\u017f\u0323\u0307"]];
const contractions = ["'s", "'S", "'t", "'T", "'re", "'RE", "'Re", "'rE", "'ve", "'VE", "'vE", "'m", "'M", "'ll",
  "'LL", "'Ll", "'lL", "'d", "'D", "'ſ", "'K", "'k", "’s", "'x"];
const words = ["Hello", "world", "I", "you", "THEY", "it", "Qwen", "naïve", "straße", "İstanbul", "ǅemal", "ǈ",
  "東京", "北京市", "かな", "カタカナ", "한국어", "Привет", "مرحبا", "עברית", "हिन्दी", "ไทย", "ελληνικά", "x", "A",
  "supercalifragilisticexpialidocious", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "ꙮ", "ſtate", "ﬃ"];
const numbers = ["0", "7", "42", "123", "2024", "3.14159", "1,000,000", "٣٤٥", "१२३", "①②", "Ⅻ", "½",
  "12345678901234567890", "0x7fffffff", "1e-9", "６７８"];
const spaces = [" ", "  ", "    ", "\t", "\n", "\n\n", "\r\n", " \n ", "\u00a0", "\u3000", "\u2003", "\u200b",
  "\u2028", "\u2029", "\u0085", "\ufeff", "\u180e", "\x0b", "\x0c", "\x1c", " \t\n"];
const emoji = ["😀", "👍🏽", "👩‍👩‍👧‍👦", "👨‍💻", "🏳️‍🌈", "🏴‍☠️", "🇺🇸", "🇯🇵🇰🇷", "1️⃣", "❤️", "🧑🏻‍🤝‍🧑🏿",
  "\u200d", "\ufe0f", "🫠", "🦀"];
const code = ["def f(x):\n    return x ** 2\n", "int main(void) { return 0; }", "for (i = 0; i < n; ++i) {}",
  "const x = a?.b ?? c;", "SELECT id FROM t WHERE a <> b;", "<div class=\"x\">y</div>", "{\"k\": [1, 2.5, null]}",
  "#include <stdio.h>\n", "x += 1  # comment", "fn main() -> Result<(), E> {}", "$ ls -la | grep '^d'",
  "a->b::c<d>", "/* */ // ///", "```py\nprint('hi')\n```", "\\n\\t\\\\", "@decorator\nclass A:"];
const punct = [".", ",", "!", "?", "...", "—", "–", "-", "“", "”", "«", "»", "。", "、", "！", "？", "《", "》",
  "(", ")", "[", "]", "{", "}", "<", ">", "|", "/", "\\", "&&", "||", "==", "=>", "::", "#", "@", "%", "~"];

const extra = [];
for (const a of added) {
  // U+0338 after ">" composes to "≯" under NFC of the whole string, but HF
  // normalizes the text after an added token on its own.
  extra.push(a, `x${a}y`, ` ${a} `, `${a}${a}`, `\n${a}\n`, `${a}\u0301`, `${a}\u0338`, `Hello${a}world`);
}
for (const n of nearMiss) extra.push(n, `a${n}b`);
for (const [c, d] of nfdPairs) extra.push(c, d, `${c}${d}`, ` ${d}x`, `${d}'s`, d.repeat(5));
for (const c of contractions) extra.push(c, `it${c}`, `IT${c}`, ` ${c}`, `${c}${c}`, `don${c}t`);
extra.push("9".repeat(1000), "1234567890".repeat(50), "a".repeat(3000) + "b", "ab".repeat(1500),
  "é".repeat(800), "e\u0301".repeat(800), " ".repeat(500) + "x", "\n".repeat(200) + "x", "x" + "\t".repeat(300),
  "🙂".repeat(300), "👩‍💻".repeat(100), "的".repeat(2000), "<think>".repeat(200), "<|im_end|>".repeat(100));
while (extra.length < extraTarget) {
  const parts = [];
  const n = int(1, 20);
  for (let i = 0; i < n; i++) {
    const r = rand();
    if (r < 0.12) parts.push(pick(added));
    else if (r < 0.18) parts.push(pick(nearMiss));
    else if (r < 0.28) parts.push(pick(pick(nfdPairs)));
    else if (r < 0.36) parts.push(pick(contractions));
    else if (r < 0.56) parts.push(pick(words));
    else if (r < 0.64) parts.push(pick(numbers));
    else if (r < 0.76) parts.push(pick(spaces));
    else if (r < 0.86) parts.push(pick(punct));
    else if (r < 0.93) parts.push(pick(emoji));
    else parts.push(pick(code));
  }
  let s = parts.join(rand() < 0.5 ? "" : " ");
  if (rand() < 0.04) s = s.repeat(int(2, 20));
  if (rand() < 0.05) s = s.toUpperCase();
  extra.push(s);
}
fs.appendFileSync(out, extra.map((s) => JSON.stringify(s)).join("\n") + "\n");
const total = fs.readFileSync(out, "utf8").split("\n").filter((l) => l.length > 0).length;
console.log(`hf corpus: ${total} strings`);
