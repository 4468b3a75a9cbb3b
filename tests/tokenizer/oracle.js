// Token ids from the official tiktoken npm package (WASM) for a corpus.
// Usage: node oracle.js ENCODING PATTERN CORPUS.jsonl OUT.jsonl [special]
//   ENCODING: cl100k_base | o200k_base (rank data from the package)
//   PATTERN:  "native" (the encoding's own pat_str) or a pattern file path
// Writes one JSON array of ids per corpus line: encode_ordinary (special
// token spellings are plain text), or with "special" encode(text, "all")
// using the encoding's special tokens.
"use strict";
const fs = require("fs");
const { Tiktoken } = require("tiktoken/lite");

const [name, patternArg, corpusPath, outPath, mode] = process.argv.slice(2);
const special = mode === "special";
if (!outPath) {
  console.error("usage: node oracle.js ENCODING native|PATTERN_FILE CORPUS.jsonl OUT.jsonl");
  process.exit(2);
}
const enc = require(`tiktoken/encoders/${name}.json`);
const pat = patternArg === "native" ? enc.pat_str : fs.readFileSync(patternArg, "utf8").replace(/\n$/, "");
const tok = new Tiktoken(enc.bpe_ranks, special ? enc.special_tokens : {}, pat);
const lines = fs.readFileSync(corpusPath, "utf8").split("\n").filter((l) => l.length > 0);
const encode = (s) => (special ? tok.encode(s, "all") : tok.encode_ordinary(s));
const out = lines.map((l) => "[" + Array.from(encode(JSON.parse(l))).join(",") + "]");
fs.writeFileSync(outPath, out.join("\n") + "\n");
tok.free();
console.log(`oracle ${name} (${patternArg}${special ? ", specials" : ""}): ${out.length} lines`);
