// tiktoken (npm, WASM) encode throughput on a file, for comparison with
// `deltafin tokenize --stats`. Usage: node bench.js ENCODING PATTERN FILE
//   PATTERN: "native" or a pattern file (e.g. k3_pattern.txt)
// Prints {"bytes", "tokens", "seconds", "mb_per_s"}; loading is excluded,
// best of 3 runs.
"use strict";
const fs = require("fs");
const { Tiktoken } = require("tiktoken/lite");

const [name, patternArg, file] = process.argv.slice(2);
const enc = require(`tiktoken/encoders/${name}.json`);
const pat = patternArg === "native" ? enc.pat_str : fs.readFileSync(patternArg, "utf8").replace(/\n$/, "");
const tok = new Tiktoken(enc.bpe_ranks, {}, pat);
const text = fs.readFileSync(file, "utf8");
const bytes = Buffer.byteLength(text);
let best = Infinity;
let tokens = 0;
for (let i = 0; i < 3; i++) {
  const t0 = process.hrtime.bigint();
  tokens = tok.encode_ordinary(text).length;
  best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
}
tok.free();
console.log(JSON.stringify({ bytes, tokens, seconds: best, mb_per_s: bytes / 1e6 / best }));
