// Deterministic ~10 MB mixed text for the tokenizer throughput benchmark:
// English-like prose, source code, CJK, Cyrillic/Arabic, numbers, emoji.
// Usage: node gen_bench_text.js OUT [BYTES]
"use strict";
const fs = require("fs");

const [out, bytesArg] = process.argv.slice(2);
if (!out) {
  console.error("usage: node gen_bench_text.js OUT [BYTES]");
  process.exit(2);
}
const target = Number.parseInt(bytesArg || String(10 * 1000 * 1000), 10);
let seed = 0xbe7c4;
function rand() {
  seed |= 0;
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (a) => a[Math.floor(rand() * a.length)];
const english = ("the of and to in is that for it as was with be by on not he this are or his from at which but " +
  "have an they you were her she there been one all we their has would when if so no what up out who them " +
  "some could more other time into only then its two may first new these any years very after most also " +
  "made over did many before must through back where much your way well down should because each just " +
  "those people Mr how too little state good very make world still own see men work long get here between " +
  "both life being under never day same another know while last might us great old year off come since " +
  "against go came right used take three tokenizer throughput benchmark deterministic encoding language " +
  "model inference experts streaming architecture don't can't it's we'll they've I'm").split(" ");
const cjk = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处队南给色光门即保治北造百规热领七海口东导器压志世金增争济阶油思术极交受联什认六共权收证改清己美再采转更单风切打白教速花带安场身车例真务具万每目至达走积示议声报斗完类八离华名确才科张信马节话米整空元况今集温传土许步群广石记需段研界拉林律叫且究观越织装影算低持音众书布复容儿须际商非验连断深难近矿千周委素技备半办青省列习响约支般史感劳便团往酸历市克何除消构府称太准精值号率族维划选标写存候毛亲快效斯院查江型眼王按格养易置派层片始却专状育厂京识适属圆包火住调满县局照参红细引听该铁价严";
const code = [
  "function encode(text, ranks) {\n  const out = [];\n  for (const piece of split(text)) out.push(...bpe(piece, ranks));\n  return out;\n}\n",
  "def merge(parts, ranks):\n    while True:\n        best = min(range(len(parts) - 1), key=lambda i: ranks.get(parts[i] + parts[i + 1], 1 << 30))\n        if best is None:\n            return parts\n",
  "for (size_t i = 0; i < n; ++i) {\n\tif (x[i] > max) { max = x[i]; arg = i; }\n}\n",
  "SELECT id, name, COUNT(*) AS n FROM tokens WHERE rank < 1000 GROUP BY id ORDER BY n DESC;\n",
  "{\"model\": \"k3\", \"temperature\": 0.0, \"messages\": [{\"role\": \"user\", \"content\": \"hello\"}]}\n",
  "    if err != nil {\n        return nil, fmt.Errorf(\"read %s: %w\", path, err)\n    }\n",
];
const other = ["Привет, как дела? Это тест токенизатора.", "مرحبا بكم في اختبار المعالج", "Ελληνικά κείμενα εδώ",
  "日本語のテキストとカタカナ、ひらがな。", "한국어 문장도 포함합니다.", "naïve café résumé façade", "😀 🎉 👍🏽 👩‍💻"];

const parts = [];
let size = 0;
while (size < target) {
  const r = rand();
  let s;
  if (r < 0.6) {
    const words = [];
    const n = 20 + Math.floor(rand() * 80);
    for (let i = 0; i < n; i++) {
      let w = pick(english);
      if (i === 0 || rand() < 0.05) w = w[0].toUpperCase() + w.slice(1);
      if (rand() < 0.03) w += String(Math.floor(rand() * 100000));
      if (rand() < 0.08) w += pick([",", ".", ";", ":", "!", "?"]);
      words.push(w);
    }
    s = words.join(" ") + (rand() < 0.5 ? "\n\n" : "\n");
  } else if (r < 0.75) {
    s = pick(code);
  } else if (r < 0.9) {
    let t = "";
    const n = 30 + Math.floor(rand() * 120);
    for (let i = 0; i < n; i++) t += cjk[Math.floor(rand() * cjk.length)];
    s = t + pick(["。", "，", "！", "\n"]) + "\n";
  } else {
    s = pick(other) + " " + String(Math.floor(rand() * 1e6)) + "\n";
  }
  parts.push(s);
  size += Buffer.byteLength(s);
}
fs.writeFileSync(out, parts.join(""));
console.log(`bench text: ${size} bytes`);
