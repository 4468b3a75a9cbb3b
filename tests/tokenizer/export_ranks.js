// Writes the rank data and pattern that the tiktoken npm package ships for an
// encoding as a standard tiktoken rank file (<base64> <rank> per line) plus a
// JSON file {pat_str, special_tokens}. Usage: node export_ranks.js NAME OUTDIR
"use strict";
const fs = require("fs");
const path = require("path");

const [name, outDir] = process.argv.slice(2);
if (!name || !outDir) {
  console.error("usage: node export_ranks.js cl100k_base|o200k_base OUTDIR");
  process.exit(2);
}
const enc = require(`tiktoken/encoders/${name}.json`);
// The package stores ranks as "! <first rank> <b64> <b64> ..." (space separated,
// ranks consecutive). Accept several "!" groups in case of gaps.
const words = enc.bpe_ranks.split(/\s+/).filter((w) => w.length > 0);
const lines = [];
let rank = null;
for (let i = 0; i < words.length; i++) {
  if (words[i] === "!") {
    rank = Number.parseInt(words[++i], 10);
    continue;
  }
  lines.push(`${words[i]} ${rank++}`);
}
fs.mkdirSync(outDir, { recursive: true });
fs.writeFileSync(path.join(outDir, `${name}.tiktoken`), lines.join("\n") + "\n");
fs.writeFileSync(
  path.join(outDir, `${name}.json`),
  JSON.stringify({ pat_str: enc.pat_str, special_tokens: enc.special_tokens }),
);
console.log(`${name}: ${lines.length} ranks`);
