// The page around dpscope-view's canvas (docs/web.md): opens a trace from the file picker, a
// dropped file or the URL's ?trace=URL[&compare=URL], refuses one too large for the browser's
// memory in one line, and copies the link to the moment shown (Copy link, G).
'use strict';

const statusLine = document.getElementById('status');
const copyButton = document.getElementById('copy-link');
// What the page opened, for the links it writes: the traces' URLs (none for a local file).
// `lesson`: the line a gallery gives the moment (scripts/web gallery), shown once it is open.
const opened = { trace: [], compare: '', local: false, lesson: '' };
// For scripted tests: whether the viewer runs, how many traces it has opened, the last link
// copied, the last notice, the F9 report.
window.dpscope = { started: false, opens: 0, link: '', notice: '', report: '' };

function say(text, isError) {
  statusLine.textContent = text;
  statusLine.title = text;
  statusLine.classList.toggle('error', Boolean(isError));
}

function mib(bytes) { return (bytes / 1048576).toFixed(bytes < 10485760 ? 1 : 0) + ' MiB'; }

// The parameters of the page's URL that are the link's moment (everything but the traces).
function linkQuery(params) {
  const moment = new URLSearchParams(params);
  moment.delete('trace');
  moment.delete('compare');
  moment.delete('live');
  moment.delete('lesson');
  return moment.toString();
}

var Module = {
  canvas: document.getElementById('canvas'),
  print: (text) => console.log(text),
  printErr: (text) => console.warn(text),
  dpscopeStarted: () => {
    window.dpscope.started = true;
    say('Open a trace: the button, a file dropped on the page, or ?trace=URL in the address.');
    openFromAddress();
  },
  dpscopeNotice: (text) => { window.dpscope.notice = text; say(text, !text.startsWith('warning')); },
  dpscopeReport: (json) => { window.dpscope.report = json; showReport(json); console.log(json); },
  dpscopeCopyLink: (query) => copyLink(query),
};

function tooLarge(name, bytes) {
  const limit = Module._dpscope_max_trace_bytes();
  if (bytes <= limit) return false;
  say(name + ' is ' + mib(bytes) + '; the browser viewer opens traces up to ' + mib(limit) +
      ' (its memory holds the file and its model): open it with the desktop dpscope-view', true);
  return true;
}

// Writes `bytes` to the in-memory file system as /traces/NAME; returns NAME, relative to /traces,
// the viewer's working folder, so that the header and the compared runs' titles show the name.
function store(name, bytes) {
  Module.FS.mkdirTree('/traces');
  Module.FS.chdir('/traces');
  const file = name.replace(/[^A-Za-z0-9._-]/g, '_');
  Module.FS.writeFile(file, bytes);
  return file;
}

// The JSON line of what is drawn (report.h), in <pre id="dpscope-report"> for scripts and tests:
// written once the trace is drawn, again on F9, and at once by window.dpscope.refreshReport() (not
// on a timer: on a big trace the line takes milliseconds to build).
function showReport(line) {
  document.getElementById('dpscope-report').textContent = line;
  return line;
}
function refreshReport() { return showReport(Module.ccall('dpscope_report', 'string', [], [])); }
window.dpscope.refreshReport = refreshReport;

let polling = 0;
function open(mainPath, comparePath, shownName, query) {
  const error = Module.ccall('dpscope_open', 'string', ['string', 'string', 'string', 'string'],
                             [mainPath, comparePath, shownName, query]);
  if (error) { say(error, true); return; }
  say('loading ' + shownName + '…');
  clearInterval(polling);
  polling = setInterval(() => {
    const state = Module.ccall('dpscope_state', 'string', [], []);
    if (state === 'loading') return;
    clearInterval(polling);
    if (state.startsWith('error: ')) {
      say(state.slice(7), true);
    } else if (state === 'ready') {
      window.dpscope.opens += 1;
      copyButton.disabled = false;
      requestAnimationFrame(() => requestAnimationFrame(refreshReport));
      if (!window.dpscope.notice) say(opened.lesson || shownName + ' (G or Copy link: the link to this moment)');
      document.getElementById('canvas').focus();
    }
  }, 100);
}

const isProfilerFile = (name) => /\.json(\.gz)?$/.test(name);

// Files from the picker or a drop: one dpscope trace, two to compare (the second drawn under the
// first), or PyTorch profiler files, one per rank, imported into one run.
async function openFiles(files) {
  if (!files.length) return;
  const profiler = files.every((f) => isProfilerFile(f.name));
  if (files.length > 2 && !profiler) {
    say('open one trace, two to compare (the second drawn under the first), or profiler files (one per rank)', true);
    return;
  }
  const total = files.reduce((sum, f) => sum + f.size, 0);
  if (!files.some((f) => isGzippedTrace(f.name)) && tooLarge(files.map((f) => f.name).join(', '), total)) return;
  say('reading ' + files.map((f) => f.name).join(', ') + '…');
  const paths = [];
  for (const file of files) {
    let read;
    try {
      read = await unpacked(file.name, file.stream(), file.size);
    } catch (error) {
      say(file.name + ' cannot be read: ' + error.message + ' (a .gz file must be gzip-compressed)', true);
      return;
    }
    if (!read) return;
    paths.push(store(read.name, read.bytes));
  }
  Object.assign(opened, { trace: [], compare: '', local: true, lesson: '' });
  window.dpscope.notice = '';
  const main = profiler ? paths : [paths[0]];
  open(main.join('\n'), profiler ? '' : paths[1] || '', files.map((f) => f.name).join(profiler ? ', ' : ' vs '),
       linkQuery(location.search));
}

// A gzipped dpscope trace (NAME.sqlite.gz, as the gallery keeps its traces) is unpacked as it
// arrives, by the browser's DecompressionStream; a profiler's .json.gz goes to the viewer as it
// is, whose import reads it with zlib.
const isGzippedTrace = (name) => name.endsWith('.gz') && !isProfilerFile(name);

// Reads `stream` into one array, refusing it once it is larger than the viewer takes; null then.
async function readAll(name, stream, declared) {
  const reader = stream.getReader();
  const chunks = [];
  let received = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    received += value.length;
    if (tooLarge(name, received)) { reader.cancel(); return null; }
    chunks.push(value);
    say('reading ' + name + ': ' + mib(received) + (declared ? ' of ' + mib(declared) : ''));
  }
  const bytes = new Uint8Array(received);
  let at = 0;
  for (const chunk of chunks) { bytes.set(chunk, at); at += chunk.length; }
  return bytes;
}

// A file's or a download's bytes, unpacked when gzipped (its name loses .gz): {name, bytes}.
async function unpacked(name, stream, declared) {
  if (!isGzippedTrace(name)) {
    const bytes = await readAll(name, stream, declared);
    return bytes && { name, bytes };
  }
  const plain = name.slice(0, -3);
  const bytes = await readAll(plain, stream.pipeThrough(new DecompressionStream('gzip')), 0);
  return bytes && { name: plain, bytes };
}

// Downloads `url`, refusing it once it is known to be too large (Content-Length, else as it comes).
async function download(url) {
  const name = decodeURIComponent(new URL(url, location.href).pathname.split('/').pop() || 'trace');
  let response;
  try {
    response = await fetch(url);
  } catch (error) {
    throw new Error('cannot fetch ' + url + ': ' + error.message + ' (the server must allow this page to read it: same origin, or CORS)');
  }
  if (!response.ok) throw new Error('cannot fetch ' + url + ': the server answered ' + response.status + ' ' + response.statusText);
  const declared = Number(response.headers.get('Content-Length') || 0);
  if (declared && !isGzippedTrace(name) && tooLarge(name, declared)) return null;
  try {
    return await unpacked(name, response.body, declared);
  } catch (error) {
    throw new Error(name + ' cannot be read: ' + error.message + ' (a .gz file must be gzip-compressed)');
  }
}

async function openFromAddress() {
  const params = new URLSearchParams(location.search);
  if (params.has('live')) {
    say('--live follows a training as it writes its trace; that needs the desktop dpscope-view (a page cannot watch a folder)', true);
    return;
  }
  // One trace=, or one per rank for profiler files (trace=a.json.gz&trace=b.json.gz).
  const traces = params.getAll('trace');
  if (!traces.length) return;
  try {
    const mains = [];
    for (const url of traces) {
      const file = await download(url);
      if (!file) return;
      mains.push(file);
    }
    const compare = params.get('compare') ? await download(params.get('compare')) : null;
    if (params.get('compare') && !compare) return;
    Object.assign(opened, { trace: traces, compare: params.get('compare') || '', local: false, lesson: params.get('lesson') || '' });
    window.dpscope.notice = '';
    open(mains.map((f) => store(f.name, f.bytes)).join('\n'), compare ? store(compare.name, compare.bytes) : '',
         mains.map((f) => f.name).join(', ') + (compare ? ' vs ' + compare.name : ''), linkQuery(params));
  } catch (error) {
    say(error.message, true);
  }
}

function copyLink(query) {
  const params = new URLSearchParams();
  for (const url of opened.trace || []) params.append('trace', url);
  if (opened.compare) params.set('compare', opened.compare);
  for (const [key, value] of new URLSearchParams(query)) params.set(key, value);
  if (opened.lesson) params.set('lesson', opened.lesson);
  const link = location.origin + location.pathname + '?' + params.toString();
  window.dpscope.link = link;
  const note = opened.local ? ' (a file opened from this computer has no address: put it on a server and add trace=URL)' : '';
  const done = () => say('link copied: ' + link + note);
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(link).then(done, () => say('link: ' + link + note));
  } else {
    say('link: ' + link + note);
  }
}

// While the viewer has the keys, Ctrl +/-/0 size its text and Ctrl F finds, as on the desktop,
// rather than zooming the page or opening the browser's find bar.
window.addEventListener('keydown', (event) => {
  if (document.activeElement === Module.canvas && (event.ctrlKey || event.metaKey) &&
      ['=', '+', '-', '0', 'f', 'F'].includes(event.key)) {
    event.preventDefault();
  }
}, true);

copyButton.addEventListener('click', () => copyLink(Module.ccall('dpscope_link', 'string', [], [])));
document.getElementById('picker').addEventListener('change', (event) => openFiles([...event.target.files]));
document.addEventListener('dragover', (event) => { event.preventDefault(); document.body.classList.add('dragging'); });
document.addEventListener('dragleave', (event) => { if (!event.relatedTarget) document.body.classList.remove('dragging'); });
document.addEventListener('drop', (event) => {
  event.preventDefault();
  document.body.classList.remove('dragging');
  openFiles([...event.dataTransfer.files]);
});
