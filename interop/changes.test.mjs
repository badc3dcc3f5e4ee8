// REST's change stream (GET /posts with Accept: text/event-stream) through real EventSource
// clients, against the real ./caddy on an embedded store that ends each stream after
// sse_max_duration (2 s), reached through a TCP proxy of this test that cuts connections (both
// sockets destroyed, new connections refused for a while):
//   - Chromium's own EventSource (headless, through puppeteer-core on Debian's chromium) running
//     the documentation's ```js block of "Changes as a stream" (docs/rest.md) as written, as the
//     module script of a page the site serves, loaded through the proxy: it reads alice's posts,
//     then streams her changes from the read's Posts-Cursor into a Map.
//   - The eventsource package in Node, the same read then stream, with writes between the two.
// Meanwhile Node writes over REST, one write after the other (creates, merge-patches, deletes;
// bob's among them, which the userId filter leaves out); the server ends the stream at least
// once and the proxy cuts it twice. Each client's Map must end equal to the store's list, and its
// events must be the writes after its read, each once and in order, across the reconnects
// (Last-Event-ID, which wins over the URL's lastEventID). Then, with fetch: the userId filter,
// replayed and live; the refusals, 400 with a JSON error (a lastEventID or Last-Event-ID that is
// no cursor, lastEventID without Accept: text/event-stream); and Chromium's EventSource and the
// package's, refused, stop rather than reconnect. Run with `make interop`, or `node --test
// changes.test.mjs` in interop/.
import { before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { EventSource } from 'eventsource';
import { ROOT, countingTest, launchChromium, listsPosts, sleep, startCaddy, stopCaddy } from './lib.mjs';
import { cuttingProxy, restAs, streamsCaddyfile, uniqueTitle, until, within } from './streams.mjs';

const KEYS = { alice: 'interop-changes-key-of-alice', bob: 'interop-changes-key-of-bob', carol: 'interop-changes-key-of-carol' };
const WRITES = 100; // the writes of a scenario at least (the cuts and reconnects make it some 150)
const WRITE_EVERY_MS = 80; // the pause between two writes
const MAX_OWN = 12; // a writer's live posts at most, so that a read's first page (20) shows them all
const GAP_WRITES = 6; // writes between the eventsource package's read and its stream
const SSE_MAX_DURATION_MS = 2000;
const RECONNECT_MS = 3000; // EventSource's delay before it reconnects (the server sends no retry:)
const CURSOR = /^[A-Za-z0-9_-]{23}$/;

let tmp; // the scratch directory: Caddyfile, data, Caddy's home, the page, Chromium's profile
let caddy; // { child, exited, log(), base }
let browser;
let as; // each user's REST calls (restAs), by name
const proxies = []; // every cutting proxy, closed after the tests

const { test, failures } = countingTest();

// --- helpers ------------------------------------------------------------------------------------

/**
 * The ```js block of docs/rest.md's "Changes as a stream", dedented (it sits in a list item, where
 * lib.mjs's docBlocks does not look).
 */
function changesSnippet() {
  const doc = fs.readFileSync(path.join(ROOT, 'docs/rest.md'), 'utf8');
  const section = doc.split(/^## /m).find((s) => s.startsWith('Changes as a stream\n'));
  assert.ok(section, 'docs/rest.md has a section "Changes as a stream"');
  const blocks = [...section.matchAll(/^( *)```js\n([\s\S]*?)^\1```$/gm)];
  assert.equal(blocks.length, 1, 'the section has one ```js block');
  const [, indent, text] = blocks[0];
  return text.replace(new RegExp(`^${indent}`, 'gm'), '');
}

/**
 * The page: the snippet as its module script (where the snippet's top-level await is allowed),
 * then what the test reads in window.seen: when the snippet's read ran (fetch timed), and what
 * record() keeps of its EventSource. view and changes are the snippet's own.
 */
function page(snippet) {
  assert.ok(!snippet.includes('</script'), 'the snippet fits in a script element');
  return `<!doctype html>
<meta charset="utf-8">
<title>Changes</title>
<script>
window.seen = { read: null, opens: 0, errors: 0, events: [] };
const fetchOfPage = window.fetch;
window.fetch = async (...args) => {
  const start = Date.now();
  const res = await fetchOfPage(...args);
  seen.read = { start, end: Date.now() };
  return res;
};
</script>
<script type="module">
${snippet}
window.view = view;
window.changes = changes;
(${record})(changes, seen);
</script>
`;
}

/**
 * Keeps in seen what changes (an EventSource) does: its opens, its errors, and each change event
 * as { type, id (its lastEventId), post, version }. The page runs it too (its source).
 */
function record(changes, seen) {
  changes.addEventListener('open', () => seen.opens++);
  changes.addEventListener('error', () => seen.errors++);
  for (const type of ['created', 'updated', 'deleted']) {
    changes.addEventListener(type, (e) => {
      const p = JSON.parse(e.data);
      seen.events.push({ type, id: e.lastEventId, post: p.id, version: p.version ?? null });
    });
  }
}

/**
 * Writes until stop(), one write after the other (so the order written is the log's), pausing
 * WRITE_EVERY_MS between two: three of every four as main, the fourth as other, each a create,
 * a merge-patch of the title or a delete of one of that user's posts (main keeps at most MAX_OWN,
 * other 3). writes lists them as { user, type, post, version, start, end } (the event each must
 * bring, and when it was sent and answered, by Date.now()); error is the first write that failed.
 * stop() resolves with writes, or fails with error.
 */
function startWriter(main, other) {
  const live = { [main]: [], [other]: [] };
  const writer = { writes: [], error: null };
  let stopping = false;
  async function write(user, cap) {
    const { createPost, patchPost, deletePost } = as[user];
    const own = live[user];
    const r = Math.random();
    const start = Date.now();
    let change;
    if (own.length === 0 || (own.length < cap && r < 0.4)) {
      const post = await createPost(uniqueTitle(`${user}'s post`), 'written while a change stream listens');
      own.push(post.id);
      change = { type: 'created', post: post.id, version: post.version };
    } else {
      const i = Math.floor(Math.random() * own.length);
      if (r < 0.75) {
        const post = await patchPost(own[i], uniqueTitle(`${user}'s post, edited`));
        change = { type: 'updated', post: post.id, version: post.version };
      } else {
        await deletePost(own[i]);
        change = { type: 'deleted', post: own.splice(i, 1)[0], version: null };
      }
    }
    writer.writes.push({ user, ...change, start, end: Date.now() });
  }
  const done = (async () => {
    for (let n = 1; !stopping; n++) {
      await (n % 4 === 0 ? write(other, 3) : write(main, MAX_OWN));
      await sleep(WRITE_EVERY_MS);
    }
  })();
  done.catch((err) => (writer.error = err));
  writer.stop = async () => {
    stopping = true;
    await done;
    return writer.writes;
  };
  return writer;
}

/** Fails with the writer's error, if a write failed; else how many writes were answered. */
function written(writer) {
  if (writer.error) throw writer.error;
  return writer.writes.length;
}

/**
 * While writer writes, cuts proxy twice, each time once state() (the client's { opens,
 * readyState }) says its stream is open on a connection made since the end before: the first
 * after a third of WRITES, and after the server ended a stream (sse_max_duration); the second,
 * which lasts until the client has tried to connect and been refused, after two thirds. Then
 * stops the writer once it has written WRITES, and 10 after the second cut; resolves with the
 * writes.
 */
async function cutTwice(t, { proxy, writer, state }) {
  await until(
    () => {
      written(writer);
      return proxy.endedByServer > 0;
    },
    30_000, `the server's end of a stream after ${SSE_MAX_DURATION_MS}ms`);
  let opens = (await state()).opens;
  for (const [n, share] of [[1, 1 / 3], [2, 2 / 3]]) {
    await until(
      async () => {
        const s = await state();
        if (written(writer) < WRITES * share || s.readyState !== 1 || s.opens <= opens) return false;
        opens = s.opens;
        return true;
      },
      30_000,
      `the stream open again before cut ${n}`,
      async () => JSON.stringify(await state()),
    );
    const from = written(writer);
    const ms = await proxy.cut(1000 + Math.round(Math.random() * 500), { untilRefused: n === 2 });
    t.diagnostic(`cut ${n}: ${ms}ms${n === 2 ? ', until a connection was refused' : ''}, ${written(writer) - from} writes meanwhile`);
  }
  const enough = Math.max(WRITES, written(writer) + 10);
  await until(() => written(writer) >= enough, 30_000, `${enough} writes`);
  return writer.stop();
}

/** The change a write brings or an event is, shown: "updated <id> v3". */
const show = (c) => `${c.type} ${c.post} v${c.version ?? '-'}`;

/** Waits until events (an async function answering them) hold the last write of user. */
async function untilLast(events, writes, user) {
  const last = show(writes.filter((w) => w.user === user).at(-1));
  await until(
    async () => (await events()).some((e) => show(e) === last),
    30_000,
    `the last write of ${user} (${last}) as an event`,
    async () => `events: ${(await events()).map(show).join(', ')}`,
  );
  await sleep(300); // anything sent twice at the end shows too
}

/**
 * Asserts that events, of a stream of user's changes from the cursor of a read made between
 * read.start and read.end, are the writes of user after the read, each once and in order: ids
 * that are cursors, each its own; per post, versions that increase and nothing after its delete;
 * the writes from the first seen on, none missing, none twice, and that first one neither a write
 * answered before the read began nor later than the first sent after it was answered.
 */
function assertEveryChangeOnce(events, writes, user, read) {
  assert.ok(read, 'the read was timed');
  assert.ok(events.length > 0, 'events came');
  for (const e of events) assert.match(e.id, CURSOR, `an event's id is its cursor: ${show(e)} has ${JSON.stringify(e.id)}`);
  assert.equal(new Set(events.map((e) => e.id)).size, events.length, "each event's id is its own");
  const last = new Map(); // post → its last version seen, or 'deleted'
  for (const e of events) {
    const before = last.get(e.post);
    assert.notEqual(before, 'deleted', `${show(e)} after the post's delete`);
    if (e.type === 'deleted') {
      last.set(e.post, 'deleted');
      continue;
    }
    assert.ok(before === undefined || e.version > before, `${show(e)} after version ${before}: a post's versions increase`);
    if (e.type === 'created') assert.ok(before === undefined && e.version === 1, `${show(e)}: a post is created once, at version 1`);
    last.set(e.post, e.version);
  }

  const mine = writes.filter((w) => w.user === user);
  const want = mine.map(show);
  const got = events.map(show);
  const first = want.indexOf(got[0]);
  assert.ok(first >= 0, `the first event, ${got[0]}, is a write of ${user}`);
  const answeredBefore = mine.filter((w) => w.end < read.start).length; // the writes are in order
  const sentAfter = mine.findIndex((w) => w.start > read.end);
  assert.ok(
    answeredBefore <= first && (sentAfter < 0 || first <= sentAfter),
    `the stream starts with the write ${first + 1} of ${user}; the read holds the first ${answeredBefore} and ` +
      `the stream must bring ${sentAfter < 0 ? 'none' : `those from the write ${sentAfter + 1}`} on`,
  );
  const missing = want.slice(first).filter((c) => !got.includes(c));
  const twice = got.filter((c, i) => got.indexOf(c) !== i);
  const others = got.filter((c) => !want.includes(c));
  assert.deepEqual(
    got,
    want.slice(first),
    `every write of ${user} from the first seen, once and in order: missing ${missing.join(', ') || 'none'}; ` +
      `twice ${twice.join(', ') || 'none'}; not ${user}'s writes ${others.join(', ') || 'none'}`,
  );
}

/** The store's list of user's posts, read afresh (following Link past each page). */
async function storeList(user) {
  const posts = [];
  for (let next = `/posts?userId=${user}&limit=100`; next; ) {
    const res = await fetch(caddy.base + next);
    const text = await res.text();
    assert.equal(res.status, 200, `GET ${next}: ${text}`);
    posts.push(...JSON.parse(text));
    next = /<([^>]+)>;\s*rel="next"/.exec(res.headers.get('Link') ?? '')?.[1];
  }
  return posts;
}

/** What differs between a client's view (id → post) and the store's list, one line each. */
function differences(view, store) {
  const found = [];
  const want = new Map(store.map((p) => [p.id, p]));
  for (const [id, post] of want) {
    const shown = view.get(id);
    if (!shown) found.push(`missing ${id} (version ${post.version})`);
    else if (!isDeepStrictEqual(shown, post)) found.push(`stale ${id}: ${JSON.stringify(shown)}, the store's ${JSON.stringify(post)}`);
  }
  for (const [id, shown] of view) if (!want.has(id)) found.push(`extra ${id} (version ${shown.version})`);
  return found;
}

/** Asserts what a client's EventSource did across the cuts: it reconnected after each. */
function assertReconnected({ opens, errors, readyState }, proxy) {
  // The server's end after sse_max_duration and two cuts of the proxy, each while it was open:
  // each ends in an error, and an open once it is back (refused attempts are errors too).
  assert.ok(proxy.endedByServer >= 1, 'the server ended a stream (sse_max_duration)');
  assert.ok(opens >= 4, `the client connected ${opens} times; want one, and one after the server's end and each cut`);
  assert.ok(errors >= opens - 1, `an error before each reconnect: ${errors} errors, ${opens} opens`);
  assert.ok(proxy.refused >= 1, 'the client tried to connect while the proxy was down, and went on after it was refused');
  assert.notEqual(readyState, 2, 'the EventSource is open or reconnecting');
}

/**
 * The events of a change stream as fetch reads it, one { event, id, data } at a time (a
 * comment is none).
 */
async function* serverSentEvents(res) {
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of res.body) {
    buffer += decoder.decode(chunk, { stream: true }).replaceAll('\r\n', '\n');
    for (let end; (end = buffer.indexOf('\n\n')) >= 0; ) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const e = { event: 'message', id: '', data: [] };
      for (const line of block.split('\n')) {
        const [, field, value] = /^([^:]*):? ?(.*)$/.exec(line);
        if (field === 'event') e.event = value;
        else if (field === 'id') e.id = value;
        else if (field === 'data') e.data.push(value);
      }
      if (e.data.length > 0) yield { ...e, data: JSON.parse(e.data.join('\n')) };
    }
  }
}

/**
 * Follows the change stream of route (GET /posts?… with its filters) from cursor with fetch, as
 * EventSource does: again with the last event's id as Last-Event-ID after each end (the server
 * ends it after sse_max_duration), until isLast(event). Returns { events, done, stop() }: done
 * resolves with how many connections it took; stop() ends it.
 */
function follow(route, cursor, isLast) {
  const events = [];
  const controller = new AbortController();
  const done = (async () => {
    for (let connections = 1; ; connections++) {
      const last = events.at(-1)?.id;
      const url = `${route}&lastEventID=${encodeURIComponent(cursor)}`;
      const res = await stream(url, last ? { 'Last-Event-ID': last } : {}, controller.signal);
      assert.equal(res.status, 200, `GET ${url}: ${res.status}`);
      assert.match(res.headers.get('Content-Type') ?? '', /^text\/event-stream/);
      for await (const e of serverSentEvents(res)) {
        events.push(e);
        if (isLast(e)) return connections;
      }
    }
  })();
  done.catch(() => {}); // awaited by the test, or ended by stop()
  return { events, done, stop: () => controller.abort() };
}

/** GET route with Accept: text/event-stream and the headers given; answers the response. */
function stream(route, headers = {}, signal = undefined) {
  return fetch(caddy.base + route, { headers: { Accept: 'text/event-stream', ...headers }, signal });
}

/** Asserts that res is a refusal: status, and a JSON body { error } with a message. */
async function assertRefused(res, status, what) {
  const text = await res.text();
  assert.equal(res.status, status, `${what}: ${text}`);
  assert.match(res.headers.get('Content-Type') ?? '', /^application\/json/, `${what}: its Content-Type`);
  const body = JSON.parse(text);
  assert.equal(typeof body.error, 'string', `${what}: ${text}`);
  return body.error;
}

/** The Posts-Cursor of a read of route. */
async function readCursor(route) {
  const res = await fetch(caddy.base + route);
  await res.arrayBuffer();
  assert.equal(res.status, 200, `GET ${route}`);
  const cursor = res.headers.get('Posts-Cursor');
  assert.match(cursor ?? '', CURSOR, `GET ${route}: its Posts-Cursor`);
  return cursor;
}

// --- setup --------------------------------------------------------------------------------------

before(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'caddy-posts-interop-changes-'));
  const www = path.join(tmp, 'www');
  fs.mkdirSync(path.join(www, 'pages'), { recursive: true });
  fs.writeFileSync(path.join(www, 'pages', 'changes.html'), page(changesSnippet()));
  fs.writeFileSync(path.join(www, 'pages', 'blank.html'), '<!doctype html>\n<meta charset="utf-8">\n<title>Blank</title>\n');
  caddy = await startCaddy({
    dir: tmp,
    caddyfile: (base) =>
      streamsCaddyfile(
        base,
        [
          `data_dir ${path.join(tmp, 'data')}`,
          ...Object.entries(KEYS).map(([user, key]) => `api_key ${key} ${user}`),
          `sse_max_duration ${SSE_MAX_DURATION_MS / 1000}s`,
        ],
        `\thandle /pages/* {\n\t\troot * ${www}\n\t\tfile_server\n\t}\n`,
      ),
    ready: listsPosts,
  });
  as = Object.fromEntries(Object.entries(KEYS).map(([user, key]) => [user, restAs(caddy.base, key)]));
  browser = await launchChromium(path.join(tmp, 'chromium'));
});

after(async () => {
  await browser?.close();
  for (const proxy of proxies) await proxy.close();
  await stopCaddy(caddy);
  if (failures() > 0 && caddy) {
    console.error(`--- caddy's log (${failures()} test(s) failed) ---\n${caddy.log()}--- end of caddy's log ---`);
  }
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

// --- the tests ----------------------------------------------------------------------------------

test("Chromium's EventSource running the documentation's snippet through a proxy that cuts it ends with the store's list, every change once and in order", async (t) => {
  const snippet = changesSnippet();
  assert.equal(snippet.split('userId=alice').length, 3, "the snippet reads and streams alice's posts");
  const proxy = await cuttingProxy(Number(new URL(caddy.base).port));
  proxies.push(proxy);
  const tab = await browser.newPage();
  const problems = [];
  tab.on('pageerror', (err) => problems.push(`page error: ${err.message ?? err}`));
  await tab.setCacheEnabled(false);
  const seen = () => tab.evaluate(() => ({ ...structuredClone(window.seen), readyState: window.changes?.readyState }));
  // Writes from before the page loads: some fall between the snippet's read and its stream.
  const writer = startWriter('alice', 'bob');
  try {
    const res = await tab.goto(`${proxy.base}/pages/changes.html`, { waitUntil: 'load', timeout: 15_000 });
    assert.equal(res.status(), 200, `GET /pages/changes.html: ${res.status()}`);
    await until(async () => (await seen()).opens > 0 || problems.length > 0, 15_000, "the snippet's stream open", seen);
    assert.deepEqual(problems, []);
    const writes = await cutTwice(t, { proxy, writer, state: seen });
    await untilLast(async () => (await seen()).events, writes, 'alice');
    const state = await seen();
    const view = new Map(await tab.evaluate(() => [...window.view]));

    assertEveryChangeOnce(state.events, writes, 'alice', state.read);
    assert.deepEqual(differences(view, await storeList('alice')), [], "the page's Map is the store's list of alice's posts");
    assertReconnected(state, proxy);
    assert.deepEqual(problems, []);
    t.diagnostic(
      `${state.events.length} events of ${writes.length} writes (alice's ${writes.filter((w) => w.user === 'alice').length}), ` +
        `${state.opens} opens, ${state.errors} errors, ${proxy.accepted} connections through the proxy, ${proxy.endedByServer} ended by the server, ${proxy.refused} refused`,
    );
  } finally {
    await writer.stop().catch(() => {});
    await tab.close();
    await proxy.close();
  }
});

test("the eventsource package reads, streams from the read's Posts-Cursor after more writes, through a proxy that cuts it, and ends with the store's list, every change once and in order", async (t) => {
  const proxy = await cuttingProxy(Number(new URL(caddy.base).port));
  proxies.push(proxy);
  const writer = startWriter('carol', 'bob');
  const seen = { opens: 0, errors: 0, events: [] };
  let changes;
  try {
    await until(() => written(writer) >= GAP_WRITES, 10_000, 'writes before the read');
    const read = { start: Date.now() };
    const res = await fetch(`${proxy.base}/posts?userId=carol`);
    read.end = Date.now();
    const view = new Map((await res.json()).map((p) => [p.id, p]));
    const cursor = res.headers.get('Posts-Cursor');
    assert.match(cursor ?? '', CURSOR, "the read's Posts-Cursor");
    const atRead = written(writer);
    await until(() => written(writer) >= atRead + GAP_WRITES, 10_000, 'writes between the read and the stream');
    const streamed = Date.now();
    changes = new EventSource(`${proxy.base}/posts?userId=carol&lastEventID=${encodeURIComponent(cursor)}`);
    for (const kind of ['created', 'updated']) {
      changes.addEventListener(kind, (e) => {
        const p = JSON.parse(e.data);
        view.set(p.id, p);
      });
    }
    changes.addEventListener('deleted', (e) => view.delete(JSON.parse(e.data).id));
    record(changes, seen);
    const state = async () => ({ ...seen, readyState: changes.readyState });
    const writes = await cutTwice(t, { proxy, writer, state });
    await untilLast(async () => seen.events, writes, 'carol');

    assertEveryChangeOnce(seen.events, writes, 'carol', read);
    assert.deepEqual(differences(view, await storeList('carol')), [], "the client's Map is the store's list of carol's posts");
    assertReconnected(await state(), proxy);
    const gap = writes.filter((w) => w.user === 'carol' && w.start > read.end && w.end < streamed);
    assert.ok(gap.length > 0, "carol wrote between the read and the stream's start");
    t.diagnostic(
      `${seen.events.length} events of ${writes.length} writes (carol's ${writes.filter((w) => w.user === 'carol').length}, ` +
        `${gap.length} between the read and the stream), ${seen.opens} opens, ${seen.errors} errors, ` +
        `${proxy.accepted} connections through the proxy, ${proxy.endedByServer} ended by the server, ${proxy.refused} refused`,
    );
  } finally {
    changes?.close();
    await writer.stop().catch(() => {});
    await proxy.close();
  }
});

test("userId keeps the stream to that user's changes, replayed from a read's cursor and live, each post as its write answered it", async () => {
  const cursor = await readCursor('/posts?userId=bob');
  const changesOf = async (user) => {
    const created = await as[user].createPost(uniqueTitle(`${user}'s filtered post`));
    const updated = await as[user].patchPost(created.id, uniqueTitle(`${user}'s filtered post, edited`));
    return { created, updated };
  };
  // Before the stream: replayed from the cursor.
  const replayed = { alice: await changesOf('alice'), bob: await changesOf('bob') };
  const changes = follow('/posts?userId=bob', cursor, (e) => e.event === 'deleted');
  let live;
  try {
    await until(() => changes.events.length >= 2, 10_000, "bob's replayed changes", () => JSON.stringify(changes.events));
    // While it streams: live.
    live = { alice: await changesOf('alice'), bob: await changesOf('bob') };
    for (const user of ['alice', 'bob']) await as[user].deletePost(live[user].created.id);
    await within(changes.done, 10_000, "bob's delete");
  } finally {
    changes.stop();
  }
  const got = changes.events;
  for (const e of got) assert.match(e.id, CURSOR, `an event's id is its cursor: ${JSON.stringify(e)}`);
  assert.deepEqual(
    got.map(({ event, data }) => ({ event, data })),
    [
      { event: 'created', data: replayed.bob.created },
      { event: 'updated', data: replayed.bob.updated },
      { event: 'created', data: live.bob.created },
      { event: 'updated', data: live.bob.updated },
      { event: 'deleted', data: { id: live.bob.created.id } },
    ],
    "bob's changes alone, in order, each post as its write answered it",
  );
  const bobsOwn = await fetch(`${caddy.base}/posts/${replayed.bob.updated.id}`).then((r) => r.json());
  assert.deepEqual(bobsOwn, replayed.bob.updated, 'GET /posts/{id} shows the post as the PATCH answered it');
});

test('a lastEventID or Last-Event-ID that is no cursor is 400 with a JSON error, before anything is sent, and the header wins over the parameter', async () => {
  const cursor = await readCursor('/posts');
  // One character changed: the signature no longer matches.
  const forged = cursor.slice(0, 5) + (cursor[5] === 'A' ? 'B' : 'A') + cursor.slice(6);
  for (const [what, route, headers] of [
    ['a lastEventID of no cursor', '/posts?lastEventID=nonsense', {}],
    ['a forged lastEventID', `/posts?lastEventID=${forged}`, {}],
    ['an empty lastEventID', '/posts?lastEventID=', {}],
    ['a Last-Event-ID of no cursor', '/posts', { 'Last-Event-ID': 'nonsense' }],
    ['a bad Last-Event-ID beside a good lastEventID', `/posts?lastEventID=${cursor}`, { 'Last-Event-ID': forged }],
  ]) {
    await assertRefused(await stream(route, headers), 400, what);
  }
  // A good Last-Event-ID beside a bad lastEventID: the header wins, and the stream starts.
  const controller = new AbortController();
  const res = await stream('/posts?lastEventID=nonsense', { 'Last-Event-ID': cursor }, controller.signal);
  controller.abort();
  assert.equal(res.status, 200, 'a good Last-Event-ID wins over a bad lastEventID');
});

test('lastEventID on a GET /posts without Accept: text/event-stream is 400 with a JSON error', async () => {
  const cursor = await readCursor('/posts');
  const error = await assertRefused(await fetch(`${caddy.base}/posts?lastEventID=${cursor}`), 400, 'lastEventID on a JSON read');
  assert.match(error, /lastEventID/, 'the error names the parameter');
});

test("EventSource, Chromium's and the eventsource package's, refused 400 for a lastEventID that is no cursor, stops: closed, and no reconnect", async () => {
  const tab = await browser.newPage();
  const chromiumRequests = [];
  tab.on('request', (req) => {
    if (new URL(req.url()).pathname === '/posts') chromiumRequests.push(req.url());
  });
  let requests = 0;
  const changes = new EventSource(`${caddy.base}/posts?lastEventID=nonsense`, {
    fetch: (input, init) => {
      requests++;
      return fetch(input, init);
    },
  });
  const failed = new Promise((resolve) => changes.addEventListener('error', resolve, { once: true }));
  try {
    const res = await tab.goto(`${caddy.base}/pages/blank.html`, { waitUntil: 'load', timeout: 15_000 });
    assert.equal(res.status(), 200, `GET /pages/blank.html: ${res.status()}`);
    const chromiumState = await tab.evaluate(
      () =>
        new Promise((resolve) => {
          const source = new EventSource('/posts?lastEventID=nonsense');
          source.addEventListener('error', () => resolve(source.readyState), { once: true });
        }),
    );
    assert.equal(chromiumState, 2, "Chromium's: closed, not reconnecting");
    const error = await within(failed, 10_000, "the eventsource package's error");
    assert.equal(error.code, 400, `the eventsource package's error has the status: ${error.message}`);
    assert.equal(changes.readyState, EventSource.CLOSED, "the eventsource package's: closed, not reconnecting");
    await sleep(RECONNECT_MS + 500); // a reconnect would have come by now
    assert.equal(chromiumRequests.length, 1, `Chromium's: one request, no reconnect: ${chromiumRequests.join(', ')}`);
    assert.equal(requests, 1, "the eventsource package's: one request, no reconnect");
  } finally {
    changes.close();
    await tab.close();
  }
});
