// Resuming subscriptions after a disconnect: the documentation's two snippets of "Resuming after
// a disconnect" (graphql-ws, and Apollo Client with GraphQLWsLink), read from its Markdown
// documents wherever they are (today docs/subscriptions.md) and run as a reader runs them,
// against the real ./caddy serving make run's site (localhost and 127.0.0.1, the key dev-key of
// alice), through a TCP proxy of this test that cuts their connection (both sockets destroyed,
// new connections refused) for 1 to 2 s, once until the client's next attempt to connect has
// been refused, while posts are written over REST every ~60 ms: each snippet must print every
// post once, in order. Only the port differs from what the documentation shows. Then the
// refusals, through graphql-ws: a forged cursor and a resumeFrom that is not a string
// (BAD_USER_INPUT), a cursor too far behind (RESUME_TOO_LONG), one whose events expired
// (CURSOR_EXPIRED, after a restart with events_max), and the snippet's own way out of a refusal:
// it says "refetch" and subscribes afresh.
import { before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { countingTest, docBlocks, listsPosts, postsCaddyfile, runSnippet, sleep, startCaddy, stopCaddy } from './lib.mjs';
import { cuttingProxy } from './streams.mjs';

const WRITE_EVERY_MS = 60; // the pause between two posts of a writer
const MAX_RESUME = 20; // max_resume_events of the second Caddy
const EVENTS_MAX = 1000; // events_max of the second Caddy (its least)

let tmp; // the scratch directory: Caddyfiles, data, Caddy's homes, the snippets' directories
let caddy; // make run's site: { child, exited, log(), base }
let strict; // the second Caddy, with events_max and max_resume_events low: { child, exited, log(), base }
const proxies = []; // every cutting proxy, closed after the tests

const { test, failures } = countingTest();

// --- helpers ------------------------------------------------------------------------------------

/** The documentation's one js block that resumes and matches which ('graphql-ws' or 'apollo'). */
function resumeSnippet(which) {
  const apollo = (text) => text.includes("from '@apollo/client'");
  const found = docBlocks('js')
    .map((b) => b.text)
    .filter((text) => text.includes('resumeFrom') && text.includes("from 'graphql-ws'") && (which === 'apollo') === apollo(text));
  assert.equal(found.length, 1, `the documentation has one \`\`\`js block that resumes with ${which}`);
  assert.equal(found[0].split('localhost:8080').length, 2, `the ${which} snippet names localhost:8080 once`);
  return found[0];
}

/**
 * Polls cond every 20ms until it is true; fails after ms, saying what, and what detail() says,
 * or at once if a Caddy of this file exited.
 */
async function until(cond, ms, what, detail = () => '') {
  const deadline = Date.now() + ms;
  while (!cond()) {
    for (const c of [caddy, strict]) {
      const exit = c?.child.exitCode ?? c?.child.signalCode;
      if (exit != null && !c.stopping) assert.fail(`${what}: caddy exited (${exit}); its log:\n${c.log()}`);
    }
    if (Date.now() > deadline) assert.fail(`${what}: not within ${ms}ms${detail() ? `\n${detail()}` : ''}`);
    await sleep(20);
  }
}

/**
 * What a snippet printed, in order: the id of each post (console.log of the event's data, which
 * shows `id: '…'`) and each "refetch".
 */
function printed(stdout) {
  return [...stdout.matchAll(/id: '([^']+)'|^refetch$/gm)].map((m) => m[1] ?? 'refetch');
}

/** One REST create as alice (dev-key) on base; returns the post. */
async function createPost(base, title) {
  const res = await fetch(`${base}/posts`, {
    method: 'POST',
    headers: { Authorization: 'ApiKey dev-key', 'Content-Type': 'application/json' },
    body: JSON.stringify({ title, body: 'written while the subscriber comes and goes' }),
  });
  const post = await res.json();
  assert.equal(res.status, 201, `POST /posts: ${JSON.stringify(post)}`);
  return post;
}

/** A title no other write uses. */
const uniqueTitle = (what) => `${what} ${Math.random().toString(36).slice(2, 10)}`;

/**
 * Creates posts on base one after the other, WRITE_EVERY_MS apart, until stop(), which resolves
 * with them in the order written (which is the order of the log: each waits for the one before).
 */
function startWriter(base) {
  const posts = [];
  let stopping = false;
  const done = (async () => {
    for (let n = 1; !stopping; n++) {
      posts.push(await createPost(base, uniqueTitle(`resume ${n}`)));
      await sleep(WRITE_EVERY_MS);
    }
  })();
  done.catch(() => {}); // stop() rethrows it
  return {
    posts,
    stop: async () => {
      stopping = true;
      await done;
      return posts;
    },
  };
}

/** Describes a run for an assertion message. */
const report = (run) => `exit: ${JSON.stringify(run.exit())}\nstdout:\n${run.stdout()}\nstderr:\n${run.stderr()}`;

/** Whether run printed a post of posts written at index from or later. */
function printedFrom(run, posts, from) {
  const later = new Set(posts.slice(from).map((p) => p.id));
  return printed(run.stdout()).some((id) => later.has(id));
}

/**
 * Runs source (a snippet of the documentation, its URL on the proxy) while a writer writes to base, cutting the
 * connection `cuts` times once the snippet has printed a post, each time until the snippet prints
 * a post written after the connection came back; then stops writing and waits for the last post.
 * Returns { posts, got, run, proxy, whileDown }: got is printed(stdout), whileDown the number of
 * posts written while the proxy was down.
 */
async function underCuts(t, { name, source, base, target, cuts, nodeArgs, env }) {
  const proxy = await cuttingProxy(target);
  proxies.push(proxy);
  const run = runSnippet(tmp, name, source.replace('localhost:8080', `localhost:${proxy.port}`), nodeArgs, env);
  const writer = startWriter(base);
  let whileDown = 0;
  try {
    await until(() => printed(run.stdout()).length > 0 || run.exit(), 15_000, 'the first post printed', () => report(run));
    assert.equal(run.exit(), null, `the snippet exited\n${report(run)}`);
    for (let i = 1; i <= cuts; i++) {
      await sleep(300 + Math.random() * 400);
      // The second cut lasts until the snippet has tried to connect once, and was refused.
      const untilRefused = i === 2;
      const from = writer.posts.length;
      const ms = await proxy.cut(1000 + Math.round(Math.random() * 1000), { untilRefused });
      const back = writer.posts.length;
      whileDown += back - from;
      t.diagnostic(`cut ${i}: ${ms}ms${untilRefused ? ', until a connection was refused' : ''}, ${back - from} posts written meanwhile`);
      // Live again once it prints a post written after the proxy let connections through.
      await until(() => printedFrom(run, writer.posts, back) || run.exit(), 30_000, `the snippet back after cut ${i}`, () => report(run));
      assert.equal(run.exit(), null, `the snippet exited\n${report(run)}`);
    }
    await sleep(300);
    const posts = await writer.stop();
    await until(() => printedFrom(run, posts, posts.length - 1) || run.exit(), 30_000, 'the last post printed', () => report(run));
    await sleep(300); // anything printed twice at the end shows too
    assert.equal(run.exit(), null, `the snippet exited\n${report(run)}`);
    t.diagnostic(`${posts.length} posts; connections through the proxy: ${proxy.accepted}, refused while down: ${proxy.refused}`);
    return { posts, got: printed(run.stdout()), run, proxy, whileDown };
  } finally {
    await writer.stop().catch(() => {});
    await run.stop();
    await proxy.close();
  }
}

/** Asserts that got is every post of posts from the first one got, once, in order. */
function assertEveryPostOnce(got, posts) {
  const ids = posts.map((p) => p.id);
  const first = ids.indexOf(got[0]);
  assert.ok(first >= 0, `the first id printed, ${got[0]}, is none of the posts written`);
  const want = ids.slice(first);
  const missing = want.filter((id) => !got.includes(id));
  const twice = got.filter((id, i) => got.indexOf(id) !== i);
  assert.deepEqual(
    got,
    want,
    `want every post from the ${first + 1}th of ${ids.length} once and in order; missing ${missing.length} (${missing
      .map((id) => ids.indexOf(id) + 1)
      .join(', ')}), printed twice ${twice.length} (${twice.map((id) => ids.indexOf(id) + 1).join(', ')})`,
  );
}

/** A graphql-ws client on the site at base, without retries (the test wants to see every end). */
function directClient(base) {
  return createClient({ url: `${base.replace(/^http/, 'ws')}/graphql`, webSocketImpl: WebSocket, retryAttempts: 0 });
}

/**
 * Subscribes with payload; returns { results, end, stop }: results fills with each next's
 * payload, end resolves with { errors } (sink.error) or { complete: true }.
 */
function collect(client, payload) {
  const results = [];
  let ended;
  const end = new Promise((resolve) => (ended = resolve));
  const stop = client.subscribe(payload, {
    next: (result) => results.push(result),
    error: (errors) => ended({ errors }),
    complete: () => ended({ complete: true }),
  });
  return { results, end, stop };
}

/** The refusal that ends a subscription with resumeFrom: its code, within 5s. */
async function refusal(client, resumeFrom) {
  const sub = collect(client, { query: 'subscription { postCreated { id } }', extensions: { resumeFrom } });
  let timer;
  const end = await Promise.race([
    sub.end,
    new Promise((resolve) => (timer = setTimeout(() => resolve({ timeout: true }), 5000))),
  ]);
  clearTimeout(timer);
  sub.stop();
  assert.ok(end.errors, `want an error for resumeFrom ${JSON.stringify(resumeFrom)}, got ${JSON.stringify(end)} after ${JSON.stringify(sub.results)}`);
  assert.equal(end.errors.length, 1, JSON.stringify(end.errors));
  assert.deepEqual(sub.results, [], 'nothing is replayed before a refusal');
  return end.errors[0];
}

/**
 * The cursor of a live event on base: subscribes, writes probes (added to written) until one
 * arrives, and returns { id, cursor } of the first event received.
 */
async function liveCursor(base, written) {
  const client = directClient(base);
  try {
    const sub = collect(client, { query: 'subscription { postCreated { id } }' });
    for (const deadline = Date.now() + 10_000; sub.results.length === 0; ) {
      assert.ok(Date.now() < deadline, 'no event within 10s of probing writes');
      written.push(await createPost(base, uniqueTitle('probe')));
      for (const until = Date.now() + 200; sub.results.length === 0 && Date.now() < until; ) await sleep(10);
    }
    sub.stop();
    const [first] = sub.results;
    assert.match(first.extensions?.cursor ?? '', /^[A-Za-z0-9_-]{23}$/, `an event's cursor: ${JSON.stringify(first)}`);
    return { id: first.data.postCreated.id, cursor: first.extensions.cursor };
  } finally {
    await client.dispose();
  }
}

/** Starts a Caddy on make run's site (localhost and 127.0.0.1) in dir with data in dataDir. */
function startSite(dir, dataDir, extra = []) {
  fs.mkdirSync(dir, { recursive: true });
  return startCaddy({
    dir,
    caddyfile: (base) =>
      postsCaddyfile(`${base.replace('127.0.0.1', 'localhost')}, ${base}`, [`data_dir ${dataDir}`, 'api_key dev-key alice', ...extra]),
    ready: listsPosts,
  });
}

const strictSettings = [`events_max ${EVENTS_MAX}`, `max_resume_events ${MAX_RESUME}`];

// --- setup --------------------------------------------------------------------------------------

before(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'caddy-posts-resume-'));
  caddy = await startSite(path.join(tmp, 'readme'), path.join(tmp, 'readme', 'data'));
  strict = await startSite(path.join(tmp, 'strict-1'), path.join(tmp, 'strict-data'), strictSettings);
});

after(async () => {
  for (const c of [caddy, strict]) if (c) c.stopping = true;
  for (const proxy of proxies) await proxy.close();
  await stopCaddy(caddy);
  await stopCaddy(strict);
  if (failures() > 0) {
    for (const [name, c] of [['readme site', caddy], ['strict site', strict]]) {
      if (c) console.error(`--- caddy's log, ${name} (${failures()} test(s) failed) ---\n${c.log()}--- end of caddy's log ---`);
    }
  }
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

// --- the tests ----------------------------------------------------------------------------------

test("the documentation's graphql-ws resume snippet, as pasted, prints every post once and in order across three cuts of its connection", async (t) => {
  const target = Number(new URL(caddy.base).port);
  const { posts, got, run, proxy, whileDown } = await underCuts(t, {
    name: 'resume.mjs',
    source: resumeSnippet('graphql-ws'),
    base: caddy.base,
    target,
    cuts: 3,
  });
  assert.ok(!got.includes('refetch'), `the snippet refetched:\n${run.stdout()}`);
  assertEveryPostOnce(got, posts);
  assert.ok(whileDown > 0, 'posts were written while the connection was down');
  assert.ok(proxy.accepted >= 4, `the snippet connected ${proxy.accepted} times, want one and one after each cut`);
  assert.ok(proxy.refused >= 1, 'the snippet tried to connect while the proxy was down, and went on after it was refused');
  assert.equal(run.stderr(), '', 'the snippet wrote to stderr');
  t.diagnostic(`printed ${got.length} of ${posts.length} posts (${whileDown} written while cut off)`);
});

test("the documentation's Apollo Client resume link, as pasted, prints every post once and in order across a cut", async (t) => {
  // The snippet is for browsers and Node 22, where WebSocket is global; Node 20 has it behind a flag.
  const flag = typeof globalThis.WebSocket === 'undefined';
  const target = Number(new URL(caddy.base).port);
  const { posts, got, run, whileDown } = await underCuts(t, {
    name: 'apollo.mjs',
    source: resumeSnippet('apollo'),
    base: caddy.base,
    target,
    cuts: 1,
    nodeArgs: flag ? ['--experimental-websocket'] : [],
    env: flag ? { NODE_NO_WARNINGS: '1' } : {},
  });
  assert.ok(!got.includes('refetch'), `the snippet refetched:\n${run.stdout()}`);
  assertEveryPostOnce(got, posts);
  assert.ok(whileDown > 0, 'posts were written while the connection was down');
  assert.equal(run.stderr(), '', 'the snippet wrote to stderr');
  t.diagnostic(`printed ${got.length} of ${posts.length} posts (${whileDown} written while cut off)`);
});

test('graphql-ws: forged, too old and expired cursors are refused (BAD_USER_INPUT, RESUME_TOO_LONG, CURSOR_EXPIRED); a recent one resumes', async (t) => {
  const written = []; // the posts of this test, in the order written (but for the bulk)
  const old = await liveCursor(strict.base, written);

  let client = directClient(strict.base);
  try {
    // One character changed (in the position's bytes) and the signature no longer matches.
    const i = 5;
    const forged = old.cursor.slice(0, i) + (old.cursor[i] === 'A' ? 'B' : 'A') + old.cursor.slice(i + 1);
    const bad = await refusal(client, forged);
    assert.equal(bad.extensions?.code, 'BAD_USER_INPUT', JSON.stringify(bad));
    assert.equal(bad.extensions?.field, 'resumeFrom', JSON.stringify(bad));
    const notString = await refusal(client, 42);
    assert.equal(notString.extensions?.code, 'BAD_USER_INPUT', JSON.stringify(notString));

    // More than events_max posts: old is far behind, and past events_max once the log expires.
    const bulk = EVENTS_MAX + 100;
    let next = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < bulk) {
          next++;
          await createPost(strict.base, uniqueTitle('bulk'));
        }
      }),
    );
    const tooLong = await refusal(client, old.cursor);
    assert.equal(tooLong.extensions?.code, 'RESUME_TOO_LONG', JSON.stringify(tooLong));
  } finally {
    await client.dispose();
  }

  // A recent cursor, and the posts written after it: what resuming from it must give.
  const recent = await liveCursor(strict.base, written);
  for (let n = 1; n <= 3; n++) written.push(await createPost(strict.base, uniqueTitle(`after ${n}`)));
  const ids = written.map((p) => p.id);
  const after = ids.slice(ids.indexOf(recent.id) + 1);
  assert.ok(after.length >= 3 && after.length <= MAX_RESUME, `${after.length} posts after the recent cursor`);
  async function resumesRecent(when) {
    const c = directClient(strict.base);
    try {
      const sub = collect(c, { query: 'subscription { postCreated { id } }', extensions: { resumeFrom: recent.cursor } });
      await until(() => sub.results.length >= after.length, 5000, `the replay ${when}`, () => JSON.stringify(sub.results));
      await sleep(300);
      sub.stop();
      assert.deepEqual(sub.results.map((r) => r.data.postCreated.id), after, `the replay ${when}: every post after the cursor once, in order`);
      const cursors = sub.results.map((r) => r.extensions?.cursor);
      assert.equal(new Set(cursors).size, cursors.length, `each replayed event has a cursor of its own: ${cursors}`);
    } finally {
      await c.dispose();
    }
  }
  await resumesRecent('before the restart');

  // A restart expires the events past events_max (at the start, then each minute): old's are gone.
  strict.stopping = true;
  await stopCaddy(strict);
  strict = await startSite(path.join(tmp, 'strict-2'), path.join(tmp, 'strict-data'), strictSettings);
  client = directClient(strict.base);
  try {
    // The start's expiry runs just after the log is read: until it has, the old cursor is only
    // too far behind. Either refusal replays nothing; once the expiry ran, it is expired.
    let expired = await refusal(client, old.cursor);
    for (const until = Date.now() + 10_000; expired.extensions?.code === 'RESUME_TOO_LONG' && Date.now() < until; ) {
      await sleep(100);
      expired = await refusal(client, old.cursor);
    }
    assert.equal(expired.extensions?.code, 'CURSOR_EXPIRED', JSON.stringify(expired));
    t.diagnostic(`CURSOR_EXPIRED: ${expired.message}`);
  } finally {
    await client.dispose();
  }
  await resumesRecent('after the restart');
});

test("the documentation's graphql-ws resume snippet, refused RESUME_TOO_LONG after a long cut, says refetch and goes on with the posts written from then", async (t) => {
  const proxy = await cuttingProxy(Number(new URL(strict.base).port));
  proxies.push(proxy);
  const source = resumeSnippet('graphql-ws').replace('localhost:8080', `localhost:${proxy.port}`);
  const run = runSnippet(tmp, 'resume.mjs', source);
  const writer = startWriter(strict.base);
  let posts;
  try {
    await until(() => printed(run.stdout()).length > 0 || run.exit(), 15_000, 'the first post printed', () => report(run));
    await sleep(300);
    // Cut for longer than MAX_RESUME posts take to write, so that the resume is refused.
    const ms = await proxy.cut(Math.ceil(MAX_RESUME * WRITE_EVERY_MS * 1.5));
    const back = writer.posts.length;
    t.diagnostic(`cut: ${ms}ms`);
    await until(() => printedFrom(run, writer.posts, back) || run.exit(), 30_000, 'the snippet back after the cut', () => report(run));
    await sleep(500);
    posts = await writer.stop();
    await until(() => printedFrom(run, posts, posts.length - 1) || run.exit(), 10_000, 'the last post printed', () => report(run));
    await sleep(300);
    assert.equal(run.exit(), null, `the snippet exited\n${report(run)}`);
  } finally {
    await writer.stop().catch(() => {});
    await run.stop();
    await proxy.close();
  }
  const got = printed(run.stdout());
  const at = got.indexOf('refetch');
  assert.ok(at > 0, `the snippet said refetch after some posts:\n${run.stdout()}`);
  assert.equal(got.lastIndexOf('refetch'), at, 'the snippet said refetch once');
  const ids = posts.map((p) => p.id);
  const before = got.slice(0, at);
  const after = got.slice(at + 1);
  assert.ok(after.length > 0, 'posts printed after the refetch');
  // Before: a run of posts from the first printed; after: every post from some later one on.
  const first = ids.indexOf(before[0]);
  assert.deepEqual(before, ids.slice(first, first + before.length), 'the posts before the cut, once, in order');
  const from = ids.indexOf(after[0]);
  assert.ok(from > first + before.length, `a gap, which the refetch fills: the last before is the ${first + before.length}th, the first after the ${from + 1}th`);
  assert.deepEqual(after, ids.slice(from), 'the posts from the fresh subscription on, once, in order');
  assert.equal(run.stderr(), '', 'the snippet wrote to stderr');
  t.diagnostic(`printed ${before.length}, refetch, then ${after.length}; missed ${from - first - before.length} (the refetch's)`);
});
