// The browser viewer's tests (docs/web.md): build-web/ served on 127.0.0.1 and opened in Debian's
// chromium (headless, WebGL 2 through SwiftShader), driven as a class uses it: a link, keys, G,
// the picker, a dropped file, a profiler trace, a file too large. Assertions are on what the
// viewer says it draws (the desktop's JSON line, report.h), compared with the desktop viewer's
// for the same moment, and on the canvas's pixels.
//   node test_web.js CASE        (ctest runs each case: tests/web/CMakeLists.txt)
// Environment: DPSCOPE_WEB_DIR (build-web/), DPSCOPE_BIN_DIR (dpscope, dpscope-view), DPSCOPE_SOURCE_DIR.
'use strict';

const assert = require('assert');
const fs = require('fs');
const http = require('http');
const os = require('os');
const path = require('path');
const { execFileSync, spawn } = require('child_process');
const { chromium } = require('playwright-core');

const webDir = process.env.DPSCOPE_WEB_DIR;
const binDir = process.env.DPSCOPE_BIN_DIR;
const sourceDir = process.env.DPSCOPE_SOURCE_DIR;
const chromiumPath = process.env.DPSCOPE_CHROMIUM || '/usr/bin/chromium';

function fail(message) {
  console.error('web test: ' + message);
  process.exit(1);
}

// ---- Fixtures: a recorded run, the desktop viewer's line for a moment, a server.

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'dpscope-web-'));
// DPSCOPE_WEB_KEEP=1 keeps the scratch folder (the pictures compared, the traces) to look at.
process.on('exit', () => (process.env.DPSCOPE_WEB_KEEP ? console.log('kept ' + scratch) : fs.rmSync(scratch, { recursive: true, force: true })));

// A 2-rank DDP run of 6 iterations, recorded by dpscope itself over an emulated link (so that
// the cluster clock can replay it); `train` adds to the training's flags. Returns run.sqlite.
function recordRun(name, train = []) {
  const dir = path.join(scratch, name);
  execFileSync(path.join(binDir, 'dpscope'), ['launch', '-n', '2', '--trace-dir', dir, '--link-gbps', '4',
    '--link-latency-us', '50', '--', path.join(binDir, 'dpscope'), 'train', '--model', 'mlp', '--steps', '6',
    '--progress-every', '0', ...train],
  { stdio: 'pipe', timeout: 120000 });
  return path.join(dir, 'run.sqlite');
}

// The desktop viewer's JSON line for `trace` with these options (under the suite's Xvfb); its
// picture is left in desktop.png. It opens the file by its name in its folder, so that its
// header names it as the page does.
function desktopReport(trace, args) {
  const png = path.join(scratch, 'desktop.png');
  const out = execFileSync(path.join(binDir, 'dpscope-view'), [path.basename(trace), '--screenshot', png, ...args],
    { encoding: 'utf8', timeout: 120000, cwd: path.dirname(trace) });
  return JSON.parse(out.trim().split('\n').pop());
}

// Serves build-web/ at / and `files` (name -> path) at /traces/NAME, as a static server would.
function serve(files) {
  const types = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.wasm': 'application/wasm' };
  const server = http.createServer((request, response) => {
    const url = new URL(request.url, 'http://127.0.0.1');
    const name = decodeURIComponent(url.pathname);
    const file = name.startsWith('/traces/') ? files[name.slice(8)] : path.join(webDir, name === '/' ? 'index.html' : name);
    if (!file || !fs.existsSync(file)) { response.writeHead(404); response.end(); return; }
    const size = fs.statSync(file).size;
    response.writeHead(200, { 'Content-Type': types[path.extname(file)] || 'application/octet-stream', 'Content-Length': size });
    if (request.method === 'HEAD') { response.end(); return; }
    fs.createReadStream(file).pipe(response);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

async function withPage(files, body, { scale = 1, width = 1280, height = 800 } = {}) {
  const server = await serve(files);
  const base = 'http://127.0.0.1:' + server.address().port + '/';
  const browser = await chromium.launch({
    executablePath: chromiumPath,
    args: ['--use-angle=swiftshader', '--enable-unsafe-swiftshader', '--no-sandbox'],
  });
  try {
    const context = await browser.newContext({ viewport: { width, height }, deviceScaleFactor: scale });
    const page = await context.newPage();
    const errors = [];
    page.on('pageerror', (error) => errors.push(error.message));
    await body(page, base);
    assert.deepStrictEqual(errors, [], 'the page threw');
  } finally {
    await browser.close();
    server.close();
  }
}

// Opens `url` and waits for the viewer to have started, then for `until`: 'ready' (a trace is
// open), 'error' (the status line shows one) or 'started' (nothing to open).
async function openPage(page, url, { until = 'ready' } = {}) {
  await page.goto(url);
  await page.waitForFunction(() => window.dpscope && window.dpscope.started, null, { timeout: 60000 });
  if (until === 'started') return;
  if (until === 'error') {
    await page.waitForFunction(() => document.getElementById('status').classList.contains('error'), null, { timeout: 60000 });
    return;
  }
  await waitReady(page);
}

async function waitReady(page) {
  await page.waitForFunction(() => Module.ccall('dpscope_state', 'string', [], []) !== 'loading' &&
                                   Module.ccall('dpscope_state', 'string', [], []) !== 'empty', null, { timeout: 120000 });
  const state = await page.evaluate(() => Module.ccall('dpscope_state', 'string', [], []));
  assert.strictEqual(state, 'ready', 'the viewer did not open the trace: ' + state);
  await settle(page);
}

// Waits until the page has opened `count` traces since it loaded (a picked or dropped file is read
// before it opens, and the state of the trace before stays 'ready' meanwhile).
async function waitOpened(page, count) {
  await page.waitForFunction((n) => window.dpscope.opens >= n, count, { timeout: 120000 });
  const state = await page.evaluate(() => Module.ccall('dpscope_state', 'string', [], []));
  assert.strictEqual(state, 'ready', 'the viewer did not open the file: ' + state);
  await settle(page);
}

// Presses `key` in the canvas (with `modifier` held, if given) as a hand presses it: held for a
// few frames, since Dear ImGui 1.86 reads a key's state once a frame and a press and release
// between two frames would go unseen; then lets the page settle.
async function press(page, key, modifier = '') {
  await page.focus('#canvas');
  if (modifier) await page.keyboard.down(modifier);
  await page.keyboard.down(key);
  await settle(page);
  await page.keyboard.up(key);
  if (modifier) await page.keyboard.up(modifier);
  await settle(page);
}

// Lets the page draw the frames a layout takes to settle (window.h's kFramesForAFinishedLayout).
async function settle(page) {
  await page.evaluate(() => new Promise((resolve) => {
    let frames = 0;
    const next = () => (++frames >= 8 ? resolve() : requestAnimationFrame(next));
    requestAnimationFrame(next);
  }));
}

// The page's <pre id="dpscope-report">, refreshed now: the desktop's JSON line for what is drawn.
async function report(page) {
  await page.evaluate(() => window.dpscope.refreshReport());
  return JSON.parse(await page.textContent('#dpscope-report'));
}

// Installs window.decodedPng(base64) in the page: a PNG's {width, height, data} (RGBA bytes),
// decoded by the browser.
async function installPngDecoder(page) {
  await page.evaluate(() => {
    window.decodedPng = async (base64) => {
      const image = new Image();
      image.src = 'data:image/png;base64,' + base64;
      await image.decode();
      const canvas = document.createElement('canvas');
      canvas.width = image.width;
      canvas.height = image.height;
      const context = canvas.getContext('2d');
      context.drawImage(image, 0, 0);
      return { width: image.width, height: image.height, data: context.getImageData(0, 0, image.width, image.height).data };
    };
  });
}

// The canvas's pixels: how many distinct colours, and the colour of its top-left corner.
async function canvasPixels(page) {
  const png = await page.locator('#canvas').screenshot();
  fs.writeFileSync(path.join(scratch, 'canvas.png'), png);
  await installPngDecoder(page);
  return page.evaluate(async (data) => {
    const { width, data: pixels } = await window.decodedPng(data);
    const colours = new Set();
    for (let i = 0; i < pixels.length; i += 4 * 7) colours.add((pixels[i] << 16) | (pixels[i + 1] << 8) | pixels[i + 2]);
    return { colours: colours.size, corner: [pixels[0], pixels[1], pixels[2]], width };
  }, png.toString('base64'));
}

// How far the page's canvas is from the desktop's PNG of the same view: the share of pixels
// whose colour differs by more than `tolerance` in some channel. Both draw Dear ImGui's same
// triangles and font atlas; the desktop through Mesa's llvmpipe, the page through SwiftShader,
// whose anti-aliased edges and blending may round differently.
async function differenceFromDesktop(page, desktopPng, tolerance) {
  const web = await page.locator('#canvas').screenshot();
  fs.writeFileSync(path.join(scratch, 'web.png'), web);
  await installPngDecoder(page);
  return page.evaluate(async ([a, b, tolerance]) => {
    const [x, y] = [await window.decodedPng(a), await window.decodedPng(b)];
    if (x.width !== y.width || x.height !== y.height) return { size: [x.width, x.height, y.width, y.height], share: 1 };
    let differing = 0;
    for (let i = 0; i < x.data.length; i += 4) {
      if (Math.abs(x.data[i] - y.data[i]) > tolerance || Math.abs(x.data[i + 1] - y.data[i + 1]) > tolerance ||
          Math.abs(x.data[i + 2] - y.data[i + 2]) > tolerance) ++differing;
    }
    return { share: differing / (x.width * x.height) };
  }, [web.toString('base64'), fs.readFileSync(desktopPng).toString('base64'), tolerance]);
}

// ---- The cases.

const cases = {
  // A link opens at its step, says what the desktop viewer says there, and draws what it draws.
  async ALinkOpensAtItsStepAsTheDesktopDoes() {
    const trace = recordRun('run');
    const desktop = desktopReport(trace, ['--iteration', '3', '--step', '2', '--size', '1280x766']);
    await withPage({ 'run.sqlite': trace }, async (page, base) => {
      await openPage(page, base + 'index.html?trace=traces/run.sqlite&iter=3&step=2');
      const web = await report(page);
      assert.ok(desktop.narration.includes('iteration 3'), desktop.narration);
      assert.strictEqual(web.narration, desktop.narration);
      assert.strictEqual(web.view[0].iteration, 3);
      assert.strictEqual(web.deep_link, 'iter=3&step=2');
      assert.strictEqual(web.clock, 'measured');
      const pixels = await canvasPixels(page);
      assert.ok(pixels.colours > 40, 'the canvas holds ' + pixels.colours + ' colours: lanes and text are not drawn');
      assert.match(await page.textContent('#status'), /run\.sqlite/);
      const difference = await differenceFromDesktop(page, path.join(scratch, 'desktop.png'), 24);
      console.log('web test: the page differs from the desktop in ' + (100 * difference.share).toFixed(3) + ' % of its pixels');
      assert.ok(difference.share < 0.001, 'the page and the desktop differ in ' + JSON.stringify(difference) +
                ' of their pixels (web.png, desktop.png in ' + scratch + ')');
    });
  },

  // → steps as on the desktop; G writes the link to the new step, and that link opens there.
  async KeysStepAndGCopiesTheLinkThatOpensThere() {
    const trace = recordRun('run');
    const desktop = desktopReport(trace, ['--iteration', '3', '--step', '3']);
    await withPage({ 'run.sqlite': trace }, async (page, base) => {
      await openPage(page, base + 'index.html?trace=traces/run.sqlite&iter=3&step=2');
      await press(page, 'ArrowRight');
      let web = await report(page);
      assert.strictEqual(web.narration, desktop.narration);
      assert.strictEqual(web.deep_link, 'iter=3&step=3');
      await press(page, 'g');
      await page.waitForFunction(() => window.dpscope.link !== '', null, { timeout: 10000 });
      const link = await page.evaluate(() => window.dpscope.link);
      assert.strictEqual(link, base + 'index.html?trace=traces%2Frun.sqlite&iter=3&step=3');
      assert.match(await page.textContent('#status'), /iter=3&step=3/);
      await openPage(page, link);
      web = await report(page);
      assert.strictEqual(web.narration, desktop.narration);
      // The Copy link button writes the same.
      await page.evaluate(() => { window.dpscope.link = ''; });
      await page.click('#copy-link');
      assert.strictEqual(await page.evaluate(() => window.dpscope.link), link);
      // C: the cluster clock, built in the frame that asks; T: the projector's theme; both in the link.
      for (const key of ['c', 't']) await press(page, key);
      web = await report(page);
      assert.strictEqual(web.clock, 'cluster');
      assert.match(web.deep_link, /clock=cluster&theme=projector$/);
      // Ctrl +: a presenter's larger text, the page not zoomed.
      await press(page, 'Equal', 'Control');
      web = await report(page);
      assert.match(web.deep_link, /&scale=1.25&theme=projector$/);
      assert.strictEqual(await page.evaluate(() => window.devicePixelRatio), 1, 'the page itself was zoomed');
    });
  },

  // clock, scale and theme from the link: the cluster clock, x2 text, the projector's light ground.
  async TheLinksClockScaleAndThemeAreShown() {
    const trace = recordRun('run');
    const desktop = desktopReport(trace, ['--iteration', '3', '--step', '1', '--clock', 'cluster', '--font-scale', '2',
      '--theme', 'projector', '--size', '1280x766']);
    await withPage({ 'run.sqlite': trace }, async (page, base) => {
      await openPage(page, base + 'index.html?trace=traces/run.sqlite&iter=3&step=1&clock=cluster&scale=2&theme=projector');
      const web = await report(page);
      assert.strictEqual(web.clock, 'cluster');
      assert.strictEqual(web.narration, desktop.narration);
      assert.strictEqual(web.deep_link, 'iter=3&step=1&clock=cluster&scale=2&theme=projector');
      // The lanes' text size, chosen for the panel's height: the desktop's window of the canvas's
      // size (the page's 800 pixels less its 34-pixel bar) chooses the same.
      assert.strictEqual(web.layout.timeline_font_scale, desktop.layout.timeline_font_scale);
      const pixels = await canvasPixels(page);
      assert.ok(pixels.corner.every((c) => c > 200), 'the projector theme draws on a light ground, not ' + pixels.corner);
    });
  },

  // On a HiDPI screen the canvas has the device's pixels, and the text their size.
  async AHiDpiScreenGetsItsPixels() {
    const trace = recordRun('run');
    await withPage({ 'run.sqlite': trace }, async (page, base) => {
      await openPage(page, base + 'index.html?trace=traces/run.sqlite&iter=3&step=0');
      const size = await page.evaluate(() => {
        const canvas = document.getElementById('canvas');
        return { width: canvas.width, css: canvas.clientWidth };
      });
      assert.strictEqual(size.width, 2 * size.css);
      const web = await report(page);
      assert.strictEqual(web.deep_link, 'iter=3&step=0', 'x1 on a x2 screen is no presenter size');
      assert.ok(web.layout.timeline_font_scale > 1, 'text at the device pixel ratio: ' + web.layout.timeline_font_scale);
    }, { scale: 2, width: 1000, height: 700 });
  },

  // Two URLs: the second run drawn under the first.
  async CompareOpensTwoRuns() {
    const trace = recordRun('run');
    const other = recordRun('other', ['--bucket-cap-mb', '0.01']);
    await withPage({ 'a.sqlite': trace, 'b.sqlite': other }, async (page, base) => {
      await openPage(page, base + 'index.html?trace=traces/a.sqlite&compare=traces/b.sqlite&iter=2&step=0');
      const web = await report(page);
      assert.match(web.narration, /iteration 2/, 'the status says: ' + (await page.textContent('#status')) + '; the page: ' +
                   JSON.stringify(web).slice(0, 1500));
      assert.strictEqual(web.run_ms.length, 2);
      assert.strictEqual(web.view.length, 2);
      assert.strictEqual(web.view[1].iteration, 2, 'run B aligned on the narrated iteration');
      // Tab: run B takes the keys and the narration (its playhead at the same point of the
      // iteration, which may lie between two of its steps); → then steps through B, and the link
      // says B's step, whose narration is the desktop's for run B at that step.
      for (const key of ['Tab', 'ArrowRight']) await press(page, key);
      const b = await report(page);
      const [, iteration, step] = b.deep_link.match(/^iter=(\d+)&step=(\d+)$/);
      const desktop = desktopReport(trace, ['--compare', other, '--iteration', iteration, '--step', step, '--run', 'B']);
      assert.strictEqual(b.narration, desktop.narration);
    });
  },

  // The file picker and a file dropped on the page.
  async ThePickerAndADroppedFileOpen() {
    const trace = recordRun('run');
    await withPage({ 'run.sqlite': trace }, async (page, base) => {
      await openPage(page, base + 'index.html', { until: 'started' });
      await page.setInputFiles('#picker', trace);
      await waitOpened(page, 1);
      let web = await report(page);
      assert.match(web.narration, /iteration/);
      assert.match(await page.textContent('#status'), /run\.sqlite/);
      // A drop: the file as the browser hands it over, in a DataTransfer.
      await page.evaluate(async () => {
        const bytes = await (await fetch('traces/run.sqlite')).arrayBuffer();
        const transfer = new DataTransfer();
        transfer.items.add(new File([bytes], 'dropped.sqlite'));
        document.dispatchEvent(new DragEvent('drop', { dataTransfer: transfer, bubbles: true, cancelable: true }));
      });
      await waitOpened(page, 2);
      assert.match(await page.textContent('#status'), /dropped\.sqlite/);
      web = await report(page);
      assert.match(web.narration, /iteration/);
      // A gzipped trace, as the gallery keeps them, picked: unpacked by the page as it is read.
      const gzipped = path.join(scratch, 'picked.sqlite.gz');
      fs.writeFileSync(gzipped, require('zlib').gzipSync(fs.readFileSync(trace)));
      await page.setInputFiles('#picker', gzipped);
      await waitOpened(page, 3);
      assert.match(await page.textContent('#status'), /picked\.sqlite/);
      web = await report(page);
      assert.match(web.narration, /iteration/);
    });
  },

  // PyTorch profiler traces (.json.gz, one per rank) open as one run, as the desktop viewer opens them.
  async AProfilerTraceOpens() {
    const kineto = (rank) => path.join(sourceDir, 'tests/data/kineto/sampled_rank-' + rank + '.json.gz');
    const desktop = desktopReport(kineto(0), ['--iteration', '1', '--step', '0']);
    await withPage({ 'rank-0.json.gz': kineto(0), 'rank-1.json.gz': kineto(1) }, async (page, base) => {
      await openPage(page, base + 'index.html?trace=traces/rank-0.json.gz&iter=1&step=0');
      let web = await report(page);
      assert.strictEqual(web.narration, desktop.narration);
      assert.deepStrictEqual(web.run_ms, desktop.run_ms);
      await openPage(page, base + 'index.html?trace=traces/rank-0.json.gz&trace=traces/rank-1.json.gz');
      web = await report(page);
      assert.strictEqual(web.overlap.length, 2, 'both ranks imported');
      assert.ok(web.run_ms[0] > 0, 'the imported run has a length');
      const pixels = await canvasPixels(page);
      assert.ok(pixels.colours > 20, 'the imported run is drawn');
    });
  },

  // Bad input gets one clear line on the page, never a blank page.
  async BadInputIsRefusedInOneLine() {
    const trace = recordRun('run');
    const large = path.join(scratch, 'large.sqlite');
    fs.closeSync(fs.openSync(large, 'w'));
    fs.truncateSync(large, 1100 * 1048576);
    const garbage = path.join(scratch, 'garbage.sqlite');
    fs.writeFileSync(garbage, 'this is not a trace\n'.repeat(100));
    const notGzip = path.join(scratch, 'not-gzip.sqlite.gz');
    fs.writeFileSync(notGzip, 'plain text, not gzip\n');
    const truncated = path.join(scratch, 'truncated.sqlite');
    const bytes = fs.readFileSync(trace);
    fs.writeFileSync(truncated, bytes.subarray(0, Math.floor(bytes.length / 2)));
    await withPage({ 'run.sqlite': trace, 'large.sqlite': large, 'garbage.sqlite': garbage, 'truncated.sqlite': truncated,
      'not-gzip.sqlite.gz': notGzip }, async (page, base) => {
      await openPage(page, base + 'index.html?trace=traces/large.sqlite', { until: 'error' });
      assert.strictEqual(await page.textContent('#status'),
        'large.sqlite is 1100 MiB; the browser viewer opens traces up to 1024 MiB (its memory holds the file and its model): open it with the desktop dpscope-view');
      await openPage(page, base + 'index.html?trace=traces/garbage.sqlite', { until: 'error' });
      assert.match(await page.textContent('#status'), /garbage\.sqlite/);
      await openPage(page, base + 'index.html?trace=traces/truncated.sqlite', { until: 'error' });
      assert.match(await page.textContent('#status'), /truncated\.sqlite/);
      await openPage(page, base + 'index.html?trace=traces/not-gzip.sqlite.gz', { until: 'error' });
      assert.match(await page.textContent('#status'), /not-gzip\.sqlite\.gz cannot be read: .*a \.gz file must be gzip-compressed/);
      await openPage(page, base + 'index.html?trace=traces/missing.sqlite', { until: 'error' });
      assert.match(await page.textContent('#status'), /cannot fetch .*missing\.sqlite: the server answered 404/);
      await openPage(page, base + 'index.html?trace=traces/run.sqlite&iter=three', { until: 'error' });
      assert.match(await page.textContent('#status'), /the link's iter=three is not a whole number/);
      await openPage(page, base + 'index.html?trace=traces/run.sqlite&live=1', { until: 'error' });
      assert.match(await page.textContent('#status'), /desktop dpscope-view/);
      await openPage(page, base + 'index.html?trace=traces/run.sqlite&iter=99&step=0');
      assert.match(await page.textContent('#status'), /rank 0 has no iteration 99/);
    });
  },

  // scripts/web gallery: a card per lesson, each opening the viewer at its moment with its line.
  async AGalleryOpensEachLessonAtItsMoment() {
    const site = path.join(scratch, 'gallery');
    execFileSync(path.join(sourceDir, 'scripts/web'), ['gallery', site, '21,03'], { stdio: 'pipe', timeout: 240000 });
    const index = fs.readFileSync(path.join(site, 'index.html'), 'utf8');
    const links = [...index.matchAll(/<a class="card" id="(\d+)" href="([^"]+)">/g)].map((m) => [m[1], m[2].replace(/&amp;/g, '&')]);
    assert.deepStrictEqual(links.map((l) => l[0]), ['03', '21'], 'the lessons in their order');
    for (const id of ['03', '21']) assert.ok(fs.statSync(path.join(site, 'previews/' + id + '.png')).size > 10000, 'a preview per lesson');
    const server = await new Promise((resolve) => {
      const s = http.createServer((request, response) => {
        const file = path.join(site, decodeURIComponent(new URL(request.url, 'http://x').pathname));
        if (!fs.existsSync(file) || fs.statSync(file).isDirectory()) { response.writeHead(404); response.end(); return; }
        const type = { '.wasm': 'application/wasm', '.js': 'text/javascript', '.html': 'text/html' }[path.extname(file)];
        response.writeHead(200, type ? { 'Content-Type': type } : {});
        fs.createReadStream(file).pipe(response);
      });
      s.listen(0, '127.0.0.1', () => resolve(s));
    });
    const browser = await chromium.launch({ executablePath: chromiumPath, args: ['--use-angle=swiftshader', '--enable-unsafe-swiftshader', '--no-sandbox'] });
    try {
      const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
      const base = 'http://127.0.0.1:' + server.address().port + '/';
      for (const [id, href] of links) {
        await openPage(page, base + href);
        const web = await report(page);
        const params = new URL(base + href).searchParams;
        assert.strictEqual(web.clock, params.get('clock') || 'measured', id);
        if (params.get('iter')) assert.strictEqual(web.view[0].iteration, Number(params.get('iter')), id);
        assert.match(web.narration, /iteration/, id);
        assert.strictEqual(await page.textContent('#status'), params.get('lesson'), id);
        assert.match(params.get('lesson'), new RegExp('^Tutorial ' + id + ': '));
      }
    } finally {
      await browser.close();
      server.close();
    }
  },

  // scripts/web serve gives the page and its WebAssembly with their types, on 127.0.0.1 only.
  async ServeGivesWasmItsType() {
    const port = 20000 + (process.pid % 20000);
    const server = spawn(path.join(sourceDir, 'scripts/web'), ['serve', String(port)], { stdio: 'pipe' });
    try {
      await new Promise((resolve, reject) => {
        server.stdout.on('data', (data) => (String(data).includes('serving') ? resolve() : null));
        server.on('exit', (code) => reject(new Error('scripts/web serve exited with ' + code)));
      });
      const get = (name) => new Promise((resolve, reject) => {
        http.get('http://127.0.0.1:' + port + '/' + name, (response) => { response.resume(); resolve(response); }).on('error', reject);
      });
      assert.strictEqual((await get('dpscope-view.wasm')).headers['content-type'], 'application/wasm');
      assert.strictEqual((await get('index.html')).headers['content-type'], 'text/html');
      assert.match((await get('dpscope-view.js')).headers['content-type'], /javascript/);
    } finally {
      server.kill();
    }
  },
};

const name = process.argv[2];
if (!cases[name]) fail('no case ' + name + '; the cases: ' + Object.keys(cases).join(', '));
for (const [what, value] of [['DPSCOPE_WEB_DIR', webDir], ['DPSCOPE_BIN_DIR', binDir], ['DPSCOPE_SOURCE_DIR', sourceDir]]) {
  if (!value) fail(what + ' is not set (ctest sets it: tests/web/CMakeLists.txt)');
}
if (!fs.existsSync(path.join(webDir, 'dpscope-view.wasm'))) fail(webDir + ' has no dpscope-view.wasm: run scripts/web');
cases[name]().then(() => console.log('web test ' + name + ': passed'), (error) => fail(name + ': ' + (error.stack || error)));
