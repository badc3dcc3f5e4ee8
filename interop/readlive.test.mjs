// From a read to live with nothing missed: clients read the list of posts, then subscribe to
// postCreated, postUpdated and postDeleted from the read's cursor and apply each event to what
// they read, while alice writes over REST about WRITES_PER_SECOND times a second (creates,
// merge-patches of titles, deletes) against the real ./caddy on an embedded store. Each client's
// view (ids, titles, versions) must end equal to the store's list, read afresh once the writes
// stopped. The clients:
//   - Apollo Client 4 with React: the documentation's ```jsx block of "From a read to live"
//     (useQuery, three subscribeToMore, the link that hands the query's cursor to the
//     subscriptions), compiled as a bundler would (sucrase) and rendered with react-dom into a
//     happy-dom document in this process; its view is the list it renders. Its subscriptions'
//     WebSocket goes through a proxy of this test that holds the connection while alice changes a
//     post the read showed, creates one and deletes another: only a resume from the read's cursor
//     brings those.
//   - graphql-ws alone: one client reads with GET /posts (Posts-Cursor), one with a GraphQL query
//     (extensions.cursor); between the read and the subscriptions, the same three changes of
//     alice's, and each must see every event once and in order (each post's versions one by one).
//   - The control: the same steps as the second, without resumeFrom. It must show the three
//     changes as differences (and shows whatever else it missed), or the check proves nothing.
import { before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { ApolloProvider } from '@apollo/client/react';
import { createClient } from 'graphql-ws';
import { Window } from 'happy-dom';
import { createElement } from 'react';
import { createRoot } from 'react-dom/client';
import { transform } from 'sucrase';
import WebSocket from 'ws';
import { countingTest, docBlocks, listsPosts, postsCaddyfile, sleep, startCaddy, stopCaddy } from './lib.mjs';
import { restAs, until } from './streams.mjs';

const WRITES_PER_SECOND = 50;
const WRITE_FOR_MS = 5000;
const MAX_IN_FLIGHT = 8; // the writer's requests at once, past which a tick writes nothing
const MAX_OWN = 40; // the writer's live posts at most, so that the store's list fits in LIMIT
const LIMIT = 100; // the snippet's posts(limit: 100), and the REST read's limit
const GAP_MS = 300; // more of the writer's writes between a client's read and its subscriptions
const SETTLE_MS = 15_000; // how long a client may take to show the store's list after the writes
const CURSOR = /^[A-Za-z0-9_-]{23}$/;
const KEY = 'dev-key'; // alice's

const LIST_QUERY = 'query Posts { posts(limit: 100) { id title version } }';
const SUBSCRIPTIONS = [
  'subscription { postCreated { id title version } }',
  'subscription { postUpdated { id title version } }',
  'subscription { postDeleted }',
];

let tmp; // the scratch directory: Caddyfile, data, Caddy's home, the reader's directory
let caddy; // { child, exited, log(), base }
let rest, createPost, patchPost, deletePost; // alice's REST calls (restAs)

const { test, failures } = countingTest();

// --- helpers ------------------------------------------------------------------------------------

/** A view of posts, id → { title, version }, from posts of REST or GraphQL. */
const viewOf = (posts) => new Map(posts.map(({ id, title, version }) => [id, { title, version }]));

/** The store's list, read afresh over REST; it must fit in one read of LIMIT. */
async function storeList() {
  const res = await rest('GET', `/posts?limit=${LIMIT}`);
  assert.equal(res.status, 200, `GET /posts: ${res.text}`);
  assert.ok(res.body.length < LIMIT, `the store holds ${res.body.length} posts: the clients' lists would be cut at ${LIMIT}`);
  return res.body;
}

/** What differs between a client's view and the store's list, one line each; [] when nothing. */
function differences(view, store) {
  const found = [];
  const want = viewOf(store);
  for (const [id, post] of want) {
    const shown = view.get(id);
    if (!shown) found.push(`missing ${id} (version ${post.version})`);
    else if (shown.version !== post.version || shown.title !== post.title) {
      const [was, is] = [shown, post].map((q) => `version ${q.version} ${JSON.stringify(q.title)}`);
      found.push(`stale ${id}: ${was}, the store's ${is}`);
    }
  }
  for (const [id, shown] of view) if (!want.has(id)) found.push(`extra ${id} (version ${shown.version})`);
  return found;
}

/** Deletes every post of the store, so that the next test starts from an empty list. */
async function deleteAll() {
  for (const post of await storeList()) await deletePost(post.id);
}

/**
 * Writes as alice until stop(): a tick every 1000/WRITES_PER_SECOND ms starts a create, a
 * merge-patch or a delete of one of the writer's own posts (none of them written twice at once),
 * unless MAX_IN_FLIGHT are under way. stop() waits for those and fails with the first write that
 * failed; written() is how many have been answered, done() says what was written in how long.
 */
function startWriter() {
  const own = []; // the writer's posts, as last written, but those being written to
  const counts = { create: 0, update: 0, delete: 0 };
  const pending = new Set();
  const errors = [];
  let created = 0;
  async function write() {
    const r = Math.random();
    const kind = own.length < 10 ? 'create' : own.length >= MAX_OWN ? 'delete' : r < 0.4 ? 'create' : r < 0.75 ? 'update' : 'delete';
    if (kind === 'create') {
      own.push(await createPost(`live ${++created}`, 'written while a client reads and goes live'));
    } else {
      const [post] = own.splice(Math.floor(Math.random() * own.length), 1);
      if (kind === 'update') own.push(await patchPost(post.id, `live ${post.title.split(' ')[1]} edit ${post.version}`));
      else await deletePost(post.id);
    }
    counts[kind]++;
  }
  const timer = setInterval(() => {
    if (pending.size >= MAX_IN_FLIGHT) return;
    const p = write()
      .catch((err) => errors.push(err))
      .finally(() => pending.delete(p));
    pending.add(p);
  }, 1000 / WRITES_PER_SECOND);
  const writer = {
    started: Date.now(),
    written: () => counts.create + counts.update + counts.delete,
    done: () => `${JSON.stringify(counts)} in ${((writer.stopped - writer.started) / 1000).toFixed(1)}s`,
    async stop() {
      clearInterval(timer);
      await Promise.all(pending);
      writer.stopped ??= Date.now();
      if (errors.length > 0) throw errors[0];
      return counts;
    },
  };
  return writer;
}

/** Two posts of alice's that only gapWrites touches: one it changes, one it deletes. */
async function reserve(what) {
  return { change: await createPost(`${what}: changed after the read`), remove: await createPost(`${what}: deleted after the read`) };
}

/**
 * The three changes made after a client's read and before its subscriptions, one after the
 * other: reserved.change patched, a post created, reserved.remove deleted. Resolves with
 * { changed, created, removed } (removed, the id), and the differences a client that missed them
 * shows.
 */
async function gapWrites(what, reserved) {
  const changed = await patchPost(reserved.change.id, `${what}: changed after the read, before the subscriptions`);
  const created = await createPost(`${what}: created after the read, before the subscriptions`);
  await deletePost(reserved.remove.id);
  const removed = reserved.remove.id;
  const missed = [`stale ${changed.id}:`, `missing ${created.id} `, `extra ${removed} `];
  return { changed, created, removed, missed };
}

/** Whether every line of missed begins a line of found. */
const showsAll = (found, missed) => missed.every((m) => found.some((line) => line.startsWith(m)));

/**
 * A TCP proxy on 127.0.0.1 to target (a port) that holds each connection until hold() (awaited
 * once per connection, before a byte goes through) resolves. accepted counts connections.
 */
async function holdingProxy(target, hold) {
  const sockets = new Set();
  const proxy = { accepted: 0, errors: [] };
  const server = net.createServer(async (client) => {
    proxy.accepted++;
    sockets.add(client);
    client.on('error', () => {}).on('close', () => sockets.delete(client));
    try {
      await hold();
    } catch (err) {
      proxy.errors.push(err);
      client.destroy();
      return;
    }
    if (client.destroyed) return;
    const upstream = net.connect(target, '127.0.0.1');
    sockets.add(upstream);
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    upstream.on('error', end).on('close', () => sockets.delete(upstream));
    client.on('close', end);
    upstream.on('close', end);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  proxy.port = server.address().port;
  proxy.close = () => {
    for (const s of sockets) s.destroy();
    return new Promise((resolve) => server.close(resolve));
  };
  return proxy;
}

/** A graphql-ws client on Caddy, without retries: a closed connection must fail the test. */
const wsClient = () => createClient({ url: `${caddy.base.replace(/^http/, 'ws')}/graphql`, webSocketImpl: WebSocket, retryAttempts: 0 });

/**
 * A subscription to postDeleted without a cursor, live before it resolves (a probe post created
 * and deleted until its delete arrives): deleted has the ids of the deletes it received, which
 * the live subscribers were all handed at least as early.
 */
async function deleteWitness() {
  const client = wsClient();
  const deleted = new Set();
  const errors = [];
  client.subscribe(
    { query: SUBSCRIPTIONS[2] },
    { next: ({ data }) => deleted.add(data.postDeleted), error: (err) => errors.push(err), complete: () => {} },
  );
  for (const deadline = Date.now() + 10_000; ; ) {
    const probe = await createPost('probe of the witness');
    await deletePost(probe.id);
    for (const t = Date.now() + 300; !deleted.has(probe.id) && Date.now() < t; ) await sleep(10);
    if (deleted.has(probe.id)) break;
    assert.ok(Date.now() < deadline && errors.length === 0, `the witness is not live after 10s: ${JSON.stringify(errors)}`);
  }
  return { deleted, errors, dispose: () => client.dispose() };
}

/**
 * A graphql-ws client that reads the list (with 'rest', GET /posts and its Posts-Cursor; with
 * 'graphql', LIST_QUERY over HTTP and its extensions.cursor), makes gapWrites, waits until the
 * witness has received their delete and for GAP_MS more of the writer's writes, then subscribes
 * to SUBSCRIPTIONS (with resumeFrom the read's cursor when resume) and applies each event to the
 * view of the read as the documentation's Apollo snippet does: a create adds a post not shown, an
 * update replaces a post shown, a delete removes it. anomalies lists each event that does not fit
 * the view it lands on: a create of a post shown, an update or a delete of one not shown, an
 * update whose version is not the shown one plus one.
 */
async function readThenLive({ what, read, resume, reserved, witness, writer }) {
  let posts, cursor;
  const writtenBefore = writer.written();
  if (read === 'rest') {
    const res = await fetch(`${caddy.base}/posts?limit=${LIMIT}`);
    posts = await res.json();
    assert.equal(res.status, 200, JSON.stringify(posts));
    cursor = res.headers.get('Posts-Cursor');
  } else {
    const res = await fetch(`${caddy.base}/graphql`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ query: LIST_QUERY }),
    });
    const answer = await res.json();
    assert.equal(res.status, 200, JSON.stringify(answer));
    assert.equal(answer.errors, undefined, JSON.stringify(answer));
    posts = answer.data.posts;
    cursor = answer.extensions?.cursor;
  }
  assert.match(cursor ?? '', CURSOR, `${what}: the read's cursor`);
  assert.ok(posts.length < LIMIT, `${what}: the read holds ${posts.length} posts, so it may be cut`);
  const view = viewOf(posts);
  const gap = await gapWrites(what, reserved);
  await until(() => witness.deleted.has(gap.removed), 10_000, `${what}: the witness got the delete of the gap`);
  await sleep(GAP_MS);
  const client = wsClient();
  const anomalies = [];
  const errors = [];
  let events = 0;
  const apply = ({ postCreated: created, postUpdated: updated, postDeleted: deleted }) => {
    events++;
    if (created) {
      if (view.has(created.id)) anomalies.push(`postCreated of ${created.id}, which the view shows`);
      else view.set(created.id, { title: created.title, version: created.version });
    } else if (updated) {
      const shown = view.get(updated.id);
      if (!shown) anomalies.push(`postUpdated of ${updated.id} to version ${updated.version}, which the view does not show`);
      else {
        if (updated.version !== shown.version + 1) {
          anomalies.push(`postUpdated of ${updated.id} to version ${updated.version} over ${shown.version}`);
        }
        view.set(updated.id, { title: updated.title, version: updated.version });
      }
    } else if (!view.delete(deleted)) anomalies.push(`postDeleted of ${deleted}, which the view does not show`);
  };
  for (const query of SUBSCRIPTIONS) {
    client.subscribe(resume ? { query, extensions: { resumeFrom: cursor } } : { query }, {
      next: (result) => (result.errors ? errors.push(result.errors) : apply(result.data)),
      error: (err) => errors.push(err),
      complete: () => errors.push(`${query}: completed`),
    });
  }
  const writesBetween = writer.written() - writtenBefore;
  return { what, view, gap, anomalies, errors, writesBetween, events: () => events, dispose: () => client.dispose() };
}

/** The documentation's one ```jsx block that uses subscribeToMore. */
function readToLiveSnippet() {
  const found = docBlocks('jsx').filter((b) => b.text.includes('subscribeToMore'));
  assert.equal(found.length, 1, 'the documentation has one ```jsx block with subscribeToMore');
  return found[0];
}

// --- setup --------------------------------------------------------------------------------------

before(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'caddy-posts-readlive-'));
  caddy = await startCaddy({
    dir: tmp,
    // make run's site: both host names, one site, alice's key dev-key.
    caddyfile: (base) =>
      postsCaddyfile(`${base.replace('127.0.0.1', 'localhost')}, ${base}`, [`data_dir ${path.join(tmp, 'data')}`, `api_key ${KEY} alice`]),
    ready: listsPosts,
  });
  ({ rest, createPost, patchPost, deletePost } = restAs(caddy.base, KEY));
});

after(async () => {
  await stopCaddy(caddy);
  if (failures() > 0 && caddy) {
    console.error(`--- caddy's log (${failures()} test(s) failed) ---\n${caddy.log()}--- end of caddy's log ---`);
  }
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

// --- the tests ----------------------------------------------------------------------------------

test("the documentation's Apollo component, useQuery then subscribeToMore from the query's cursor, ends showing the store's list while posts are created, changed and deleted", async (t) => {
  // The snippet, its two addresses on Caddy's port and on the proxy's, compiled as a bundler
  // would, in a reader's directory beside this package's node_modules.
  const block = readToLiveSnippet();
  const reserved = await reserve('apollo');
  let gap, held;
  const proxy = await holdingProxy(Number(new URL(caddy.base).port), async () => {
    // Only the first connection: the subscriptions'. The query has answered, and the component
    // subscribes once it has.
    if (proxy.accepted > 1) return;
    const before = writer.written();
    gap = await gapWrites('apollo', reserved);
    await sleep(GAP_MS);
    held = writer.written() - before;
  });
  for (const address of ['ws://localhost:8080', 'http://localhost:8080']) {
    assert.equal(block.text.split(address).length, 2, `${block.where}: the snippet names ${address} once`);
  }
  const source = block.text
    .replace('ws://localhost:8080', `ws://localhost:${proxy.port}`)
    .replace('http://localhost:8080', `http://localhost:${new URL(caddy.base).port}`);
  const reader = fs.mkdtempSync(path.join(tmp, 'reader-'));
  fs.symlinkSync(fileURLToPath(new URL('./node_modules', import.meta.url)), path.join(reader, 'node_modules'), 'dir');
  const file = path.join(reader, 'Posts.mjs');
  fs.writeFileSync(file, transform(source, { transforms: ['jsx'], jsxRuntime: 'automatic', production: true, filePath: file }).code);

  // A browser's globals in this process: happy-dom's window, document and navigator; a WebSocket
  // (Node 20 has none) that records what the client sends; a fetch that records the query's answer.
  const win = new Window({ url: caddy.base.replace('127.0.0.1', 'localhost') });
  const globals = ['window', 'document', 'navigator', 'WebSocket', 'fetch'];
  const saved = Object.fromEntries(globals.map((k) => [k, Object.getOwnPropertyDescriptor(globalThis, k)]));
  const sent = [];
  const answers = [];
  const warned = [];
  const console0 = { error: console.error, warn: console.warn };
  const define = (k, value) => Object.defineProperty(globalThis, k, { value, configurable: true, writable: true });
  define('window', win);
  define('document', win.document);
  define('navigator', win.navigator);
  define(
    'WebSocket',
    class extends WebSocket {
      send(data, ...rest) {
        sent.push(JSON.parse(String(data)));
        return super.send(data, ...rest);
      }
    },
  );
  const realFetch = globalThis.fetch;
  define('fetch', async (input, init) => {
    const res = await realFetch(input, init);
    if (String(input.url ?? input).endsWith('/graphql')) answers.push(await res.clone().json());
    return res;
  });
  console.error = (...args) => warned.push(['error', ...args]);
  console.warn = (...args) => warned.push(['warn', ...args]);

  const writer = startWriter();
  let root, client;
  try {
    document.body.innerHTML = '<div id="root"></div>';
    await sleep(1000); // the writes under way before the component mounts
    const snippet = await import(pathToFileURL(file).href);
    client = snippet.client;
    root = createRoot(document.getElementById('root'));
    root.render(createElement(ApolloProvider, { client }, createElement(snippet.Posts)));
    const subscribes = () => sent.filter((m) => m.type === 'subscribe');
    const subscribed = () => subscribes().length === 3 || proxy.errors.length > 0;
    await until(subscribed, 10_000, 'the three subscriptions sent', () => JSON.stringify(sent));
    if (proxy.errors.length > 0) throw proxy.errors[0];
    await sleep(Math.max(0, WRITE_FOR_MS - (Date.now() - writer.started)));
    await writer.stop();

    const store = await storeList();
    const shown = () => {
      const view = new Map();
      for (const li of document.querySelectorAll('#root li')) {
        const m = /^(.*) \(version (\d+)\)$/.exec(li.textContent);
        assert.ok(m && li.id.startsWith('post-'), `a post as the component shows it: ${li.outerHTML}`);
        view.set(li.id.slice('post-'.length), { title: m[1], version: Number(m[2]) });
      }
      return view;
    };
    const missed = () => differences(shown(), store);
    await until(() => missed().length === 0, SETTLE_MS, "Apollo's list the store's", () => missed().join('\n'));

    // The query's cursor went to each subscription, and nowhere else: the one query was asked once.
    assert.equal(answers.length, 1, `one answer over HTTP, the query's: ${JSON.stringify(answers)}`);
    const cursor = answers[0].extensions?.cursor;
    assert.match(cursor ?? '', CURSOR, `the query's answer carries its cursor: ${JSON.stringify(answers[0]).slice(0, 300)}`);
    assert.deepEqual(
      subscribes().map((m) => m.payload.extensions),
      [{ resumeFrom: cursor }, { resumeFrom: cursor }, { resumeFrom: cursor }],
      "each subscription resumes from the query's cursor",
    );
    assert.ok(gap, 'the writes of the gap were made');
    assert.equal(proxy.accepted, 1, 'one connection: the subscriptions never reconnected');
    assert.deepEqual(warned, [], 'nothing logged by React or Apollo');
    t.diagnostic(
      `writes: ${writer.done()}; the store holds ${store.length} posts, as the component shows; ` +
        `while its subscriptions were held, the gap's 3 and ${held} of the writer's`,
    );
  } finally {
    await writer.stop().catch(() => {});
    root?.unmount();
    client?.stop();
    await sleep(100); // React's passive effects of the unmount, scheduled after it, read window
    console.error = console0.error;
    console.warn = console0.warn;
    for (const [k, descriptor] of Object.entries(saved)) {
      if (descriptor) Object.defineProperty(globalThis, k, descriptor);
      else delete globalThis[k];
    }
    await win.happyDOM.close();
    await proxy.close();
    await deleteAll();
  }
});

test("graphql-ws clients that read (GET /posts, a query) and subscribe from the read's cursor end showing the store's list, every event once and in order; one without the cursor does not", async (t) => {
  const reserved = { rest: await reserve('rest'), graphql: await reserve('graphql'), control: await reserve('control') };
  const witness = await deleteWitness();
  const writer = startWriter();
  const clients = [];
  try {
    // Each starts while the writes run, 0.8 s apart.
    const starting = [
      ['rest', 'rest', true],
      ['graphql', 'graphql', true],
      ['control', 'graphql', false],
    ].map(async ([what, read, resume], i) => {
      await sleep(800 * (i + 1));
      const c = await readThenLive({ what, read, resume, reserved: reserved[what], witness, writer });
      clients.push(c);
      return c;
    });
    const [byRest, byQuery, control] = await Promise.all(starting);
    await sleep(Math.max(0, WRITE_FOR_MS - (Date.now() - writer.started)));
    await writer.stop();
    const store = await storeList();

    for (const c of [byRest, byQuery]) {
      await until(
        () => differences(c.view, store).length === 0 || c.errors.length > 0,
        SETTLE_MS,
        `${c.what}: the view the store's list`,
        () => differences(c.view, store).join('\n'),
      );
      assert.deepEqual(c.errors, [], `${c.what}: the subscriptions failed`);
      assert.deepEqual(c.anomalies, [], `${c.what}: every event once, each post's in the order of its versions`);
      const between = `from its read to its subscriptions, the gap's 3 writes and ${c.writesBetween} of the writer's`;
      t.diagnostic(`${c.what}: ${c.events()} events; ${between}`);
    }

    // The control got its live events as early as the others: what it misses now, it never gets.
    await sleep(500);
    const missed = differences(control.view, store);
    assert.deepEqual(control.errors, [], 'control: the subscriptions failed');
    assert.ok(
      showsAll(missed, control.gap.missed),
      `without the cursor the gap's three changes are missed: want ${JSON.stringify(control.gap.missed)} among\n${missed.join('\n')}`,
    );
    t.diagnostic(
      `control, without the cursor: ${missed.length} differences (the gap's 3 and ${missed.length - 3} more), ` +
        `${control.anomalies.length} events that did not fit its view`,
    );
    t.diagnostic(`writes: ${writer.done()}; the store holds ${store.length} posts`);
  } finally {
    await writer.stop().catch(() => {});
    for (const c of clients) await c.dispose();
    await witness.dispose();
    await deleteAll();
  }
});
