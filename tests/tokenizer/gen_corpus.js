// Deterministic corpus of hard strings for the tokenizer oracle tests.
// Usage: node gen_corpus.js OUT.jsonl [COUNT]   (one JSON string per line)
// Same output on every run: a fixed list of hand-picked cases, then
// random compositions from a seeded PRNG. Code points are taken from blocks
// assigned in Unicode 14 (PCRE2 10.42's tables) so the oracle and our engine
// agree on character properties.
"use strict";
const fs = require("fs");

const [out, countArg] = process.argv.slice(2);
if (!out) {
  console.error("usage: node gen_corpus.js OUT.jsonl [COUNT]");
  process.exit(2);
}
const target = Number.parseInt(countArg || "2500", 10);

// mulberry32: small, fast, deterministic.
let seed = 0x5eed1234;
function rand() {
  seed |= 0;
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (a) => a[Math.floor(rand() * a.length)];
const int = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));
const rep = (s, n) => s.repeat(n);

const fixed = [
  "", " ", "  ", "\n", "\r\n", "\t", "a", "A", "1", "'", "'s", "I'm", "I'M", "you'll", "YOU'LL", "we'd've",
  "don't", "DON'T", "It's", "IT'S", "'S'T'RE'VE'M'LL'D", "ſ'ſ", "'ſ", "'\u017F", "K'\u212A",
  "Hello, world!", "Hello world", " Hello", "  Hello", "\nHello", "Hello\n", "Hello \n\n world",
  "The quick brown fox jumps over the lazy dog.", "THE QUICK BROWN FOX", "camelCaseWord", "PascalCaseWord",
  "snake_case_word", "kebab-case-word", "HTTPServerError", "iPhone", "McDonald's", "O'Neil's",
  "123", "1234", "12345678901234567890", "3.14159", "1,000,000", "-42", "+1e10", "0x1F", "v1.2.3",
  "2024-01-01T00:00:00Z", "١٢٣٤٥٦٧", "٣.١٤", "①②③", "ⅫⅣ", "½¾", "𝟏𝟐𝟑", "१२३४",
  "你好", "你好世界", "中文English混合", "日本語のテキスト", "カタカナ", "ひらがな", "한국어 텍스트",
  "這是繁體中文。", "汉字，标点！", "「引用」", "〇一二三", "々", "𠀀𠀁𠀂", "𪚥", "你好\n世界",
  "مرحبا بالعالم", "שלום עולם", "עִבְרִית", "العربية 123 English", "\u200fRTL\u200f", "\u202eabc\u202c",
  "e\u0301", "cafe\u0301", "\u0301", " \u0301", "a\u0300\u0301\u0302\u0303", "Z\u0351\u0352\u0353\u0354\u0355",
  "ñ", "n\u0303", "Å", "A\u030a", "ǅungla", "ǅ", "ʰʲ", "ᵃᵇᶜ", "ﬁ", "Ǆ", "ǆ",
  "हिन्दी", "क्षत्रिय", "தமிழ்", "ไทย", "ภาษาไทย", "ລາວ", "ᐃᓄᒃᑎᑐᑦ", "ግዕዝ", "Ελληνικά", "Русский язык",
  "РУССКИЙ", "Ѐ", "ქართული", "Հայերեն", "ܣܘܪܝܝܐ", "ދިވެހި", "ᠮᠣᠩᠭᠣᠯ", "ᠮ\u180eᠣ", "a\u180eb", "\u180e",
  "😀", "😀😀😀", "👍🏽", "👩‍👩‍👧‍👦", "👨‍💻", "🏳️‍🌈", "🇺🇸🇬🇧", "1️⃣", "❤️", "✌🏿", "🧑🏻‍🤝‍🧑🏿", "🙂 ok",
  "\u00a0", "a\u00a0b", "\u3000", "a\u3000b", "\u2028", "\u2029", "\u0085", "\u200b", "a\u200bb", "\ufeff",
  "\u2000\u2001\u2002\u2003", "\u202f", "\u205f", "\u1680", "\x0b", "\x0c", "\x1c\x1d\x1e\x1f", "\x00", "a\x00b",
  "\x7f", "\x80\x9f".replace(/./g, (c) => c), "\u0080\u009f", "\ue000\uf8ff", "\u{10ffff}", "\u{f0000}",
  rep(" ", 100), rep(" ", 1001), rep("\n", 300), rep("\t", 77), rep(" \n", 50), rep("\r\n", 40),
  rep(" ", 10) + "x", rep(" ", 10) + "\n", "x" + rep(" ", 10), "x" + rep(" ", 10) + "y", " \n x",
  "a  b", "a   b", "a \n b", "a\n\n\nb", "a\r\rb", "a\r\n\r\nb", "\n\n", " \n", "\n ",
  rep("a", 5000), rep("ab", 3000), rep("A", 4000), rep("aB", 2500), rep("9", 3000), rep("!", 2000),
  rep("supercalifragilisticexpialidocious", 100), rep("你", 3000), rep("😀", 500), rep("é", 1500),
  rep("e\u0301", 1200), rep("/", 500), rep("-=", 700), rep("ab12", 600),
  "def f(x):\n    return x ** 2\n", "int main() {\n\treturn 0;\n}\n", "if (a && b || !c) { x++; }",
  "for i in range(10):\n\tprint(i)", "SELECT * FROM t WHERE id = 1;", "<div class=\"a\">b</div>",
  "{\"key\": [1, 2, {\"nested\": null}]}", "https://example.com/path?q=1&r=2#frag", "a/b/c//d///",
  "C:\\Windows\\System32", "~/.config/app.yml", "$HOME/bin:$PATH", "x<<=2; y>>>=3;", "a->b::c",
  "#!/usr/bin/env bash\nset -euo pipefail\n", "// comment\n/* block */", "```python\nprint(1)\n```",
  "<|endoftext|>", "<|endoftext|> hi", "<|fim_prefix|>", "<|open|>message<|sep|>", "[BOS]", "<|end_of_msg|>",
  "...", "!!!???", "—–-", "«quotes»", "“smart” ‘quotes’", "¿Qué?", "¡Hola!", "…", "•\t•",
  "Mixed: English, 中文, العربية, русский, 😀, 123.",
];

// Fragment pools for random compositions.
const words = [
  "the", "The", "THE", "hello", "World", "tokenizer", "can't", "it's", "YOU'RE", "x", "Z", "naïve",
  "façade", "straße", "STRASSE", "Ångström", "Ελλάδα", "мир", "Москва", "你好", "世界", "中华人民共和国",
  "日本", "東京タワー", "ソフトウェア", "ひらがな", "서울", "안녕하세요", "مرحبا", "שָׁלוֹם", "नमस्ते",
  "தமிழ்", "ไทย", "ǅ", "ʰ", "ǈeto", "ſtate", "ﬃ", "Ꮳ", "ꙮ", "𐐷", "𝔘𝔫𝔦", "𝕏", "e\u0301", "o\u0308",
  "a\u0327", "\u0915\u094d\u0937", "McDonald's", "l'homme", "rock'n'roll",
];
const numbers = ["0", "7", "42", "123", "1234", "98765", "3.14", "1e-9", "٣٤", "१२", "①", "Ⅷ", "½", "2024"];
const spaces = [" ", "  ", "   ", "\t", "\n", "\r\n", "\n\n", " \n", "\n ", "\u00a0", "\u3000", "\u2003",
  "\u200b", "\u2028", "\u180e", "\x0b", "\x0c", "\x1f", " \t ", "\u0085"];
const punct = [".", ",", "!", "?", "'", "\"", "'s", "'ll", "'D", "-", "--", "...", "/", "//", "()", "{}",
  "[]", "<>", "<|", "|>", "==", "!=", "->", "=>", "::", ";", ":", "@", "#", "$", "%", "^", "&", "*", "_",
  "~", "`", "\\", "|", "+", "·", "。", "，", "、", "！", "？", "《", "》", "“", "”", "€", "£", "¥", "§",
  "¶", "†", "™", "©", "°", "±", "×", "÷", "∑", "∫", "≈", "≠", "≤", "→", "⇒", "∀", "∃"];
const emoji = ["😀", "🎉", "👍", "👍🏻", "👩‍🔬", "👨‍👩‍👧", "🏳️‍⚧️", "🇯🇵", "🇫🇷", "#️⃣", "☺️", "⭐", "🔥",
  "💯", "🤖", "🦀", "🧪", "\u200d", "\ufe0f"];

// Assigned ranges (Unicode <= 14) for raw random code points.
const ranges = [
  [0x20, 0x7e], [0xa0, 0x24f], [0x250, 0x2af], [0x2b0, 0x2ff], [0x300, 0x36f], [0x370, 0x3ff],
  [0x400, 0x4ff], [0x531, 0x556], [0x5d0, 0x5ea], [0x620, 0x64a], [0x660, 0x669], [0x900, 0x97f],
  [0xe01, 0xe3a], [0x10a0, 0x10ff], [0x1100, 0x11ff], [0x1e00, 0x1eff], [0x2000, 0x206f], [0x2070, 0x209c],
  [0x20a0, 0x20bf], [0x2100, 0x214f], [0x2150, 0x218b], [0x2190, 0x21ff], [0x2200, 0x22ff],
  [0x2460, 0x24ff], [0x2500, 0x257f], [0x3000, 0x303f], [0x3041, 0x3096], [0x30a1, 0x30fa],
  [0x4e00, 0x9fff], [0xac00, 0xd7a3], [0xf900, 0xfa6d], [0xfb00, 0xfb06], [0xff01, 0xff5e],
  [0x1d400, 0x1d454], [0x1f300, 0x1f5ff], [0x1f600, 0x1f64f], [0x20000, 0x2a6df], [0xe000, 0xe0ff],
];
const randomCodePoints = (n) => {
  let s = "";
  for (let i = 0; i < n; i++) {
    const [lo, hi] = pick(ranges);
    s += String.fromCodePoint(int(lo, hi));
  }
  return s;
};

function composition() {
  const parts = [];
  const n = int(1, 25);
  for (let i = 0; i < n; i++) {
    const r = rand();
    if (r < 0.35) parts.push(pick(words));
    else if (r < 0.45) parts.push(pick(numbers));
    else if (r < 0.65) parts.push(pick(spaces));
    else if (r < 0.8) parts.push(pick(punct));
    else if (r < 0.9) parts.push(pick(emoji));
    else parts.push(randomCodePoints(int(1, 6)));
    if (rand() < 0.3) parts.push(" ");
  }
  let s = parts.join("");
  if (rand() < 0.05) s = s.repeat(int(2, 40));  // longer inputs
  if (rand() < 0.05) s = s.toUpperCase();
  return s;
}

const corpus = fixed.slice();
while (corpus.length < target) {
  const r = rand();
  if (r < 0.75) corpus.push(composition());
  else if (r < 0.9) corpus.push(randomCodePoints(int(1, 40)));
  else corpus.push(pick(words) + pick(spaces).repeat(int(1, 60)) + pick(words));
}
fs.writeFileSync(out, corpus.map((s) => JSON.stringify(s)).join("\n") + "\n");
console.log(`corpus: ${corpus.length} strings`);
