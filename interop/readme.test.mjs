// The README's Node snippet, run as a reader runs it: the graphql-ws client of its Subscriptions
// section, read from README.md (so the two cannot drift), saved as subscribe.mjs in a directory
// of its own where graphql-ws and ws are installed, and run with this Node against the real
// ./caddy serving the README's site (localhost and 127.0.0.1, the key dev-key of alice). Only the
// port differs from what the README shows.
import { before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { inspect } from 'node:util';
import { fileURLToPath } from 'node:url';
import { countingTest, postsCaddyfile, readmeBlocks, sleep, startCaddy, stopCaddy } from './lib.mjs';

const NODE_MODULES = fileURLToPath(new URL('./node_modules', import.meta.url));

let tmp; // the scratch directory: Caddyfile, data, Caddy's home, the snippet's directory
let caddy; // { child, exited, log(), base }

const { test, failures } = countingTest();

before(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'caddy-posts-readme-'));
  caddy = await startCaddy({
    dir: tmp,
    // The repository's Caddyfile, on a free port: both host names, one site.
    caddyfile: (base) =>
      postsCaddyfile(`${base.replace('127.0.0.1', 'localhost')}, ${base}`, [`data_dir ${path.join(tmp, 'data')}`, 'api_key dev-key alice']),
    ready: async (base) => {
      const res = await fetch(`${base}/posts`);
      await res.arrayBuffer();
      return res.status === 200 || `GET /posts: ${res.status}`;
    },
  });
});

after(async () => {
  await stopCaddy(caddy);
  if (failures() > 0 && caddy) {
    console.error(`--- caddy's log (${failures()} test(s) failed) ---\n${caddy.log()}--- end of caddy's log ---`);
  }
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

test("the README's graphql-ws snippet runs as pasted on this Node and prints a post created meanwhile", async (t) => {
  // Its own block: the first of the section, which neither resumes nor goes through Apollo
  // (resume.test.mjs runs the blocks of "Resuming after a disconnect").
  const snippets = readmeBlocks('js').filter(
    (text) => text.includes("from 'graphql-ws'") && !text.includes('resumeFrom') && !text.includes('@apollo/client'),
  );
  assert.equal(snippets.length, 1, "README.md has one ```js block that imports graphql-ws and does not resume");
  const port = new URL(caddy.base).port;
  assert.equal(snippets[0].split('localhost:8080').length, 2, 'the snippet names localhost:8080 once');
  const source = snippets[0].replace('localhost:8080', `localhost:${port}`);

  // A reader's directory: subscribe.mjs beside node_modules with graphql-ws and ws in it.
  const dir = path.join(tmp, 'reader');
  fs.mkdirSync(dir);
  fs.symlinkSync(NODE_MODULES, path.join(dir, 'node_modules'), 'dir');
  fs.writeFileSync(path.join(dir, 'subscribe.mjs'), source);
  const child = spawn(process.execPath, ['subscribe.mjs'], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  let exit = null;
  exited.then((e) => (exit = e));

  try {
    // The snippet says nothing when its subscription starts, and a post created before that is
    // not pushed: create posts as the README's curl does until one is printed.
    let shown;
    const deadline = Date.now() + 10_000;
    for (let writes = 1; !shown && !exit && Date.now() < deadline; writes++) {
      const title = `Hello, edge ${Math.random().toString(36).slice(2, 10)}`;
      const res = await fetch(`http://localhost:${port}/posts`, {
        method: 'POST',
        headers: { Authorization: 'ApiKey dev-key', 'Content-Type': 'application/json' },
        body: JSON.stringify({ title, body: 'Served by Caddy' }),
      });
      const post = await res.json();
      assert.equal(res.status, 201, `POST /posts: ${JSON.stringify(post)}`);
      for (const until = Date.now() + 500; !shown && Date.now() < until; await sleep(20)) {
        if (stdout.includes(inspect(title))) shown = { post, writes };
      }
    }
    assert.ok(shown, `nothing printed within 10s (exit: ${JSON.stringify(exit)}); stdout:\n${stdout}\nstderr:\n${stderr}`);
    t.diagnostic(`posts created until the subscription was live: ${shown.writes}`);
    const { id, title, userId } = shown.post;
    const printed = inspect({ postCreated: { id, title, userId } }); // as console.log prints it
    assert.ok(stdout.includes(`${printed}\n`), `the snippet printed:\n${stdout}\nwhich lacks:\n${printed}`);
    assert.equal(userId, 'alice');
    assert.equal(stderr, '', 'the snippet wrote to stderr');
    assert.equal(exit, null, 'the snippet is still subscribed');
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
});
