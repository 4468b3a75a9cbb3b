// Compares our output with the oracle's, line by line.
// Usage: node compare.js ids CORPUS.jsonl EXPECTED.jsonl ACTUAL.jsonl LABEL
//        node compare.js text CORPUS.jsonl ACTUAL.jsonl LABEL   (decoded strings)
// Prints the first mismatches with their input; exits 1 on any mismatch.
"use strict";
const fs = require("fs");

const [mode, ...rest] = process.argv.slice(2);
const read = (p) => fs.readFileSync(p, "utf8").split("\n").filter((l) => l.length > 0);
let corpus, expected, actual, label;
if (mode === "ids") {
  [corpus, expected, actual] = rest.slice(0, 3).map(read);
  label = rest[3];
} else if (mode === "text") {
  [corpus, actual] = rest.slice(0, 2).map(read);
  expected = corpus;
  label = rest[2];
} else {
  console.error("usage: node compare.js ids|text ...");
  process.exit(2);
}
if (actual.length !== corpus.length || expected.length !== corpus.length) {
  console.error(`${label}: line counts differ: corpus ${corpus.length}, expected ${expected.length}, actual ${actual.length}`);
  process.exit(1);
}
let bad = 0;
for (let i = 0; i < corpus.length; i++) {
  const same = mode === "ids" ? expected[i] === actual[i] : JSON.parse(expected[i]) === JSON.parse(actual[i]);
  if (same) continue;
  if (++bad <= 5) {
    console.error(`${label}: mismatch on corpus line ${i + 1}: ${corpus[i].slice(0, 200)}`);
    console.error(`  expected ${expected[i].slice(0, 300)}`);
    console.error(`  actual   ${actual[i].slice(0, 300)}`);
  }
}
console.log(`${label}: ${corpus.length - bad} of ${corpus.length} identical`);
process.exit(bad === 0 ? 0 : 1);
