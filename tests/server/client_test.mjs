// Drives a running `deltafin serve` with the official openai npm package.
// Usage: node client_test.mjs <mode> <base-url> <model-name> [api-key]
//   mode "main":  chat + completions (streaming and not), models list, 20+
//                 invalid requests, two concurrent requests served in order,
//                 disconnect stops generation, 413/405/404 over raw HTTP.
//   mode "queue": the server runs with --queue 32: twenty concurrent clients
//                 in FIFO order, a client leaving the queue, keep-alive reuse
//                 of one connection for 50 requests, /metrics.
//   mode "full":  the server runs with --queue 1: 429 with Retry-After only
//                 when the queue is full.
//   mode "reuse": the server runs with --memo-entries 0: conversation state
//                 reuse prefills only the new tokens and changes no output.
//   mode "auth":  the server runs with --api-key: wrong/missing key -> 401.
//   mode "shutdown" (extra arg: server pid): SIGTERM during a stream.
import OpenAI from 'openai';
import net from 'node:net';
import assert from 'node:assert/strict';

const [mode, baseURL, model, apiKey] = process.argv.slice(2);
const client = new OpenAI({ apiKey: apiKey || 'unused', baseURL, maxRetries: 0, timeout: 60000 });
const url = new URL(baseURL);
let checks = 0;
const ok = (what) => { checks++; console.log(`ok - ${what}`); };

// One raw HTTP exchange on 127.0.0.1: send `bytes`, read until the server closes.
function raw(bytes, { halfClose = true } = {}) {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: '127.0.0.1', port: Number(url.port) });
    const chunks = [];
    s.on('connect', () => { s.write(bytes); if (halfClose) s.end(); });
    s.on('data', (d) => chunks.push(d));
    s.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    s.on('error', reject);
    s.setTimeout(20000, () => { s.destroy(); reject(new Error('raw request timed out')); });
  });
}
function parseRaw(text) {
  const [head, ...rest] = text.split('\r\n\r\n');
  const status = Number(head.split(' ')[1]);
  return { status, head, body: rest.join('\r\n\r\n') };
}

async function expectError(what, fn, status, { param, code, type = 'invalid_request_error' } = {}) {
  try {
    await fn();
  } catch (e) {
    assert.ok(e instanceof OpenAI.APIError, `${what}: not an APIError: ${e}`);
    assert.equal(e.status, status, `${what}: status ${e.status}: ${e.message}`);
    assert.equal(typeof e.error?.message, 'string', `${what}: error.message`);
    assert.equal(e.type, type, `${what}: type`);
    if (param !== undefined) assert.equal(e.param, param, `${what}: param`);
    if (code !== undefined) assert.equal(e.code, code, `${what}: code`);
    ok(`${what} -> ${status} ${e.code} (${e.param})`);
    return e;
  }
  assert.fail(`${what}: expected HTTP ${status}, got success`);
}

const chatMsgs = [{ role: 'user', content: 'Hello there' }];

async function collectChat(params) {
  const stream = await client.chat.completions.create({ model, stream: true, ...params });
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  return chunks;
}

async function mainMode() {
  const models = await client.models.list();
  assert.equal(models.data.length, 1);
  assert.equal(models.data[0].id, model);
  assert.equal((await client.models.retrieve(model)).id, model);
  ok('models list and retrieve');

  // Non-streaming chat.
  const r = await client.chat.completions.create({ model, messages: chatMsgs, max_tokens: 6 });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 6);
  if (r.choices[0].finish_reason === 'length') assert.equal(r.usage.completion_tokens, 6);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  ok('chat (non-streaming)');

  // Streaming chat with usage; same request -> the memo replays the same output.
  const chunks = await collectChat({ messages: chatMsgs, max_tokens: 6, stream_options: { include_usage: true } });
  assert.deepEqual(chunks[0].choices[0].delta, { role: 'assistant', content: '' });
  const last = chunks[chunks.length - 1];
  assert.deepEqual(last.choices, []);
  for (const k of ['prompt_tokens', 'completion_tokens', 'total_tokens']) assert.equal(last.usage[k], r.usage[k]);
  const fin = chunks[chunks.length - 2];
  assert.equal(fin.choices[0].finish_reason, r.choices[0].finish_reason);
  let content = '', reasoning = '';
  for (const c of chunks.slice(1, -2)) {
    assert.equal(c.usage, null);
    assert.equal(c.choices[0].finish_reason, null);
    content += c.choices[0].delta.content ?? '';
    reasoning += c.choices[0].delta.reasoning_content ?? '';
  }
  assert.equal(content, r.choices[0].message.content);
  assert.equal(reasoning, r.choices[0].message.reasoning_content);
  ok('chat (streaming, include_usage) matches the non-streaming answer');

  // Completions, both transports (different limits, so neither is a memo hit).
  const c1 = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 5 });
  assert.equal(c1.object, 'text_completion');
  assert.equal(c1.choices[0].finish_reason, 'length');
  assert.equal(c1.usage.completion_tokens, 5);
  assert.equal(c1.usage.prompt_tokens, Buffer.byteLength('Once upon a time'));  // byte-level test tokenizer
  const cs = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 9, stream: true });
  let text = '', finish = null, n = 0;
  for await (const c of cs) { text += c.choices[0].text; finish = c.choices[0].finish_reason ?? finish; n++; }
  assert.equal(finish, 'length');
  assert.ok(n >= 2);
  ok(`completions (non-streaming and streaming): ${JSON.stringify(c1.choices[0].text)} / ${JSON.stringify(text)}`);

  // Stop strings: the answer is the plain one cut before the first
  // occurrence (a stop of several bytes spans tokens: the test tokenizer is
  // byte-level), streaming shows no byte of it, finish_reason is 'stop'.
  const plain = await client.completions.create({ model, prompt: 'stop strings', max_tokens: 40 });
  const full = plain.choices[0].text;
  let k = 12;
  while (k < full.length && full.charCodeAt(k) >= 0xdc00 && full.charCodeAt(k) <= 0xdfff) k++;
  const stopStr = full.slice(k, k + 3);
  assert.ok(stopStr.length >= 2, `plain output too short: ${JSON.stringify(full)}`);
  const want = full.slice(0, full.indexOf(stopStr));
  const cut = await client.completions.create({ model, prompt: 'stop strings', max_tokens: 40, stop: ['\u0001', stopStr] });
  assert.equal(cut.choices[0].text, want);
  assert.equal(cut.choices[0].finish_reason, 'stop');
  assert.ok(cut.usage.completion_tokens < 40);
  const cutStream = await client.completions.create({ model, prompt: 'stop strings', max_tokens: 40, stop: stopStr,
    stream: true });
  let streamed = '', streamFinish = null;
  for await (const c of cutStream) { streamed += c.choices[0].text; streamFinish = c.choices[0].finish_reason ?? streamFinish; }
  assert.equal(streamed, want);
  assert.equal(streamFinish, 'stop');
  ok(`stop strings (non-streaming and streaming): cut before ${JSON.stringify(stopStr)}`);

  // Tools: declared tools and tool_choice are rendered into the prompt (more prompt tokens); a
  // conversation with an assistant's tool call and the tool's result is accepted (the tiny model
  // itself never calls a tool, so the parsing of calls is covered by the unit tests).
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
  const wt = await client.chat.completions.create({ model, messages: chatMsgs, max_tokens: 4, tools });
  assert.ok(wt.usage.prompt_tokens > r.usage.prompt_tokens, `${wt.usage.prompt_tokens} vs ${r.usage.prompt_tokens}`);
  const req = await client.chat.completions.create({ model, messages: chatMsgs, max_tokens: 4, tools,
    tool_choice: 'required' });
  assert.ok(req.usage.prompt_tokens > wt.usage.prompt_tokens);
  const turn = [...chatMsgs,
    { role: 'assistant', content: '', tool_calls: [{ id: 'call_1', type: 'function',
      function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: '{"temp_c": 21}' }];
  const after = await client.chat.completions.create({ model, messages: turn, max_tokens: 4, tools });
  assert.ok(after.usage.prompt_tokens > wt.usage.prompt_tokens);
  assert.ok(['stop', 'length', 'tool_calls'].includes(after.choices[0].finish_reason));
  ok(`tools rendered (${r.usage.prompt_tokens} -> ${wt.usage.prompt_tokens} prompt tokens, required ` +
     `${req.usage.prompt_tokens}); a call -> result turn accepted (${after.usage.prompt_tokens})`);

  // Log probabilities (greedy, so the emitted token is the likeliest); a stream carries the same entries.
  const lpParams = { model, messages: chatMsgs, max_tokens: 6, logprobs: true, top_logprobs: 3 };
  const lr = await client.chat.completions.create(lpParams);
  const entries = lr.choices[0].logprobs.content;
  assert.ok(entries.length <= lr.usage.completion_tokens, `${entries.length} entries`);
  for (const e of entries) {
    assert.equal(e.top_logprobs.length, 3);
    assert.equal(e.top_logprobs[0].token, e.token);
    assert.equal(e.top_logprobs[0].logprob, e.logprob);
    assert.ok(e.logprob <= 0 && e.top_logprobs[1].logprob <= e.logprob);
    assert.ok(Array.isArray(e.bytes) && e.bytes.length >= 1);
  }
  const streamedLp = [];
  for (const c of await collectChat(lpParams)) streamedLp.push(...(c.choices[0]?.logprobs?.content ?? []));
  assert.deepEqual(streamedLp, entries);
  const cl = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 5, logprobs: 2 });
  const L = cl.choices[0].logprobs;
  assert.equal(L.tokens.length, cl.usage.completion_tokens);
  assert.equal(L.token_logprobs.length, L.tokens.length);
  assert.equal(L.top_logprobs.length, L.tokens.length);
  for (let i = 0; i < L.tokens.length; i++) {
    assert.ok(Object.keys(L.top_logprobs[i]).length >= 1 && Object.keys(L.top_logprobs[i]).length <= 2);
    assert.equal(Math.max(...Object.values(L.top_logprobs[i])), L.token_logprobs[i]);
    if (i) assert.ok(L.text_offset[i] > L.text_offset[i - 1]);
  }
  ok(`logprobs: chat (${entries.length} entries, top 3, streamed the same) and completions (logprobs 2)`);

  // Invalid requests: each refused with OpenAI's error shape, naming the field.
  const chat = (extra) => () => client.chat.completions.create({ model, messages: chatMsgs, max_tokens: 4, ...extra });
  const comp = (extra) => () => client.completions.create({ model, prompt: 'hi', max_tokens: 4, ...extra });
  await expectError('unknown field', chat({ foo: 1 }), 400, { param: 'foo', code: 'unknown_parameter' });
  await expectError('temperature out of range', chat({ temperature: 3 }), 400, { param: 'temperature' });
  await expectError('top_p out of range', chat({ top_p: 1.5 }), 400, { param: 'top_p' });
  await expectError('n = 17', chat({ n: 17 }), 400, { param: 'n' });
  await expectError('empty messages', chat({ messages: [] }), 400, { param: 'messages' });
  await expectError('image content part', chat({ messages: [{ role: 'user', content: [
    { type: 'text', text: 'look' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }] }] }),
  400, { param: 'messages[0].content[1].type', code: 'unsupported_content_type' });
  await expectError('unknown role', chat({ messages: [{ role: 'wizard', content: 'x' }] }), 400, { param: 'messages[0].role' });
  await expectError('max_tokens 0', chat({ max_tokens: 0 }), 400, { param: 'max_tokens' });
  await expectError('max_tokens over the ceiling', chat({ max_tokens: 1e9 }), 400, { param: 'max_tokens' });
  await expectError('max_tokens and max_completion_tokens', chat({ max_completion_tokens: 3 }), 400);
  await expectError('stream_options without stream', chat({ stream_options: { include_usage: true } }), 400,
    { param: 'stream_options' });
  await expectError('a tool with a bad name', chat({ tools: [{ type: 'function', function: { name: 'a b' } }] }), 400,
    { param: 'tools[0].function.name' });
  await expectError('tool_choice naming a tool', chat({ tools: [{ type: 'function', function: { name: 'f' } }],
    tool_choice: { type: 'function', function: { name: 'f' } } }), 400, { param: 'tool_choice' });
  await expectError('top_logprobs without logprobs', chat({ top_logprobs: 2 }), 400, { param: 'top_logprobs' });
  await expectError('frequency_penalty out of range', chat({ frequency_penalty: 2.5 }), 400, { param: 'frequency_penalty' });
  await expectError('top_k not an integer', chat({ top_k: 2.5 }), 400, { param: 'top_k' });
  await expectError('five stop strings', chat({ stop: ['a', 'b', 'c', 'd', 'e'] }), 400, { param: 'stop' });
  await expectError('empty stop string', chat({ stop: ['a', ''] }), 400, { param: 'stop' });
  await expectError('response_format json_object', chat({ response_format: { type: 'json_object' } }), 400,
    { param: 'response_format' });
  await expectError('reasoning_effort medium', chat({ reasoning_effort: 'medium' }), 400, { param: 'reasoning_effort' });
  await expectError('logit_bias', chat({ logit_bias: { 65: 5 } }), 400, { param: 'logit_bias' });
  await expectError('user message without content', chat({ messages: [{ role: 'user' }] }), 400,
    { param: 'messages[0].content' });
  await expectError('wrong model', chat({ model: 'gpt-4o' }), 404, { param: 'model', code: 'model_not_found' });
  await expectError('prompt as token array', comp({ prompt: [1, 2, 3] }), 400, { param: 'prompt' });
  await expectError('empty prompt', comp({ prompt: '' }), 400, { param: 'prompt' });
  await expectError('echo', comp({ echo: true }), 400, { param: 'echo' });
  await expectError('best_of 3', comp({ best_of: 3 }), 400, { param: 'best_of' });
  await expectError('suffix', comp({ suffix: 'end' }), 400, { param: 'suffix' });
  await expectError('invalid JSON', () => client.post('/chat/completions', { body: '{"model":', headers: { 'Content-Type': 'application/json' } }),
    400, { code: 'invalid_json' });
  await expectError('unknown path', () => client.post('/embeddings', { body: { model, input: 'x' } }), 404,
    { code: 'not_found' });
  await expectError('GET on a POST route', () => client.get('/chat/completions'), 405, { code: 'method_not_allowed' });

  // Harmless client defaults are accepted.
  const d = await client.chat.completions.create({ model, messages: chatMsgs, max_tokens: 6, n: 1, top_p: 1,
    temperature: 0, presence_penalty: 0, frequency_penalty: 0, logit_bias: {}, stop: [], user: 'u', seed: 7,
    stream: false, tools: [], response_format: { type: 'text' }, parallel_tool_calls: true, store: false });
  assert.equal(d.choices[0].message.content, r.choices[0].message.content);
  ok('harmless client defaults accepted, output unchanged');

  // 413 before the body is read: the reply arrives although no body was sent.
  const big = parseRaw(await raw(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
    `Content-Length: 200000000\r\n\r\n`, { halfClose: false }));
  assert.equal(big.status, 413);
  assert.equal(JSON.parse(big.body).error.code, 'request_too_large');
  ok('oversize body -> 413 without the body being sent');

  // Two concurrent generations: the second waits in the queue and is served
  // after the first (FIFO); health and models keep answering meanwhile.
  // The second waits for all of the first's 1,500 tokens: under ASan on a loaded 2-core CI
  // machine that took longer than the client's 60 s default (a timeout, not a server fault),
  // so these two get a limit of their own, and the second asks for few tokens.
  const long = { model, prompt: 'concurrency', max_tokens: 1500 };
  const patient = { timeout: 600000 };
  const first = client.completions.create(long, patient).withResponse();
  for (let i = 0; i < 200 && (await metric('deltafin_generation_running')) !== 1; i++) await sleep(5);
  const h = await fetch(new URL('/health', baseURL)); assert.equal(h.status, 200);
  const ml = await client.models.list(); assert.equal(ml.data[0].id, model);
  const second = client.completions.create({ ...long, prompt: 'concurrency 2', max_tokens: 8 }, patient).withResponse();
  const done = [];
  const [a, b] = await Promise.all([first.then((x) => { done.push(1); return x; }),
    second.then((x) => { done.push(2); return x; })]);
  assert.deepEqual(done, [1, 2]);
  assert.equal(a.data.usage.completion_tokens, 1500);
  assert.equal(b.data.usage.completion_tokens, 8);
  const t1 = Number(a.response.headers.get('x-deltafin-queue-ticket'));
  const t2 = Number(b.response.headers.get('x-deltafin-queue-ticket'));
  assert.ok(t2 === t1 + 1, `tickets ${t1} ${t2}`);
  assert.ok(Number(b.response.headers.get('x-deltafin-queue-wait-ms')) > 0);
  ok('two concurrent generation requests: both served in FIFO order; /health and /v1/models answered meanwhile');

  // A client that disconnects mid-stream frees the server within a token.
  const ac = new AbortController();
  const s = await client.completions.create({ model, prompt: 'disconnect', max_tokens: 4000, stream: true },
    { signal: ac.signal });
  let got = 0;
  try { for await (const _ of s) { if (++got === 3) ac.abort(); } } catch (e) { /* aborted */ }
  const t0 = Date.now();
  await client.completions.create({ model, prompt: 'after', max_tokens: 1 }, { timeout: 5000 });
  assert.ok((await metric('deltafin_generations_cancelled_total')) >= 1);
  ok(`disconnect mid-stream cancelled the generation: the next request was answered after ${Date.now() - t0} ms`);
}

// One value from GET /metrics (the first sample whose name and labels match exactly).
async function metric(name) {
  const text = await (await fetch(new URL('/metrics', baseURL), {
    headers: apiKey ? { Authorization: `Bearer ${apiKey}` } : {} })).text();
  for (const line of text.split('\n')) {
    if (line.startsWith(name + ' ')) return Number(line.slice(name.length + 1));
  }
  return 0;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function queueMode() {
  // Twenty concurrent clients, started 40 ms apart behind a long first one:
  // every one is served, in the order it joined, and joined in the order sent.
  const n = 20;
  const runs = [];
  for (let i = 0; i < n; i++) {
    runs.push(client.completions.create({ model, prompt: `fifo ${i}`, max_tokens: i === 0 ? 300 : 8 }).withResponse());
    await sleep(40);
  }
  const all = await Promise.all(runs);
  const tickets = all.map((x) => Number(x.response.headers.get('x-deltafin-queue-ticket')));
  for (let i = 1; i < n; i++) assert.ok(tickets[i] > tickets[i - 1], `tickets not in send order: ${tickets}`);
  // Served in ticket order: the server numbers generations as it starts them (the order in which
  // the client reads the responses says nothing: a busy event loop takes ready sockets in any order).
  const served = all.map((x) => Number(x.response.headers.get('x-deltafin-generation')));
  for (let i = 1; i < n; i++) assert.ok(served[i] > served[i - 1], `served out of order: ${served}`);
  const ahead = all.map((x) => Number(x.response.headers.get('x-deltafin-queue-length')));
  assert.equal(ahead[0], 0);
  assert.ok(ahead.slice(1).some((a) => a > 0), `nobody ever waited: ${ahead}`);
  for (const x of all) assert.ok(x.data.usage.completion_tokens >= 1);
  ok(`twenty concurrent clients: all served, in FIFO order (queue lengths seen ${ahead.join(',')})`);

  // A client that leaves while queued leaves the queue: it is never served and the one behind it is.
  const abandonedBefore = await metric('deltafin_queue_abandoned_total');
  const gensBefore = await metric('deltafin_generations_total');
  // (The holder runs long enough, ~1 s on the tiny model, for the leaver to be seen queued.)
  const holder = client.completions.create({ model, prompt: 'holder', max_tokens: 2000 });
  for (let i = 0; i < 200 && (await metric('deltafin_generation_running')) !== 1; i++) await sleep(5);
  const ac = new AbortController();
  const leaver = client.completions.create({ model, prompt: 'leaver', max_tokens: 8 }, { signal: ac.signal })
    .catch((e) => e);
  for (let i = 0; i < 200 && (await metric('deltafin_queue_length')) !== 1; i++) await sleep(5);
  assert.equal(await metric('deltafin_queue_length'), 1);
  ac.abort();
  await leaver;
  for (let i = 0; i < 100 && (await metric('deltafin_queue_length')) !== 0; i++) await sleep(10);
  assert.equal(await metric('deltafin_queue_length'), 0);
  const behind = await client.completions.create({ model, prompt: 'behind', max_tokens: 8 });
  await holder;
  assert.equal(behind.usage.completion_tokens, 8);
  assert.equal(await metric('deltafin_queue_abandoned_total'), abandonedBefore + 1);
  assert.equal(await metric('deltafin_generations_total'), gensBefore + 2);  // holder and behind; not the leaver
  ok('a client that disconnects while queued leaves the queue and is never generated for');

  // Keep-alive: 50 requests on one connection (an agent with one socket).
  const { Agent, request } = await import('node:http');
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const acceptedBefore = await metric('deltafin_connections_accepted_total');
  const get = (path, body) => new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: Number(url.port), path, agent, method: body ? 'POST' : 'GET',
      headers: body ? { 'Content-Type': 'application/json' } : {} }, (res) => {
      let data = '';
      res.on('data', (d) => { data += d; });
      res.on('end', () => resolve({ status: res.statusCode, data, socket: res.socket }));
    });
    req.on('error', reject);
    req.end(body ? JSON.stringify(body) : undefined);
  });
  const sockets = new Set();
  for (let i = 0; i < 50; i++) {
    const r = i % 2 ? await get('/health') : await get('/v1/completions', { prompt: `ka ${i}`, max_tokens: 2 });
    assert.equal(r.status, 200, r.data);
    sockets.add(r.socket);
  }
  agent.destroy();
  assert.equal(sockets.size, 1);
  // Exactly one new connection: the agent's (metric() reuses fetch's own kept-alive one).
  assert.equal(await metric('deltafin_connections_accepted_total'), acceptedBefore + 1);
  ok('keep-alive: 50 requests on one connection');

  const text = await (await fetch(new URL('/metrics', baseURL))).text();
  for (const m of ['deltafin_requests_total{status="200"}', 'deltafin_queue_length', 'deltafin_queue_wait_seconds_sum',
    'deltafin_prompt_tokens_total', 'deltafin_completion_tokens_total']) assert.ok(text.includes(m), m);
  assert.ok((await metric('deltafin_completion_tokens_total')) > 0);
  ok('/metrics: requests by status, queue, tokens in and out');
}

async function fullMode() {
  // --queue 1: one running, one waiting, the third is refused at once.
  // (Polled, not slept: 300 tokens of the tiny model can take under 200 ms.)
  const long = { model, prompt: 'full', max_tokens: 2000 };
  const a = client.completions.create(long);
  for (let i = 0; i < 200 && (await metric('deltafin_generation_running')) !== 1; i++) await sleep(5);
  const b = client.completions.create({ ...long, prompt: 'full 2', max_tokens: 4 });
  for (let i = 0; i < 200 && (await metric('deltafin_queue_length')) !== 1; i++) await sleep(5);
  const t0 = Date.now();
  const e = await expectError('third request with a full queue', () => client.completions.create({ ...long, prompt: 'full 3' }),
    429, { code: 'server_busy', type: 'server_busy' });
  assert.ok(Date.now() - t0 < 1000, 'the 429 was not immediate');
  assert.ok(Number(e.headers.get('retry-after')) >= 1);
  await Promise.all([a, b]);
  assert.equal(await metric('deltafin_queue_rejected_total'), 1);
  ok('429 with Retry-After only when the queue is full; the queued request was served');
}

async function withHeaders(params) {
  const { data, response } = await client.chat.completions.create(params).withResponse();
  return { r: data, prefill: Number(response.headers.get('x-deltafin-prefill-tokens')),
    cached: Number(response.headers.get('x-deltafin-cached-tokens')) };
}

async function reuseMode() {
  const turn1 = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'What is a delta?' }];
  const a = await withHeaders({ model, messages: turn1, max_tokens: 5 });
  assert.equal(a.cached, 0);
  assert.equal(a.prefill, a.r.usage.prompt_tokens);
  const m = a.r.choices[0].message;
  const turn2 = [...turn1, { role: 'assistant', content: m.content, reasoning_content: m.reasoning_content },
    { role: 'user', content: 'And a fin?' }];
  const b = await withHeaders({ model, messages: turn2, max_tokens: 7 });
  const p1 = a.r.usage.prompt_tokens;
  assert.ok(b.cached === p1 || b.cached === p1 + a.r.usage.completion_tokens - 1, `cached ${b.cached}`);
  assert.equal(b.prefill, b.r.usage.prompt_tokens - b.cached);
  assert.equal(b.r.usage.prompt_tokens_details.cached_tokens, b.cached);
  ok(`turn 2 reused ${b.cached} tokens and prefilled only ${b.prefill} of ${b.r.usage.prompt_tokens}`);

  // A raw completion drops the retained state; turn 2 again runs from scratch, same output.
  await client.completions.create({ model, prompt: 'reset', max_tokens: 1 });
  const c = await withHeaders({ model, messages: turn2, max_tokens: 7 });
  assert.equal(c.cached, 0);
  assert.equal(c.prefill, c.r.usage.prompt_tokens);
  assert.deepEqual(c.r.choices, b.r.choices);
  assert.deepEqual(c.r.usage.completion_tokens, b.r.usage.completion_tokens);
  ok('turn 2 from scratch gives the same answer');

  // Streaming turn 3 reuses too and matches a scratch run; an edited history gets no reuse.
  const turn3 = [...turn2, { role: 'assistant', content: c.r.choices[0].message.content,
    reasoning_content: c.r.choices[0].message.reasoning_content }, { role: 'user', content: 'Thanks' }];
  const { data: st, response } = await client.chat.completions.create({ model, messages: turn3, max_tokens: 6,
    stream: true }).withResponse();
  assert.ok(Number(response.headers.get('x-deltafin-cached-tokens')) > 0);
  let s3 = '';
  for await (const ch of st) s3 += (ch.choices[0]?.delta?.reasoning_content ?? '') + '|' + (ch.choices[0]?.delta?.content ?? '');
  const edited = [...turn3.slice(0, -1), { role: 'user', content: 'Thanks!' }];
  const e = await withHeaders({ model, messages: edited, max_tokens: 6 });
  assert.equal(e.cached, 0);
  await client.completions.create({ model, prompt: 'reset', max_tokens: 1 });
  const st2 = await client.chat.completions.create({ model, messages: turn3, max_tokens: 6, stream: true });
  let s3b = '';
  for await (const ch of st2) s3b += (ch.choices[0]?.delta?.reasoning_content ?? '') + '|' + (ch.choices[0]?.delta?.content ?? '');
  assert.equal(s3b, s3);
  ok('streaming turn 3 with reuse equals a scratch run; an edited history is not reused');
}

async function authMode() {
  const m = await client.models.list();
  assert.equal(m.data[0].id, model);
  ok('right key accepted');
  const wrong = new OpenAI({ apiKey: apiKey + 'x', baseURL, maxRetries: 0 });
  await expectError('wrong key', () => wrong.models.list(), 401, { code: 'invalid_api_key' });
  await expectError('wrong key on chat', () => wrong.chat.completions.create({ model, messages: chatMsgs, max_tokens: 2 }),
    401, { code: 'invalid_api_key' });
  const missing = parseRaw(await raw('GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n'));
  assert.equal(missing.status, 401);
  assert.equal(JSON.parse(missing.body).error.code, 'invalid_api_key');
  ok('missing key -> 401');
  const health = parseRaw(await raw('GET /health HTTP/1.1\r\nHost: x\r\n\r\n'));
  assert.equal(health.status, 200);
  ok('health needs no key');
}

// SIGTERM while a stream is running: the stream ends with a server_error
// frame (the client raises it) and the server exits (checked by the script).
async function shutdownMode() {
  const pid = Number(process.argv[6]);
  const s = await client.completions.create({ model, prompt: 'shutdown', max_tokens: 4000, stream: true });
  let got = 0, err = null;
  try {
    for await (const _ of s) { if (++got === 3) process.kill(pid, 'SIGTERM'); }
  } catch (e) { err = e; }
  assert.ok(err, 'the stream ended without an error frame');
  assert.match(String(err.message), /shutting down/);
  assert.ok(got < 4000);
  ok(`SIGTERM mid-stream: the stream stopped after ${got} chunks with "${err.message}"`);
}

// Seeded sampling (a server without a memo, so every answer is generated):
// the same seed twice gives the same text, streamed or not; seeds differ from
// one another. Prints {"chat": [...], "completion": [...]} so that the script
// can compare a server with drafting against one without.
async function sampleMode() {
  const texts = { chat: [], completion: [] };
  for (const seed of [1, 2, 3, 4]) {
    const params = { model, messages: chatMsgs, max_tokens: 16, temperature: 1.0, top_p: 0.95, seed,
      presence_penalty: 0.3 };
    const a = await client.chat.completions.create(params);
    const b = await client.chat.completions.create(params);
    const text = (m) => (m.reasoning_content ?? '') + '|' + (m.content ?? '');
    assert.equal(text(a.choices[0].message), text(b.choices[0].message), `seed ${seed}: two answers differ`);
    let streamed = '', reasoning = '';
    for (const c of await collectChat(params)) {
      streamed += c.choices[0]?.delta?.content ?? '';
      reasoning += c.choices[0]?.delta?.reasoning_content ?? '';
    }
    assert.equal(reasoning + '|' + streamed, text(a.choices[0].message), `seed ${seed}: streamed answer differs`);
    texts.chat.push(text(a.choices[0].message));
    const cp = { model, prompt: 'Once upon a time', max_tokens: 16, temperature: 0.9, top_k: 50, seed };
    const c1 = await client.completions.create(cp);
    const c2 = await client.completions.create(cp);
    assert.equal(c1.choices[0].text, c2.choices[0].text, `completion seed ${seed}: two answers differ`);
    texts.completion.push(c1.choices[0].text);
  }
  assert.ok(new Set(texts.chat).size >= 3, `chat: seeds gave ${new Set(texts.chat).size} distinct texts`);
  assert.ok(new Set(texts.completion).size >= 3, `completion: seeds gave ${new Set(texts.completion).size} texts`);
  const greedy = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 16 });
  assert.ok(!texts.completion.every((t) => t === greedy.choices[0].text), 'sampling gave the greedy text');
  ok('seeded sampling: each seed reproduces (streamed and not), seeds differ');

  // n = 3: the choices run one after another, choice i with seed + i (choice 0 is the n = 1 answer).
  const base = { model, messages: chatMsgs, max_tokens: 8, temperature: 1.0, seed: 40 };
  const three = await client.chat.completions.create({ ...base, n: 3 });
  assert.deepEqual(three.choices.map((c) => c.index), [0, 1, 2]);
  let tokens = 0;
  for (let i = 0; i < 3; i++) {
    const one = await client.chat.completions.create({ ...base, seed: 40 + i });
    assert.equal(three.choices[i].message.content, one.choices[0].message.content, `choice ${i}`);
    assert.equal(three.choices[i].message.reasoning_content, one.choices[0].message.reasoning_content);
    tokens += one.usage.completion_tokens;
    if (i === 0) assert.equal(three.usage.prompt_tokens, one.usage.prompt_tokens);
  }
  assert.equal(three.usage.completion_tokens, tokens);
  const byIndex = ['', '', ''];
  const finishes = [];
  for (const c of await collectChat({ ...base, n: 3, stream_options: { include_usage: true } })) {
    for (const ch of c.choices) {
      byIndex[ch.index] += (ch.delta.reasoning_content ?? '') + (ch.delta.content ?? '');
      if (ch.finish_reason) finishes.push(ch.index);
    }
    if (c.usage) assert.equal(c.usage.completion_tokens, tokens);
  }
  assert.deepEqual(finishes, [0, 1, 2]);
  for (let i = 0; i < 3; i++)
    assert.equal(byIndex[i], (three.choices[i].message.reasoning_content ?? '') + three.choices[i].message.content);
  ok('n = 3: choice i is the n = 1 answer with seed + i, streamed in order with indices, usage summed');
  console.log(JSON.stringify(texts));
}

const modes = { sample: sampleMode, main: mainMode, reuse: reuseMode, auth: authMode, shutdown: shutdownMode, queue: queueMode, full: fullMode };
try {
  await modes[mode]();
  console.log(`# ${mode}: ${checks} checks passed`);
} catch (e) {
  console.error(`not ok - ${e.stack ?? e}`);
  process.exit(1);
}
