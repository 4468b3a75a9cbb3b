// Not a test: prints what the demo model does with 11 tool requests, thinking
// on and off (docs/design/demo-model.md, "Tool calls"): the call or text it returns,
// and its answer after a tool result.
// Usage: node tests/server/tool_probe.mjs http://127.0.0.1:PORT   (a running `deltafin serve --model models/demo`)
import OpenAI from 'openai';
import { calc, docs, files, weather } from './demo_tools.mjs';
const [base] = process.argv.slice(2);
const openai = new OpenAI({ apiKey: 'x', baseURL: `${base}/v1`, maxRetries: 0 });
const qs = [['What is the weather in Paris?', [calc, weather]], ['What is the weather in Lima?', [weather]],
 ['Is it raining in Oslo?', [weather, docs]], ['How warm is it in Tokyo now?', [weather]],
 ['Evaluate `12 * 7`.', [weather, calc, docs]], ['Compute `3 + 4`.', [calc]], ['What is `45 - 9`? Run it.', [calc, files]],
 ['Look up `urlsplit` in the docs.', [docs, weather]], ['What do the docs say about `make_archive`?', [docs]],
 ['How many lines does `json/decoder.py` have?', [files, calc]], ['How long is `os.py`?', [files]]];
for (const thinking of [true, false]) for (const [q, tools] of qs) {
  const r = await openai.chat.completions.create({ model: 'deltafin', messages: [{ role: 'user', content: q }], tools, max_tokens: 120, chat_template_kwargs: { thinking } });
  const c = r.choices[0];
  const call = c.message.tool_calls?.[0];
  let after = '';
  if (call) {
    const a = await openai.chat.completions.create({ model: 'deltafin', tools, max_tokens: 120, chat_template_kwargs: { thinking },
      messages: [{ role: 'user', content: q }, c.message, { role: 'tool', tool_call_id: call.id, content: '21 C, sunny' }] });
    after = `${a.choices[0].finish_reason} ${JSON.stringify(a.choices[0].message.content)}`;
  }
  console.log(thinking, q, '->', c.finish_reason, call ? `${call.function.name}(${call.function.arguments})` : JSON.stringify(c.message.content), '|', after);
}
