// Benchmark: time to first token of each turn of a growing conversation, with
// conversation state reuse and from scratch, in one server run.
// Usage: node bench_reuse.mjs <base-url> <model-name> [turns] [user-chars]
// The server must run with --memo-entries 0 (else the scratch run is a memo hit).
// Per turn: (1) the turn as a client sends it, right after the previous turn:
// the server may reuse the retained state; (2) a 1-token raw completion drops
// that state; (3) the same turn again, from scratch. Both answers must match.
import OpenAI from 'openai';
import assert from 'node:assert/strict';

const [baseURL, model, turnsArg, charsArg] = process.argv.slice(2);
const turns = Number(turnsArg ?? 4), chars = Number(charsArg ?? 400);
const client = new OpenAI({ apiKey: 'unused', baseURL, maxRetries: 0, timeout: 600000 });

function userText(k) {
  const words = ['delta', 'fin', 'expert', 'stream', 'token', 'cache', 'layer', 'router'];
  let s = `Turn ${k}:`;
  for (let i = 0; s.length < chars; i++) s += ' ' + words[(i * 7 + k) % words.length];
  return s.slice(0, chars);
}

// Streams one turn with max_tokens 1; TTFT = until the first chunk after the role chunk.
async function timedTurn(messages) {
  const t0 = performance.now();
  const { data: stream, response } = await client.chat.completions.create({ model, messages, max_tokens: 1,
    stream: true, stream_options: { include_usage: true } }).withResponse();
  let ttft = null, text = '', usage = null, n = 0, reasoning = '', content = '';
  for await (const c of stream) {
    if (n++ === 1) ttft = performance.now() - t0;
    const d = c.choices[0]?.delta ?? {};
    text += (d.reasoning_content ?? '') + '|' + (d.content ?? '');
    reasoning += d.reasoning_content ?? '';
    content += d.content ?? '';
    if (c.usage) usage = c.usage;
  }
  return { ttft, text, usage, reasoning, content, prefill: Number(response.headers.get('x-deltafin-prefill-tokens')),
    cached: Number(response.headers.get('x-deltafin-cached-tokens')) };
}

const history = [];
console.log('| turn | prompt tokens | reuse: prefilled | reuse: TTFT ms | scratch: prefilled | scratch: TTFT ms | speed-up |');
console.log('|---:|---:|---:|---:|---:|---:|---:|');
for (let k = 1; k <= turns; k++) {
  const messages = [...history, { role: 'user', content: userText(k) }];
  const reuse = await timedTurn(messages);
  await client.completions.create({ model, prompt: 'reset', max_tokens: 1 });
  const scratch = await timedTurn(messages);
  assert.equal(scratch.cached, 0);
  assert.equal(reuse.text, scratch.text, 'reuse changed the output');
  console.log(`| ${k} | ${reuse.usage.prompt_tokens} | ${reuse.prefill} | ${reuse.ttft.toFixed(1)} | ${scratch.prefill} | ` +
    `${scratch.ttft.toFixed(1)} | ${(scratch.ttft / reuse.ttft).toFixed(2)}x |`);
  // The assistant's reply as a client sends it back (a new request here would drop the retained state).
  history.push(messages[messages.length - 1], { role: 'assistant', content: scratch.content,
    reasoning_content: scratch.reasoning });
}
