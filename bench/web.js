// The browser viewer's speed (bench/web.sh): headless chromium (SwiftShader's WebGL 2) opens a
// trace from a URL, RUNS times; prints one JSON line per run: the open (from the page's start to
// the first frame with the trace, download and load included), and the frame times over a
// 60-frame zoom (W held), at 1280x800.
//   node bench/web.js WEB_DIR TRACE RUNS
'use strict';

const fs = require('fs');
const http = require('http');
const path = require('path');
const { chromium } = require(path.join(__dirname, '../tests/web/node_modules/playwright-core'));

const [webDir, trace, runs] = process.argv.slice(2);
if (!webDir || !trace) {
  console.error('usage: node bench/web.js WEB_DIR TRACE [RUNS]');
  process.exit(2);
}

const server = http.createServer((request, response) => {
  const name = decodeURIComponent(new URL(request.url, 'http://x').pathname);
  const file = name === '/trace.sqlite' ? trace : path.join(webDir, name);
  if (!fs.existsSync(file)) { response.writeHead(404); response.end(); return; }
  const type = { '.wasm': 'application/wasm', '.js': 'text/javascript', '.html': 'text/html' }[path.extname(file)];
  response.writeHead(200, { 'Content-Length': fs.statSync(file).size, ...(type ? { 'Content-Type': type } : {}) });
  fs.createReadStream(file).pipe(response);
});

(async () => {
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = 'http://127.0.0.1:' + server.address().port + '/index.html?trace=trace.sqlite';
  const browser = await chromium.launch({
    executablePath: process.env.DPSCOPE_CHROMIUM || '/usr/bin/chromium',
    args: ['--use-angle=swiftshader', '--enable-unsafe-swiftshader', '--no-sandbox'],
  });
  for (let run = 0; run < Number(runs || 5); ++run) {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    await page.goto(url);
    await page.waitForFunction(() => window.dpscope && window.dpscope.started &&
      Module.ccall('dpscope_state', 'string', [], []) === 'ready', null, { timeout: 600000, polling: 5 });
    const openMs = await page.evaluate(() => performance.now());
    await page.focus('#canvas');
    await page.keyboard.down('w');
    await page.evaluate(() => new Promise((resolve) => {
      let frames = 0;
      const next = () => (++frames >= 60 ? resolve() : requestAnimationFrame(next));
      requestAnimationFrame(next);
    }));
    await page.keyboard.up('w');
    const report = JSON.parse(await page.evaluate(() => window.dpscope.refreshReport()));
    const memory = await page.evaluate(() => Module.HEAP8.length);
    console.log(JSON.stringify({ open_ms: Math.round(openMs), load_ms: report.open_ms, frames: report.frames,
      frame_ms_median: report.frame_ms_median, frame_ms_max: report.frame_ms_max,
      wasm_memory_mb: Math.round(memory / 1048576) }));
    await page.close();
  }
  await browser.close();
  server.close();
})().catch((error) => { console.error(error); process.exit(1); });
