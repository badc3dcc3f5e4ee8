// Chromium's own EventSource (headless, through puppeteer-core on Debian's chromium) on a page
// the site itself serves, subscribed anonymously with GET /graphql?query=…, while the server cuts
// each stream after sse_max_duration (2 s): EventSource reconnects by itself, sends the id of
// the last event it saw as Last-Event-ID, and the server resumes after it, so the page ends with
// every post written from Node once, in order, across the cuts. And a document the server
// refuses: its errors as one event, then complete, on which the page closes the EventSource
// (else it would reconnect). Run with `make interop`, or `node --test eventsource.test.mjs` in
// interop/.
import { before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { countingTest, launchChromium, listsPosts, sleep, splitEvent, startCaddy, stopCaddy } from './lib.mjs';
import { streamsCaddyfile, uniqueTitle, until } from './streams.mjs';

const WRITER_KEY = 'interop-eventsource-key-of-walt';
const POSTS = 150; // written while the page listens
const WRITE_EVERY_MS = 65; // so that they take some 10 s: several of the server's cuts
const SSE_MAX_DURATION_MS = 2000;

// The page: it subscribes when the test calls subscribe(query), and keeps in window.seen what
// its EventSource did. An EventSource has no headers of its own to send, so it subscribes
// anonymously.
const PAGE = `<!doctype html>
<meta charset="utf-8">
<title>EventSource</title>
<script>
window.seen = { opens: 0, errors: 0, completes: 0, events: [] };
window.subscribe = (query) => {
  const source = new EventSource('/graphql?query=' + query);
  source.addEventListener('open', () => seen.opens++);
  source.addEventListener('error', () => seen.errors++); // a cut: it reconnects by itself
  source.addEventListener('next', (e) => seen.events.push({ id: e.lastEventId, result: JSON.parse(e.data) }));
  source.addEventListener('complete', () => {
    seen.completes++;
    source.close(); // the end: else EventSource would reconnect and subscribe again
  });
  window.source = source;
};
</script>
`;

let tmp; // the scratch directory: Caddyfile, data, Caddy's home, the page, Chromium's profile
let caddy; // { child, exited, log(), base }
let browser;

const { test, failures } = countingTest();

/** Creates a post as the writer through REST; returns it. */
async function createPost(title) {
  const res = await fetch(`${caddy.base}/posts`, {
    method: 'POST',
    headers: { 'X-API-Key': WRITER_KEY, 'Content-Type': 'application/json' },
    body: JSON.stringify({ title, body: 'written while an EventSource listens' }),
  });
  const post = await res.json();
  assert.equal(res.status, 201, `POST /posts: ${JSON.stringify(post)}`);
  return post;
}

/** A fresh tab on the site's page, its EventSource not yet started. */
async function openPage() {
  const page = await browser.newPage();
  const problems = [];
  page.on('pageerror', (err) => problems.push(`page error: ${err.message ?? err}`));
  await page.setCacheEnabled(false); // each tab loads the page afresh: 200, not 304
  const res = await page.goto(`${caddy.base}/subscribe.html`, { waitUntil: 'load', timeout: 15_000 });
  assert.equal(res.status(), 200, `GET /subscribe.html: ${res.status()}`);
  return { page, problems, seen: () => page.evaluate(() => structuredClone(window.seen)) };
}

before(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'caddy-posts-interop-eventsource-'));
  const www = path.join(tmp, 'www');
  fs.mkdirSync(www);
  fs.writeFileSync(path.join(www, 'subscribe.html'), PAGE);
  caddy = await startCaddy({
    dir: tmp,
    caddyfile: (base) =>
      streamsCaddyfile(
        base,
        [`data_dir ${path.join(tmp, 'data')}`, `api_key ${WRITER_KEY} walt`, `sse_max_duration ${SSE_MAX_DURATION_MS / 1000}s`],
        `\thandle /subscribe.html {\n\t\troot * ${www}\n\t\tfile_server\n\t}\n`,
      ),
    ready: listsPosts,
  });
  browser = await launchChromium(path.join(tmp, 'chromium'));
});

after(async () => {
  await browser?.close();
  await stopCaddy(caddy);
  if (failures() > 0 && caddy) {
    console.error(`--- caddy's log (${failures()} test(s) failed) ---\n${caddy.log()}--- end of caddy's log ---`);
  }
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

test(`EventSource in Chromium gets every post once and in order while the server cuts its stream every ${SSE_MAX_DURATION_MS / 1000} s (Last-Event-ID)`, async (t) => {
  const { page, problems, seen } = await openPage();
  try {
    await page.evaluate(() => window.subscribe('subscription{postCreated{id title}}'));
    // Live once it has an event: probes until then (a post written before the subscription
    // joined its feed is not sent).
    const written = [];
    await until(
      async () => {
        written.push(await createPost(uniqueTitle('probe')));
        await sleep(100);
        return (await seen()).events.length > 0;
      },
      10_000,
      'the first event on the page',
      async () => JSON.stringify(await seen()),
    );
    const started = Date.now();
    for (let n = 1; n <= POSTS; n++) {
      written.push(await createPost(uniqueTitle(`post ${n}`)));
      await sleep(WRITE_EVERY_MS);
    }
    const writing = Date.now() - started;
    const last = written.at(-1).id;
    await until(
      async () => (await seen()).events.some((e) => e.result.data?.postCreated?.id === last),
      15_000,
      'the last post on the page',
      async () => JSON.stringify(await seen()),
    );
    await sleep(200); // anything sent twice at the end shows too
    const { opens, errors, completes, events } = await seen();

    for (const e of events) {
      const { rest, cursor } = splitEvent(e.result);
      assert.equal(e.id, cursor, "an event's id (EventSource's lastEventId) is its cursor");
      assert.deepEqual(Object.keys(rest.data.postCreated), ['id', 'title']);
    }
    const got = events.map((e) => e.result.data.postCreated.id);
    const ids = written.map((p) => p.id);
    const first = ids.indexOf(got[0]);
    assert.ok(first >= 0 && first < ids.length - POSTS, `the first event, ${got[0]}, is one of the probes`);
    const want = ids.slice(first);
    const missing = want.filter((id) => !got.includes(id));
    const twice = got.filter((id, i) => got.indexOf(id) !== i);
    assert.deepEqual(
      got,
      want,
      `every post from the first seen, once and in order: missing ${missing.length}, twice ${twice.length}`,
    );
    // Each cut ends the response with no complete: EventSource reconnects after its delay.
    assert.ok(opens >= 3, `the page connected ${opens} times in ${writing}ms of writes; want several reconnects`);
    // (The last cut may have come, its reconnect not yet.)
    assert.ok(errors === opens - 1 || errors === opens, `one error (the cut) before each reconnect: ${errors} errors, ${opens} opens`);
    assert.equal(completes, 0, 'a cut is not the end of the subscription');
    assert.notEqual(await page.evaluate(() => window.source.readyState), 2, 'the EventSource is open or reconnecting');
    assert.deepEqual(problems, []);
    t.diagnostic(`${got.length} events (${POSTS} posts written in ${writing}ms), ${opens} connections`);
  } finally {
    await page.close();
  }
});

test('EventSource in Chromium: a document the server refuses is one event with its errors, then complete, on which the page closes the EventSource', async () => {
  const { page, problems, seen } = await openPage();
  try {
    await page.evaluate(() => window.subscribe('subscription{postCreated{nosuchfield}}'));
    await until(async () => (await seen()).completes > 0, 10_000, 'complete', async () => JSON.stringify(await seen()));
    const { opens, completes, events } = await seen();
    assert.equal(events.length, 1, JSON.stringify(events));
    assert.equal(events[0].id, '', 'no id: no event of the log');
    assert.deepEqual(Object.keys(events[0].result), ['errors']);
    assert.equal(events[0].result.errors[0].extensions?.code, 'GRAPHQL_VALIDATION_FAILED', JSON.stringify(events[0].result));
    assert.equal(completes, 1);
    assert.equal(opens, 1);
    assert.equal(await page.evaluate(() => window.source.readyState), 2, 'closed: EventSource will not reconnect');
    assert.deepEqual(problems, []);
  } finally {
    await page.close();
  }
});
