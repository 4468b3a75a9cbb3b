// The web chat at GET / in headless Chromium (Debian's `chromium`, driven by
// puppeteer-core) on models/demo: type a message, watch a long sampled answer
// stream into the folded thinking block, press Stop and check the stream
// really ended (and the server cancelled the generation); then, in a new
// chat, a greedy question: the think folded, the answer, and its tok/s and
// expert MB/s line.
// A screenshot of the page is written to SCREENSHOT.
// Usage: node web_chat_test.mjs BASE_URL SCREENSHOT
import assert from 'node:assert/strict';
import puppeteer from 'puppeteer-core';

const [base, screenshot] = process.argv.slice(2);
const ok = (what) => console.log(`ok - ${what}`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function metric(name) {
  const text = await (await fetch(`${base}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(name + ' '));
  return line ? Number(line.split(' ')[1]) : NaN;
}

const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  // --no-sandbox: CI runs as root, where Chromium's sandbox cannot start.
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--window-size=1100,800'],
});
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1100, height: 800 });
  const problems = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()}`); });

  const res = await page.goto(`${base}/`, { waitUntil: 'load' });
  assert.equal(res.status(), 200);
  assert.match(res.headers()['content-type'], /^text\/html/);
  assert.equal(await page.title(), 'Deltafin chat');
  await page.waitForFunction(() => document.getElementById('model').textContent === 'deltafin');
  ok('the page loads from the binary and finds the model');

  // A long answer: sampled at temperature 2 with seed 1, the demo model writes
  // past 3,000 tokens (checked with `deltafin run --chat --temperature 2 --seed 1`),
  // so Stop always comes first. Its text streams into the folded thinking block.
  const cancelled0 = await metric('deltafin_generations_cancelled_total');
  const set = (id, v) => page.$eval(id, (e, v) => { e.value = v; }, v);
  await set('#max-tokens', '3000');
  await set('#temperature', '2');
  await set('#seed', '1');
  await page.type('#input', 'Write a Python function that adds two numbers.');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => !document.getElementById('stop').hidden);
  const shown = () => page.$eval('.msg.assistant:last-of-type', (e) => e.querySelector('.thinking .text').textContent.length +
                                                                      e.querySelector('.content').textContent.length);
  await page.waitForFunction(() => document.querySelector('.msg.assistant:last-of-type .thinking .text').textContent.length > 0);
  const first = await shown();
  await page.waitForFunction(
    (n) => { const e = document.querySelector('.msg.assistant:last-of-type');
             return e.querySelector('.thinking .text').textContent.length + e.querySelector('.content').textContent.length > n; },
    {}, first);
  const folded = await page.$eval('.msg.assistant:last-of-type .thinking', (e) => !e.hidden && !e.open);
  assert.ok(folded, 'the thinking block is shown, folded');
  assert.equal(await page.$eval('#stop', (e) => e.hidden), false, 'still streaming');
  ok(`text streams in while the answer runs (${first} characters, then more)`);

  await page.click('#stop');
  await page.waitForFunction(() => document.getElementById('stop').hidden && !document.getElementById('send').hidden);
  const atStop = await shown();
  await sleep(400);
  assert.equal(await shown(), atStop, 'nothing arrives after Stop');
  const stats = await page.$eval('.msg.assistant:last-of-type .stats', (e) => e.textContent);
  assert.match(stats, /stopped after \d+ pieces/);
  // The server noticed the closed stream and stopped generating (well before 3,000 tokens).
  for (let i = 0; i < 100 && (await metric('deltafin_generations_cancelled_total')) === cancelled0; ++i) await sleep(50);
  assert.equal(await metric('deltafin_generations_cancelled_total'), cancelled0 + 1);
  ok(`Stop ends the stream (${atStop} characters kept) and cancels the generation`);

  // A new chat, greedy: the demo model thinks (folded), answers and ends the message itself.
  await page.click('#clear');
  await set('#max-tokens', '300');
  await set('#temperature', '0');
  await set('#seed', '');
  await page.type('#input', 'What does `os.path.join` do?');
  await page.click('#send');
  await page.waitForFunction(() => document.querySelectorAll('.msg.assistant').length === 1 &&
                                   document.getElementById('stop').hidden, { timeout: 60000 });
  const answer = await page.$eval('.msg.assistant .content', (e) => e.textContent);
  const thought = await page.$eval('.msg.assistant .thinking', (e) => (!e.hidden && !e.open ? e.textContent : ''));
  assert.ok(answer.length > 0, 'the answer has text');
  assert.ok(thought.length > 'Thinking'.length, 'the think is shown, folded');
  const line = await page.$eval('.msg.assistant .stats', (e) => e.textContent);
  assert.match(line, /^\d+ tokens · \d+\.\d tok\/s · \d+\.\d expert MB\/s · prefill \d+ tokens in \d+ ms/);
  assert.doesNotMatch(line, /max tokens/, 'the model ended the message itself');
  assert.equal(await page.$$eval('.msg.error', (es) => es.length), 0);
  ok(`a greedy answer: ${JSON.stringify(answer.slice(0, 60))} | ${line}`);

  // Open the think for the screenshot.
  await page.$eval('.msg.assistant .thinking', (e) => { e.open = true; });
  await page.screenshot({ path: screenshot, fullPage: true });
  ok(`screenshot saved: ${screenshot}`);
  assert.deepEqual(problems, []);
  ok('no page errors');
} finally {
  await browser.close();
}
