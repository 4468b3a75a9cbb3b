// Abuse cases against a running `deltafin serve` (a process, so that its RSS
// and its exit can be watched). Usage: node abuse_test.mjs <mode> <base-url> [pid] [...]
//   bigbody:  a 10 MB body of 300,000 one-character messages is refused in under 1 s
//   bigprompt <pid>: a 100 MB prompt is refused; the server's peak RSS grows by under 3x the body
//   prefill <pid> <signal> <count> <prompt-words>: during a ~4K-token prefill, send the
//             signal `count` times, 10 ms apart; the process must exit within 2 s of the
//             first, and within 300 ms of a second (the script checks the exit code). Exit
//             status 2: the first signal had already ended the server (the second untested)
//   error500: a generation that fails is a 500 naming the request id, never a server path
import assert from 'node:assert/strict';
import fs from 'node:fs';

const [mode, baseURL, pidArg, ...rest] = process.argv.slice(2);
const pid = Number(pidArg);
const ok = (what) => console.log(`ok - ${what}`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const post = (path, body) => fetch(new URL(path, baseURL + '/'), { method: 'POST', body,
  headers: { 'Content-Type': 'application/json' } });

function status(field) {  // a field of /proc/PID/status in kB
  const line = fs.readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith(field + ':'));
  return Number(line.split(/\s+/)[1]);
}
function exited() {  // gone, or a zombie waiting for the shell to reap it
  try { return fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1][0] === 'Z'; } catch { return true; }
}
async function metric(name) {
  const text = await (await fetch(new URL('/metrics', new URL(baseURL).origin))).text();
  const line = text.split('\n').find((l) => l.startsWith(name + ' '));
  return line ? Number(line.slice(name.length + 1)) : NaN;
}

async function bigbody() {
  // As Python's json.dumps writes it (with spaces): 34 bytes a message.
  const body = `{"messages": [${Array(300000).fill('{"role": "user", "content": "a"}').join(', ')}], "max_tokens": 4}`;
  assert.ok(body.length >= 10e6, `${body.length} bytes`);
  const t0 = Date.now();
  const r = await post('chat/completions', body);
  const j = await r.json();
  const ms = Date.now() - t0;
  assert.equal(r.status, 400);
  assert.equal(j.error.code, 'context_length_exceeded');
  assert.equal(j.error.param, 'messages');
  assert.ok(ms < 1000, `took ${ms} ms`);
  ok(`10 MB body of 300,000 messages refused in ${ms} ms: ${j.error.message}`);
}

async function bigprompt() {
  const before = status('VmRSS');
  const body = JSON.stringify({ prompt: 'x'.repeat(100 * 1024 * 1024), max_tokens: 1 });
  const t0 = Date.now();
  const r = await post('completions', body);
  const j = await r.json();
  assert.equal(r.status, 400);
  assert.equal(j.error.code, 'context_length_exceeded');
  const grew = status('VmHWM') - before;  // kB
  const ratio = (grew * 1024) / body.length;
  assert.ok(ratio < 3, `peak RSS grew by ${grew} kB, ${ratio.toFixed(2)}x the body`);
  ok(`100 MB prompt refused in ${Date.now() - t0} ms; peak RSS grew by ${(grew / 1024).toFixed(0)} MB ` +
     `(${ratio.toFixed(2)}x the body)`);
}

async function prefill() {
  const [signal, count, words] = [rest[0], Number(rest[1]), Number(rest[2])];
  const prompt = Array.from({ length: words }, (_, i) => `w${i}`).join(' ');
  const reply = post('completions', JSON.stringify({ prompt, max_tokens: 1 }))
    .then(async (r) => ({ status: r.status, body: await r.text() }), (e) => ({ error: String(e) }));
  for (let i = 0; i < 500 && (await metric('deltafin_generation_running')) !== 1; i++) await sleep(5);
  assert.equal(await metric('deltafin_generation_running'), 1);
  await sleep(300);
  const t0 = Date.now();
  process.kill(pid, signal);
  let t1 = t0;
  if (count === 2) {
    await sleep(10);
    if (exited()) {
      console.log('retry - the first signal ended the server within 10 ms: the second was not tested');
      process.exit(2);
    }
    t1 = Date.now();
    process.kill(pid, signal);
  }
  while (!exited() && Date.now() - t0 < 5000) await sleep(2);
  const ms = Date.now() - t0, after_last = Date.now() - t1;
  assert.ok(exited(), 'the server did not exit');
  assert.ok(ms < 2000, `exit took ${ms} ms`);
  if (count === 2) assert.ok(after_last < 300, `exit took ${after_last} ms after the second signal`);
  const got = await reply;
  if (count === 1) {
    assert.equal(got.status, 503, JSON.stringify(got));
    assert.match(got.body, /server_shutting_down/);
  }
  ok(`${count} x ${signal} during a ${words}-word prefill: exited ${ms} ms after the first` +
     (count === 1 ? '; the client got 503' : `, ${after_last} ms after the second`));
}

async function error500() {
  const r = await post('completions', JSON.stringify({ prompt: 'hello', max_tokens: 3 }));
  const j = await r.json();
  assert.equal(r.status, 500);
  const id = r.headers.get('x-request-id');
  assert.ok(j.error.message.includes(id), j.error.message);
  assert.ok(!j.error.message.includes('/'), `a path reached the client: ${j.error.message}`);
  console.log(id);  // the script finds the log line by it
  ok(`a failed generation is a 500 naming ${id} and no server path`);
}

const modes = { bigbody, bigprompt, prefill, error500 };
try {
  await modes[mode]();
} catch (e) {
  console.error(`not ok - ${e.stack ?? e}`);
  process.exit(1);
}
