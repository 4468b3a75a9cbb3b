// `deltafin serve`'s POST /v1/messages driven by the official @anthropic-ai/sdk
// client: text, streaming (the same text), stop sequences, a tool_use ->
// tool_result turn, thinking on and off, errors in Anthropic's shape, x-api-key.
// Usage: node anthropic_test.mjs <base-url without /v1> <model> [api-key]
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';

const [baseURL, model, apiKey] = process.argv.slice(2);
const client = new Anthropic({ baseURL, apiKey: apiKey || 'unused', maxRetries: 0 });
const ok = (what) => console.log(`ok - ${what}`);
const messages = [{ role: 'user', content: 'Say something.' }];

async function main() {
  const m = await client.messages.create({ model, max_tokens: 12, messages });
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.ok(m.id.startsWith('msg_'));
  assert.ok(['end_turn', 'max_tokens'].includes(m.stop_reason), m.stop_reason);
  assert.ok(m.usage.input_tokens > 0 && m.usage.output_tokens >= 1 && m.usage.output_tokens <= 12);
  const text = m.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
  ok(`message: ${m.content.length} block(s), stop_reason ${m.stop_reason}, usage ${JSON.stringify(m.usage)}`);

  // Streaming: the SDK's own accumulator gives the same message.
  const stream = client.messages.stream({ model, max_tokens: 12, messages });
  const events = [];
  stream.on('streamEvent', (e) => events.push(e.type));
  const fin = await stream.finalMessage();
  assert.equal(fin.content.filter((b) => b.type === 'text').map((b) => b.text).join(''), text);
  assert.equal(fin.stop_reason, m.stop_reason);
  assert.equal(fin.usage.output_tokens, m.usage.output_tokens);
  assert.equal(events[0], 'message_start');
  assert.equal(events[events.length - 1], 'message_stop');
  ok(`stream: ${events.length} events, the same text and stop_reason`);

  // A stop sequence taken from the middle of the text ends it there.
  if (text.length >= 6) {
    const stop = text.slice(2, 5);
    const s = await client.messages.create({ model, max_tokens: 12, messages, stop_sequences: [stop] });
    assert.equal(s.stop_reason, 'stop_sequence');
    assert.equal(s.stop_sequence, stop);
    assert.equal(s.content.map((b) => b.text ?? '').join(''), text.slice(0, text.indexOf(stop)));
    ok(`stop_sequences: cut before ${JSON.stringify(stop)}`);
  }

  // Tools are rendered into the prompt; a tool_use -> tool_result turn is accepted.
  const tools = [{ name: 'get_weather', description: 'Weather of a city',
    input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } }];
  const wt = await client.messages.create({ model, max_tokens: 4, messages, tools });
  assert.ok(wt.usage.input_tokens > m.usage.input_tokens);
  const turn = [...messages,
    { role: 'assistant', content: [{ type: 'text', text: 'Checking.' },
      { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: '21C' }] }];
  const after = await client.messages.create({ model, max_tokens: 4, messages: turn, tools,
    tool_choice: { type: 'auto' } });
  assert.ok(after.usage.input_tokens > wt.usage.input_tokens);
  ok(`tools rendered (${m.usage.input_tokens} -> ${wt.usage.input_tokens} input tokens); tool_use -> tool_result ` +
     `turn accepted (${after.usage.input_tokens})`);

  // Thinking on: the prompt opens the think channel (a different prompt, so more or other tokens).
  const th = await client.messages.create({ model, max_tokens: 4, messages,
    thinking: { type: 'enabled', budget_tokens: 1024 } });
  assert.notEqual(th.usage.input_tokens, m.usage.input_tokens);
  ok('thinking enabled renders another prompt');

  // Errors come back in Anthropic's shape, as the SDK's typed errors.
  for (const [what, params, status, type] of [
    ['no max_tokens', { model, messages }, 400, 'invalid_request_error'],
    ['an image block', { model, max_tokens: 4, messages: [{ role: 'user', content: [{ type: 'image',
      source: { type: 'base64', media_type: 'image/png', data: 'AA==' } }] }] }, 400, 'invalid_request_error'],
    ['another model', { model: 'claude-x', max_tokens: 4, messages }, 404, 'not_found_error'],
  ]) {
    try {
      await client.messages.create(params);
      assert.fail(`${what}: accepted`);
    } catch (e) {
      assert.ok(e instanceof Anthropic.APIError, `${what}: ${e}`);
      assert.equal(e.status, status, what);
      assert.equal(e.error?.error?.type, type, `${what}: ${JSON.stringify(e.error)}`);
    }
  }
  ok('errors: 400 invalid_request_error and 404 not_found_error in Anthropic\'s shape');
}

try {
  await main();
} catch (e) {
  console.error(`not ok - ${e.stack ?? e}`);
  process.exit(1);
}
