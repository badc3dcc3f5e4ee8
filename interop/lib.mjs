// Helpers the interop tests share: a free port, ./caddy started on a Caddyfile of its own (or as
// make run starts it) and stopped again, a test() that counts failures so that Caddy's log is
// shown when one failed, headless Chromium, the fenced blocks of the documentation, a shell block run with bash
// against make run's site and what its curls printed, and an event split from its cursor.
// Nothing here holds state across test files: each file starts its own Caddy in its own directory.
import { test as nodeTest, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import http from 'node:http';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import puppeteer from 'puppeteer-core';

/** The Chromium the browser tests drive: Debian's, or the one CHROMIUM names. */
export const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';

/** Starts headless CHROMIUM through puppeteer-core, with its profile in profileDir. */
export async function launchChromium(profileDir) {
  assert.ok(
    fs.existsSync(CHROMIUM),
    `${CHROMIUM} is missing: install Debian's chromium (apt-get install chromium; .ci/run does) or set CHROMIUM`,
  );
  return puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    userDataDir: profileDir,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run'],
    timeout: 20_000,
  });
}

/** The binary `make caddy` builds. */
export const CADDY = fileURLToPath(new URL('../caddy', import.meta.url));

/** The repository's root, whose Markdown documents docBlocks reads. */
export const ROOT = fileURLToPath(new URL('..', import.meta.url));

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** A TCP port on 127.0.0.1 that was free a moment ago. */
export async function freePort() {
  const server = http.createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * node:test's test, counting the tests that failed: `const { test, failures } = countingTest()`,
 * then `failures()` in `after` says whether to show Caddy's log.
 */
export function countingTest() {
  let failed = 0;
  const test = (name, fn) =>
    nodeTest(name, async (t) => {
      try {
        await fn(t);
      } catch (err) {
        failed++;
        throw err;
      }
    });
  return { test, failures: () => failed };
}

/**
 * A Caddyfile with one site at base that runs the posts module with the subdirectives given
 * (lines such as "api_key <key> <user>"), without the admin API, logging requests to stderr with
 * the API key header that api_key_header opts in to deleted (as docs/authentication.md shows).
 */
export function postsCaddyfile(base, subdirectives) {
  return `{
	admin off
}

${base} {
	log {
		output stderr
		format filter {
			request>headers>X-Api-Key delete
		}
	}
	posts {
		api_key_header X-API-Key
${subdirectives.map((line) => `\t\t${line}\n`).join('')}	}
}
`;
}

/**
 * Starts ./caddy with the Caddyfile that caddyfile(base) returns, base being
 * http://127.0.0.1:<a free port>, written into dir, which also becomes Caddy's home; env(base)
 * is added to its environment (for a Caddyfile that reads {$PORT}). Waits until ready(base)
 * answers true; until then it answers what it saw (a string for the error message) or throws.
 * Returns { child, exited, log(), base }; on failure Caddy is stopped and the error carries its
 * log.
 */
export async function startCaddy({ dir, caddyfile, ready, env = () => ({}), timeoutMs = 20_000 }) {
  if (!fs.existsSync(CADDY)) {
    throw new Error(`${CADDY} is missing: run \`make caddy\` in the repository root first (or \`make interop\`)`);
  }
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const file = path.join(dir, 'Caddyfile');
  fs.writeFileSync(file, caddyfile(base));
  const home = path.join(dir, 'home');
  fs.mkdirSync(home);
  const child = spawn(CADDY, ['run', '--config', file, '--adapter', 'caddyfile'], {
    cwd: dir,
    env: {
      ...process.env,
      ...(await env(base)),
      HOME: home,
      XDG_DATA_HOME: path.join(home, 'data'),
      XDG_CONFIG_HOME: path.join(home, 'config'),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  child.stdout.on('data', (chunk) => (log += chunk));
  child.stderr.on('data', (chunk) => (log += chunk));
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  let exit = null;
  exited.then((e) => (exit = e));
  const caddy = { child, exited, log: () => log, base };

  const deadline = Date.now() + timeoutMs;
  let last = 'no answer yet';
  for (;;) {
    if (exit) {
      throw new Error(`caddy exited (${JSON.stringify(exit)}) before it was ready; its log:\n${log}`);
    }
    try {
      const state = await ready(base);
      if (state === true) return caddy;
      last = state;
    } catch (err) {
      last = String(err.cause ?? err);
    }
    if (Date.now() > deadline) {
      await stopCaddy(caddy);
      throw new Error(`caddy was not ready after ${timeoutMs / 1000}s (last: ${last}); its log:\n${log}`);
    }
    await sleep(100);
  }
}

/** A ready check for startCaddy: an anonymous GET /posts answers 200. */
export async function listsPosts(base) {
  const res = await fetch(`${base}/posts`);
  await res.arrayBuffer();
  return res.status === 200 || `GET /posts: ${res.status}`;
}

/** Stops Caddy: SIGTERM, then SIGKILL if it has not exited after 10s. */
export async function stopCaddy(caddy) {
  if (!caddy || caddy.child.exitCode !== null || caddy.child.signalCode !== null) return;
  caddy.child.kill('SIGTERM');
  const timer = setTimeout(() => caddy.child.kill('SIGKILL'), 10_000);
  await caddy.exited;
  clearTimeout(timer);
}

/** The address of make run's site, which the documentation's shell blocks name. */
export const MAKE_RUN_ADDRESS = 'localhost:8080';

/**
 * The site of `make run` for a test file that runs the documentation's shell blocks: before its
 * tests, ./caddy started as `make run` starts it (the repository's Caddyfile, POSTS_API_KEY=dev-key,
 * an empty data directory under a scratch directory of its own; PORT and ADMIN moved to free
 * ports, as the README says a reader may do), stopped after them, its log printed if one failed.
 * Returns { test, site }: the file's test (countingTest's), and site, { cwd, port } once started,
 * where bash runs a block.
 */
export function makeRunSite(name) {
  const { test, failures } = countingTest();
  const site = {};
  let caddy;
  before(async () => {
    site.cwd = fs.mkdtempSync(path.join(os.tmpdir(), `caddy-posts-${name}-`));
    const admin = await freePort();
    caddy = await startCaddy({
      dir: site.cwd,
      caddyfile: () => fs.readFileSync(path.join(ROOT, 'Caddyfile'), 'utf8'),
      env: (base) => ({ PORT: new URL(base).port, ADMIN: `localhost:${admin}`, POSTS_API_KEY: 'dev-key' }),
      ready: listsPosts,
    });
    site.port = new URL(caddy.base).port;
  });
  after(async () => {
    await stopCaddy(caddy);
    if (failures() > 0 && caddy) {
      console.error(`--- caddy's log (${failures()} test(s) failed) ---\n${caddy.log()}--- end of caddy's log ---`);
    }
    if (site.cwd) fs.rmSync(site.cwd, { recursive: true, force: true });
  });
  return { test, site };
}

/** Serves {keys} at /.well-known/jwks.json on 127.0.0.1 and a free port. */
export async function serveJWKS(publicKeys) {
  const body = JSON.stringify({ keys: publicKeys });
  const server = http.createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/.well-known/jwks.json') {
      res.writeHead(200, { 'Content-Type': 'application/jwk-set+json' }).end(body);
    } else {
      res.writeHead(404).end();
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${server.address().port}/.well-known/jwks.json` };
}

/**
 * A ready check for startCaddy on a site that verifies bearer tokens: an anonymous list answers
 * 200, and the token probe is no longer answered 503 (the JWKS is fetched in the background
 * after start).
 */
export function readyForTokens(probe) {
  return async (base) => {
    const anonymous = await fetch(`${base}/posts`);
    await anonymous.arrayBuffer();
    if (anonymous.status !== 200) return `GET /posts: ${anonymous.status}`;
    const signed = await fetch(`${base}/posts`, { headers: { Authorization: `Bearer ${probe}` } });
    await signed.arrayBuffer();
    return signed.status !== 503 || `GET /posts with a token: ${signed.status}`;
  };
}

/**
 * The Markdown documents of the repository, as slash paths relative to its root in lexical order:
 * every *.md file but those under node_modules, testdata and hidden folders, and GraphiQL's own
 * README (handlers/graphiql/ is vendored). The same rule as the Go tests' (internal/docgen's
 * Documents), so that a snippet may move from one page to another.
 */
export function documents(root = ROOT) {
  const found = [];
  const walk = (rel) => {
    const entries = fs.readdirSync(path.join(root, rel), { withFileTypes: true });
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const e of entries) {
      const child = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) {
        const skip = e.name === 'node_modules' || e.name === 'testdata' || e.name.startsWith('.') || child === 'handlers/graphiql';
        if (!skip) walk(child);
      } else if (e.name.endsWith('.md')) {
        found.push(child);
      }
    }
  };
  walk('');
  return found;
}

/**
 * The fenced blocks of every document of the documentation in language lang (the first word of
 * their info string), in the order of the documents, each as { text, role, file, where }: role
 * is the second word (```sh tour), where is file:line of the opening fence.
 */
export function docBlocks(lang) {
  const blocks = [];
  for (const file of documents()) {
    let open = null;
    fs.readFileSync(path.join(ROOT, file), 'utf8')
      .split('\n')
      .forEach((line, i) => {
        if (open === null && line.startsWith('```')) {
          const [blockLang = '', role = ''] = line.slice(3).trim().split(/\s+/);
          open = { lang: blockLang, role, text: '', file, where: `${file}:${i + 1}` };
        } else if (open !== null && line.trim() === '```') {
          const { lang: blockLang, ...block } = open;
          if (blockLang === lang) blocks.push(block);
          open = null;
        } else if (open !== null) open.text += `${line}\n`;
      });
    assert.equal(open, null, `${open?.where}: the block is never closed`);
  }
  return blocks;
}

/** A cursor as a client sees it: 23 base64url characters. */
const CURSOR = /^[A-Za-z0-9_-]{23}$/;

/**
 * Splits an event (a subscription's result) into the rest of it, as before events carried a
 * cursor, and its cursor: extensions holds the cursor alone, 23 base64url characters.
 */
export function splitEvent(event) {
  const { extensions, ...rest } = event;
  const shown = JSON.stringify(event);
  assert.deepEqual(Object.keys(extensions ?? {}), ['cursor'], `an event's extensions are its cursor alone: ${shown}`);
  assert.equal(typeof extensions.cursor, 'string', `an event's cursor is a string: ${shown}`);
  assert.match(extensions.cursor, CURSOR, `an event's cursor is 23 base64url characters: ${shown}`);
  return { rest, cursor: extensions.cursor };
}

/**
 * Saves source as name in a reader's directory of its own under parent (this package's
 * node_modules beside it, as npm install would put them) and runs it with this Node, nodeArgs
 * and env added. Returns what watch returns.
 */
export function runSnippet(parent, name, source, nodeArgs = [], env = {}) {
  const dir = fs.mkdtempSync(path.join(parent, 'reader-'));
  fs.symlinkSync(fileURLToPath(new URL('./node_modules', import.meta.url)), path.join(dir, 'node_modules'), 'dir');
  fs.writeFileSync(path.join(dir, name), source);
  const child = spawn(process.execPath, [...nodeArgs, name], {
    cwd: dir,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return watch(child);
}

/**
 * Collects what a child process writes. Returns { stdout(), stderr(), exit(), exited, stop() }:
 * exit() is null while it runs, exited resolves to it, and stop() ends it (with group, the
 * process group it leads, spawned detached) and waits for its end.
 */
export function watch(child, { group = false } = {}) {
  let stdout = '';
  let stderr = '';
  let exit = null;
  child.stdout.on('data', (chunk) => (stdout += chunk));
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve((exit = { code, signal }))));
  return {
    stdout: () => stdout,
    stderr: () => stderr,
    exit: () => exit,
    exited,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        if (group) process.kill(-child.pid, 'SIGTERM');
        else child.kill('SIGTERM');
      }
      await exited;
    },
  };
}

/** A block with make run's address moved to port; it must name that address and no other. */
function onPort(block, port) {
  assert.ok(block.text.includes(MAKE_RUN_ADDRESS), `${block.where}: the block names ${MAKE_RUN_ADDRESS}`);
  const text = block.text.replaceAll(MAKE_RUN_ADDRESS, `localhost:${port}`);
  const others = [...text.matchAll(/(localhost|127\.0\.0\.1)(:\d+)?/g)].map((m) => m[0]).filter((a) => a !== `localhost:${port}`);
  assert.deepEqual(others, [], `${block.where}: the block names other addresses than ${MAKE_RUN_ADDRESS}`);
  return { ...block, text };
}

/**
 * Runs a shell block of the documentation as a reader pastes it against make run's site on
 * port (localhost:8080 moved there): with bash -e -o pipefail in cwd, in a process group of its
 * own so that stop() ends the curl it runs too. Returns what watch returns.
 */
export function bash(block, { cwd, port }) {
  const { text } = onPort(block, port);
  const child = spawn('bash', ['-e', '-o', 'pipefail', '-c', text], { cwd, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  return watch(child, { group: true });
}

/** Runs a shell block as bash does, to its end within 20s; it must exit 0. Returns its stdout. */
export async function bashToEnd(block, site) {
  const run = bash(block, site);
  const timer = setTimeout(() => run.stop(), 20_000);
  const exit = await run.exited;
  clearTimeout(timer);
  assert.deepEqual(exit, { code: 0, signal: null }, `${block.where} failed; stdout:\n${run.stdout()}\nstderr:\n${run.stderr()}`);
  return run.stdout();
}

/** The responses curl -i printed, each as { status, headers (lower-case names), body }. */
export function curlResponses(stdout) {
  return stdout
    .split(/^(?=HTTP\/\S+ \d{3}\b)/m)
    .filter((part) => part.startsWith('HTTP/'))
    .map((part) => {
      const [head, ...body] = part.split('\r\n\r\n');
      const [statusLine, ...fields] = head.split('\r\n');
      const headers = Object.fromEntries(
        fields.map((f) => {
          const i = f.indexOf(':');
          return [f.slice(0, i).trim().toLowerCase(), f.slice(i + 1).trim()];
        }),
      );
      return { status: Number(statusLine.split(' ')[1]), headers, body: body.join('\r\n\r\n') };
    });
}

/** The JSON values printed one a line (curl -s of several requests). */
export function jsonValues(stdout) {
  return stdout
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line));
}
