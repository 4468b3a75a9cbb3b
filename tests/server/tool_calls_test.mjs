// Tool calls made by a model, end to end through HTTP: `deltafin serve` on
// models/demo (tuned on tool conversations, docs/design/demo-model.md "Tool calls"),
// driven by the official openai and @anthropic-ai/sdk clients. For requests
// worded unlike the training examples, each with tools to choose from, with
// thinking on and off:
//   - the model's own output comes back as one `tool_calls` entry with
//     finish_reason "tool_calls": a declared tool's name and JSON-object
//     arguments;
//   - streamed, the tool_call deltas add up to the same call;
//   - the call and a tool result sent back give an answer that ends the
//     message (finish_reason "stop");
//   - /v1/messages gives the same call as a tool_use block (stop_reason
//     "tool_use"), and the tool_result turn an end_turn answer.
// The demo is a 9.5 M-parameter model: its calls are well formed, but the
// tool it picks and the argument it writes are often wrong, so the test checks
// the form, not the choice. Greedy decoding: every output is a pure function
// of the weights.
// Usage: node tool_calls_test.mjs <base-url without /v1> <model-name>
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { calc, docs, weather } from './demo_tools.mjs';

const [base, model] = process.argv.slice(2);
const openai = new OpenAI({ apiKey: 'unused', baseURL: `${base}/v1`, maxRetries: 0, timeout: 60000 });
const anthropic = new Anthropic({ apiKey: 'unused', baseURL: base, maxRetries: 0 });
const ok = (what) => console.log(`ok - ${what}`);


// [question, declared tools, the tool's result to send back]
const cases = [
  ['What is the weather in Paris?', [calc, weather], '21 C, sunny'],
  ['Evaluate `12 * 7`.', [weather, calc, docs], '84'],
  ['Look up `urlsplit` in the docs.', [docs, weather], 'Parse a URL into 5 components.'],
];

// One call of a declared tool, with arguments that are a JSON object of strings.
function checkCall(name, argsText, tools, what) {
  assert.ok(tools.some((t) => t.function.name === name), `${what}: ${name} is not a declared tool`);
  const args = JSON.parse(argsText);
  assert.equal(typeof args, 'object', what);
  assert.ok(args !== null && !Array.isArray(args), what);
  for (const v of Object.values(args)) assert.equal(typeof v, 'string', what);
  return args;
}

async function main() {
  for (const thinking of [true, false]) {
    const extra = { chat_template_kwargs: { thinking } };
    for (const [question, tools, result] of cases) {
      const messages = [{ role: 'user', content: question }];
      const what = `${JSON.stringify(question)} (thinking ${thinking})`;
      const r = await openai.chat.completions.create({ model, messages, tools, max_tokens: 120, ...extra });
      const choice = r.choices[0];
      assert.equal(choice.finish_reason, 'tool_calls', `${what}: ${JSON.stringify(choice)}`);
      const calls = choice.message.tool_calls;
      assert.equal(calls.length, 1, what);
      assert.equal(calls[0].type, 'function');
      const name = calls[0].function.name;
      const args = checkCall(name, calls[0].function.arguments, tools, what);
      assert.ok(calls[0].id, 'a call has an id');
      ok(`${what}: calls ${name}(${calls[0].function.arguments})`);

      // Streamed: the deltas of the one call add up to the same name and arguments.
      const stream = await openai.chat.completions.create({ model, messages, tools, max_tokens: 120, stream: true,
        ...extra });
      let sName = '', sArgs = '', sId = null, finish = null;
      for await (const c of stream) {
        for (const d of c.choices[0]?.delta?.tool_calls ?? []) {
          assert.equal(d.index, 0);
          sId = d.id ?? sId;
          sName += d.function?.name ?? '';
          sArgs += d.function?.arguments ?? '';
        }
        finish = c.choices[0]?.finish_reason ?? finish;
      }
      assert.equal(finish, 'tool_calls', what);
      assert.equal(sName, name, what);
      assert.deepEqual(JSON.parse(sArgs), args, what);
      assert.ok(sId, 'a streamed call has an id');
      ok(`${what}: streamed, the same call`);

      // The call and the tool's result go back; the model answers and ends the message.
      const turn = [...messages, choice.message, { role: 'tool', tool_call_id: calls[0].id, content: result }];
      const a = await openai.chat.completions.create({ model, messages: turn, tools, max_tokens: 120, ...extra });
      assert.equal(a.choices[0].finish_reason, 'stop', `${what}: ${JSON.stringify(a.choices[0])}`);
      const answer = a.choices[0].message.content;
      assert.ok(answer.length > 0, what);
      assert.ok(!a.choices[0].message.tool_calls, what);
      ok(`${what}: after the result, answers ${JSON.stringify(answer)}`);
    }
  }

  // Anthropic Messages: the same call as a tool_use block, and a tool_result turn answered.
  const [question, tools, result] = cases[0];
  const aTools = tools.map((t) => ({ name: t.function.name, description: t.function.description,
    input_schema: t.function.parameters }));
  const messages = [{ role: 'user', content: question }];
  const m = await anthropic.messages.create({ model, max_tokens: 120, messages, tools: aTools });
  assert.equal(m.stop_reason, 'tool_use', JSON.stringify(m));
  const use = m.content.find((b) => b.type === 'tool_use');
  assert.ok(use, JSON.stringify(m.content));
  checkCall(use.name, JSON.stringify(use.input), tools, '/v1/messages');
  assert.ok(use.id);
  const after = await anthropic.messages.create({ model, max_tokens: 120, tools: aTools, messages: [...messages,
    { role: 'assistant', content: m.content },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: result }] }] });
  assert.equal(after.stop_reason, 'end_turn', JSON.stringify(after));
  const text = after.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
  assert.ok(text.length > 0);
  ok(`/v1/messages: tool_use ${use.name}(${JSON.stringify(use.input)}), then ${JSON.stringify(text)}`);
}

main().catch((e) => { console.error(`not ok - ${e.stack || e}`); process.exit(1); });
