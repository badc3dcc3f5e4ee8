// The documentation's client snippets, run as a reader runs them, read from its Markdown
// documents wherever they are (so the two cannot drift; today docs/subscriptions.md), against the
// real ./caddy serving make run's site (localhost and 127.0.0.1, the key dev-key of alice; only
// the port differs from what the documentation shows): the graphql-ws client of the
// Subscriptions page, and the three of "Subscriptions over HTTP" (graphql-sse and Apollo
// Client's HttpLink saved as files in a directory of their own where the packages are installed
// and run with this Node; the browser's EventSource run in headless Chromium in a document of the
// site). The site ends each SSE stream after sse_max_duration (2 s), so the two SSE snippets
// print every post once and in order only if they resume after each cut.
import { before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { inspect } from 'node:util';
import { fileURLToPath } from 'node:url';
import { countingTest, docBlocks, launchChromium, listsPosts, postsCaddyfile, runSnippet, sleep, startCaddy, stopCaddy } from './lib.mjs';

const NODE_MODULES = fileURLToPath(new URL('./node_modules', import.meta.url));
const SSE_MAX_DURATION_MS = 2000;
const WRITE_EVERY_MS = 80; // the pause between two posts of a writer

let tmp; // the scratch directory: Caddyfile, data, Caddy's home, the snippet's directory
let caddy; // { child, exited, log(), base }

const { test, failures } = countingTest();

before(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'caddy-posts-readme-'));
  caddy = await startCaddy({
    dir: tmp,
    // The repository's Caddyfile, on a free port: both host names, one site; and SSE streams cut
    // every 2 s, which the SSE snippets must get over.
    caddyfile: (base) =>
      postsCaddyfile(`${base.replace('127.0.0.1', 'localhost')}, ${base}`, [
        `data_dir ${path.join(tmp, 'data')}`,
        'api_key dev-key alice',
        `sse_max_duration ${SSE_MAX_DURATION_MS / 1000}s`,
      ]),
    ready: listsPosts,
  });
});

after(async () => {
  await stopCaddy(caddy);
  if (failures() > 0 && caddy) {
    console.error(`--- caddy's log (${failures()} test(s) failed) ---\n${caddy.log()}--- end of caddy's log ---`);
  }
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

test("the documentation's graphql-ws snippet runs as pasted on this Node and prints a post created meanwhile", async (t) => {
  // Its own block: the first of the section, which neither resumes nor goes through Apollo
  // (resume.test.mjs runs the blocks of "Resuming after a disconnect").
  const snippets = docBlocks('js')
    .map((b) => b.text)
    .filter((text) => text.includes("from 'graphql-ws'") && !text.includes('resumeFrom') && !text.includes('@apollo/client'));
  assert.equal(snippets.length, 1, 'the documentation has one ```js block that imports graphql-ws and does not resume');
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
    // not pushed: create posts as the tour's curl does until one is printed.
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

// --- helpers of the snippets of "Subscriptions over HTTP" ---------------------------------------

/** The documentation's one js block that matches, with localhost:8080 (if it names it) on Caddy's port. */
function docSnippet(matches, what, { named = true } = {}) {
  const found = docBlocks('js')
    .map((b) => b.text)
    .filter(matches);
  assert.equal(found.length, 1, `the documentation has one \`\`\`js block of ${what}`);
  if (!named) return found[0];
  assert.equal(found[0].split('localhost:8080').length, 2, `the ${what} snippet names localhost:8080 once`);
  return found[0].replace('localhost:8080', `localhost:${new URL(caddy.base).port}`);
}

/** Creates a post as alice with dev-key, as the tour's curl does; returns it. */
async function createPost(title) {
  const res = await fetch(`${caddy.base}/posts`, {
    method: 'POST',
    headers: { Authorization: 'ApiKey dev-key', 'Content-Type': 'application/json' },
    body: JSON.stringify({ title, body: 'Served by Caddy' }),
  });
  const post = await res.json();
  assert.equal(res.status, 201, `POST /posts: ${JSON.stringify(post)}`);
  return post;
}

const uniqueTitle = (what) => `${what} ${Math.random().toString(36).slice(2, 10)}`;

/** Polls cond every 20ms until it is true; fails after ms, saying what and what detail() says. */
async function until(cond, ms, what, detail = () => '') {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) assert.fail(`${what}: not within ${ms}ms\n${await detail()}`);
    await sleep(20);
  }
}

/** The number of SSE streams Caddy's log says sse_max_duration ended so far. */
const cuts = () =>
  caddy
    .log()
    .split('\n')
    .filter((line) => line.includes('"msg":"graphql stream closed"') && line.includes('"end":"SERVICE_RESTART"')).length;

/**
 * Runs a subscriber that printed(), in order, the ids of the posts it got, through the server's
 * cuts: posts until it prints one, then posts every WRITE_EVERY_MS for 6 s, none for 3 s (a cut
 * with no event in it), posts for 2 s more; then waits for the last one. Asserts that it printed
 * every post from its first once and in order, across at least two cuts.
 */
async function everyPostAcrossCuts(t, printed, describe) {
  const written = [];
  await until(
    async () => {
      written.push(await createPost(uniqueTitle('Hello, edge')));
      await sleep(100);
      return printed().length > 0;
    },
    10_000,
    'the first post printed',
    describe,
  );
  const cutsBefore = cuts();
  const writeFor = async (ms) => {
    for (const end = Date.now() + ms; Date.now() < end; await sleep(WRITE_EVERY_MS)) {
      written.push(await createPost(uniqueTitle('Hello, edge')));
    }
  };
  await writeFor(6000);
  await sleep(3000);
  await writeFor(2000);
  const last = written.at(-1).id;
  await until(() => printed().includes(last), 15_000, 'the last post printed', describe);
  await sleep(200); // anything printed twice at the end shows too
  const got = printed();
  const ids = written.map((p) => p.id);
  const first = ids.indexOf(got[0]);
  assert.ok(first >= 0, `the first id printed, ${got[0]}, is none of the posts written`);
  const missing = ids.slice(first).filter((id) => !got.includes(id));
  const twice = got.filter((id, i) => got.indexOf(id) !== i);
  assert.deepEqual(
    got,
    ids.slice(first),
    `every post from the first printed, once and in order: missing ${missing.length}, printed twice ${twice.length}\n${await describe()}`,
  );
  const cut = cuts() - cutsBefore;
  assert.ok(cut >= 2, `the server cut ${cut} SSE streams meanwhile; want several`);
  t.diagnostic(`printed ${got.length} posts of ${ids.length} written, across ${cut} cuts`);
}

test("the documentation's graphql-sse snippet runs as pasted and prints every post once and in order across the server's cuts", async (t) => {
  const run = runSnippet(tmp, 'subscribe-sse.mjs', docSnippet((text) => text.includes("from 'graphql-sse'"), 'graphql-sse'));
  const report = () => `exit: ${JSON.stringify(run.exit())}\nstdout:\n${run.stdout()}\nstderr:\n${run.stderr()}`;
  try {
    const printed = () => [...run.stdout().matchAll(/id: '([^']+)'/g)].map((m) => m[1]);
    await everyPostAcrossCuts(t, printed, report);
    assert.ok(run.stdout().includes("userId: 'alice'"), run.stdout());
    assert.equal(run.stderr(), '', 'the snippet wrote to stderr');
    assert.equal(run.exit(), null, 'the snippet is still subscribed');
  } finally {
    await run.stop();
  }
});

test("the documentation's Apollo Client HttpLink snippet runs as pasted and prints a post created meanwhile", async (t) => {
  const source = docSnippet(
    (text) => text.includes("from '@apollo/client'") && text.includes('new HttpLink') && !text.includes('graphql-ws'),
    'Apollo Client with HttpLink',
  );
  const run = runSnippet(tmp, 'subscribe-apollo.mjs', source);
  try {
    let shown;
    let writes = 0;
    await until(
      async () => {
        writes++;
        const post = await createPost(uniqueTitle('Hello, edge'));
        for (const end = Date.now() + 500; Date.now() < end && !run.exit(); await sleep(20)) {
          if (run.stdout().includes(inspect(post.title))) return (shown = post);
        }
        return run.exit() !== null;
      },
      10_000,
      'a post printed',
      () => `stdout:\n${run.stdout()}\nstderr:\n${run.stderr()}`,
    );
    assert.ok(shown, `the snippet exited (${JSON.stringify(run.exit())}): ${run.stdout()}\n${run.stderr()}`);
    t.diagnostic(`posts created until the subscription was live: ${writes}`);
    // Apollo Client's cache adds __typename to what it asks for.
    const { id, title, userId } = shown;
    const printed = inspect({ postCreated: { __typename: 'Post', id, title, userId } });
    assert.ok(run.stdout().includes(`${printed}\n`), `the snippet printed:\n${run.stdout()}\nwhich lacks:\n${printed}`);
    assert.equal(run.stderr(), '', 'the snippet wrote to stderr');
    assert.equal(run.exit(), null, 'the snippet is still subscribed');
  } finally {
    await run.stop();
  }
});

test("the documentation's EventSource snippet runs as pasted in Chromium and logs every post once and in order across the server's cuts", async (t) => {
  // GraphQL over SSE's (REST's change stream has its own, run by changes.test.mjs).
  const source = docSnippet((text) => text.includes('new EventSource') && text.includes('/graphql'), 'EventSource', { named: false });
  const browser = await launchChromium(path.join(tmp, 'chromium'));
  try {
    const page = await browser.newPage();
    const logged = [];
    const problems = [];
    let reading = Promise.resolve(); // what was logged, read in the order logged
    page.on('console', (msg) => {
      reading = reading.then(async () => {
        if (msg.type() === 'log') logged.push(await msg.args()[0]?.jsonValue());
        else problems.push(`console ${msg.type()}: ${msg.text()}`);
      });
    });
    page.on('pageerror', (err) => problems.push(`page error: ${err.message ?? err}`));
    // A document of the site (its list of posts), as a page of the site would be: the snippet
    // subscribes with the relative URL /graphql.
    const res = await page.goto(`${caddy.base}/posts?limit=1`, { waitUntil: 'load', timeout: 15_000 });
    assert.equal(res.status(), 200);
    await page.addScriptTag({ content: source });
    const printed = () => logged.map((data) => data?.postCreated?.id);
    await everyPostAcrossCuts(t, printed, () => JSON.stringify({ logged, problems }));
    assert.ok(logged.every((data) => data.postCreated.userId === 'alice'), JSON.stringify(logged));
    await reading;
    t.diagnostic(`console: ${JSON.stringify(problems)}`);
    assert.deepEqual(problems, []);
  } finally {
    await browser.close();
  }
});
