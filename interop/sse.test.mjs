// GraphQL over server-sent events with the `graphql-sse` npm client (createClient in its default,
// distinct connections mode: one POST with Accept: text/event-stream a subscription) against the
// real ./caddy: events of writes made over REST, each with its cursor, resumed with Last-Event-ID;
// the end by the client and by the server; the refusals (a bad credential, an expired token, the
// limits, an event past max_response_size); a query over SSE; and a feed shared with a graphql-ws
// subscriber. Run with `make interop`, or `node --test sse.test.mjs` in interop/.
import { before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createClient } from 'graphql-sse';
import { createClient as createWSClient } from 'graphql-ws';
import WebSocket from 'ws';
import { countingTest, splitEvent, stopCaddy } from './lib.mjs';
import {
  Inbox,
  describe,
  metric,
  nextEvent,
  pick,
  restAs,
  sinkInto,
  startTokenSite,
  uniqueTitle,
  until,
  untilLive,
  within,
} from './streams.mjs';

const ISSUER = 'https://issuer.example.test/';
const AUDIENCE = 'posts-interop-sse';
const KEYS = { alice: 'interop-sse-key-of-alice', carol: 'interop-sse-key-of-carol' };
const PROBE = 'probe'; // the title prefix of the writes that only check that a subscription is live
const MAX_DEPTH = 5;
const MAX_ALIASES = 3;
const MAX_CONNECTIONS_PER_USER = 4;
const MAX_RESPONSE_SIZE = 2048; // bytes: a post's body of 3,000 characters is past it

let site; // startTokenSite's
let caddy; // { child, exited, log(), base }
let createPost, patchPost, deletePost; // alice's REST calls (restAs)

// test is node:test's test, counting failures so that Caddy's log is shown when something failed.
const { test, failures } = countingTest();

// --- helpers ------------------------------------------------------------------------------------

/** A token for sub that expires at exp (seconds) or after 5m. */
const mint = (sub, exp) => site.mint(sub, exp);

/**
 * A graphql-sse client on /graphql in distinct connections mode (its default), sending headers;
 * without retries unless options say otherwise, so that every end reaches the test.
 */
function sseClient(headers = {}, options = {}) {
  return createClient({ url: `${caddy.base}/graphql`, headers, retryAttempts: 0, ...options });
}

/** The error that ends the subscription of payload on client, within ms; anything else fails. */
async function refusedWith(client, payload, ms = 5000) {
  const inbox = new Inbox();
  client.subscribe(payload, sinkInto(inbox));
  const item = await inbox.next(ms, 'the end of the subscription');
  assert.ok(item.error, `want the client to reject, got ${describe(item)}`);
  return item.error;
}

/** The errors of the one result a refused subscription gets, after which it completes. */
async function errorsOfTheOneResult(client, payload) {
  const inbox = new Inbox();
  client.subscribe(payload, sinkInto(inbox));
  const first = await inbox.next(5000, 'the result');
  assert.ok(first.result?.errors, `want a result with errors, got ${describe(first)}`);
  assert.equal(first.result.data, undefined, `nothing ran: ${JSON.stringify(first.result)}`);
  const end = await inbox.next(2000, 'the end');
  assert.ok(end.complete, `want complete after the errors, got ${describe(end)}`);
  return first.result.errors;
}

/** The number of SSE streams Caddy holds open. */
const openStreams = () => metric(caddy.base, 'caddy_posts_streams', 'interface="sse"');

// --- setup --------------------------------------------------------------------------------------

before(async () => {
  site = await startTokenSite({
    name: 'sse',
    issuer: ISSUER,
    audience: AUDIENCE,
    keys: KEYS,
    settings: [
      `max_depth ${MAX_DEPTH}`,
      `max_aliases ${MAX_ALIASES}`,
      `max_connections_per_user ${MAX_CONNECTIONS_PER_USER}`,
      `max_response_size ${MAX_RESPONSE_SIZE}B`,
    ],
  });
  caddy = site.caddy;
  ({ createPost, patchPost, deletePost } = restAs(caddy.base, KEYS.alice));
});

after(async () => {
  await site?.stop(failures());
});

// --- the tests ----------------------------------------------------------------------------------

test('graphql-sse: postCreated, postUpdated and postDeleted carry the REST writes in order, each with its cursor; Last-Event-ID resumes after one', async (t) => {
  const client = sseClient({ 'X-API-Key': KEYS.alice });
  const inbox = { created: new Inbox(), updated: new Inbox(), deleted: new Inbox() };
  const stops = [
    client.subscribe({ query: 'subscription { postCreated(userId: "alice") { id title userId createdAt } }' }, sinkInto(inbox.created)),
    client.subscribe(
      { query: 'subscription { postUpdated(userId: "alice") { id title body version createdAt updatedAt } }' },
      sinkInto(inbox.updated),
    ),
    client.subscribe({ query: 'subscription { postDeleted(userId: "alice") }' }, sinkInto(inbox.deleted)),
  ];
  try {
    // A probe post, changed and deleted, until each of the three has seen its event.
    const probeIds = new Set();
    const isProbe = (r) => probeIds.has(r.data?.postCreated?.id ?? r.data?.postUpdated?.id ?? r.data?.postDeleted);
    const live = { created: false, updated: false, deleted: false };
    let probes = 0;
    await until(
      async () => {
        probes++;
        const probe = await createPost(uniqueTitle(PROBE));
        probeIds.add(probe.id);
        await patchPost(probe.id, uniqueTitle(PROBE));
        await deletePost(probe.id);
        for (const name of Object.keys(live)) {
          for (const item = await inbox[name].next(300, 'event').catch(() => null); item; ) {
            assert.ok(item.result && isProbe(item.result), `${name}: waiting for the subscription, got ${describe(item)}`);
            live[name] = true;
            break;
          }
        }
        return Object.values(live).every(Boolean);
      },
      15_000,
      'the three subscriptions live',
      () => JSON.stringify(live),
    );
    t.diagnostic(`probe posts until the three were live: ${probes}`);

    const post = await createPost(uniqueTitle('Pushed over SSE'));
    const first = await patchPost(post.id, uniqueTitle('Edited once'));
    const second = await patchPost(post.id, uniqueTitle('Edited twice'));
    await deletePost(post.id);

    const created = splitEvent(await nextEvent(inbox.created, isProbe, 'postCreated'));
    assert.deepEqual(created.rest, { data: { postCreated: pick(post, ['id', 'title', 'userId', 'createdAt']) } });
    const updateFields = ['id', 'title', 'body', 'version', 'createdAt', 'updatedAt'];
    const updates = [];
    for (const patched of [first, second]) {
      const update = splitEvent(await nextEvent(inbox.updated, isProbe, 'postUpdated'));
      assert.deepEqual(update.rest, { data: { postUpdated: pick(patched, updateFields) } }, 'the updates in the order written');
      updates.push(update);
    }
    assert.deepEqual(
      updates.map((u) => u.rest.data.postUpdated.version),
      [2, 3],
    );
    const deleted = splitEvent(await nextEvent(inbox.deleted, isProbe, 'postDeleted'));
    assert.deepEqual(deleted.rest, { data: { postDeleted: post.id } });
    const cursors = [created.cursor, ...updates.map((u) => u.cursor), deleted.cursor];
    assert.equal(new Set(cursors).size, 4, `four events, four cursors: ${cursors}`);

    // Resumed from the create's cursor: the two updates again, with the same cursors, in order,
    // then the live ones.
    const resumed = new Inbox();
    const resuming = sseClient({ 'X-API-Key': KEYS.alice, 'Last-Event-ID': created.cursor });
    try {
      resuming.subscribe({ query: 'subscription { postUpdated(userId: "alice") { id title version } }' }, sinkInto(resumed));
      for (const update of updates) {
        const replayed = splitEvent(await nextEvent(resumed, () => false, 'replayed postUpdated'));
        assert.deepEqual(replayed, {
          rest: { data: { postUpdated: pick(update.rest.data.postUpdated, ['id', 'title', 'version']) } },
          cursor: update.cursor,
        });
      }
      // The post is gone; another of alice's, changed, is the live event after the replay.
      const other = await createPost(uniqueTitle('After the replay'));
      const third = await patchPost(other.id, uniqueTitle('Edited live'));
      const liveUpdate = splitEvent(await nextEvent(resumed, () => false, 'live postUpdated'));
      assert.deepEqual(liveUpdate.rest, { data: { postUpdated: pick(third, ['id', 'title', 'version']) } });
      assert.ok(!cursors.includes(liveUpdate.cursor), 'a live event has a cursor of its own');
    } finally {
      resuming.dispose();
    }
  } finally {
    for (const stop of stops) stop();
    client.dispose();
  }
});

test('the stream as sent: text/event-stream, never cached, an opening comment, and each event with its cursor as its id', async () => {
  const control = new AbortController();
  const res = await fetch(`${caddy.base}/graphql`, {
    method: 'POST',
    headers: { Accept: 'text/event-stream', 'Content-Type': 'application/json', 'X-API-Key': KEYS.alice },
    body: JSON.stringify({ query: 'subscription { postCreated(userId: "alice") { id title } }' }),
    signal: control.signal,
  });
  try {
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'text/event-stream; charset=utf-8');
    assert.equal(res.headers.get('cache-control'), 'no-store');
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let text = '';
    await within(
      (async () => {
        while (!text.includes('\n\n')) text += (await reader.read()).value ?? '';
      })(),
      5000,
      'the opening comment',
    );
    assert.ok(text.startsWith(':\n\n'), `the stream opens with a comment: ${JSON.stringify(text)}`);
    // The first event of a post created once the stream is open.
    let post;
    await until(
      async () => {
        post = await createPost(uniqueTitle('Seen raw'));
        const more = await Promise.race([reader.read(), new Promise((resolve) => setTimeout(resolve, 300))]);
        if (more) text += more.value ?? '';
        return text.includes('event: next');
      },
      10_000,
      'an event on the raw stream',
    );
    await within(
      (async () => {
        while (!/event: next\ndata: .*\n\n/.test(text)) text += (await reader.read()).value ?? '';
      })(),
      5000,
      'the whole event',
    );
    const [, id, data] = text.match(/\n\nid: (.*)\nevent: next\ndata: (.*)\n\n/) ?? [];
    assert.ok(data, `an event with an id: ${JSON.stringify(text)}`);
    const { cursor } = splitEvent(JSON.parse(data));
    assert.equal(id, cursor, 'the id of an event is its cursor');
    assert.ok(post);
  } finally {
    control.abort();
  }
});

test('graphql-sse: a query over SSE is one result, then complete', async () => {
  const post = await createPost(uniqueTitle('Read over SSE'));
  const client = sseClient();
  try {
    const inbox = new Inbox();
    client.subscribe({ query: 'query ($id: ID!) { post(id: $id) { id title userId } }', variables: { id: post.id } }, sinkInto(inbox));
    const result = await inbox.next(5000, 'the result');
    // A query's answer carries the cursor of the log's position its read reflects.
    assert.match(result.result?.extensions?.cursor ?? '', /^[A-Za-z0-9_-]{23}$/, JSON.stringify(result));
    assert.deepEqual(result, { result: { data: { post: pick(post, ['id', 'title', 'userId']) }, extensions: { cursor: result.result.extensions.cursor } } });
    assert.deepEqual(await inbox.next(2000, 'the end'), { complete: true });
  } finally {
    client.dispose();
  }
});

test("graphql-sse: the client's unsubscribe completes its sink and ends the stream on the server", async () => {
  await until(async () => (await openStreams()) === 0, 5000, 'no SSE stream open before the test');
  const client = sseClient({ 'X-API-Key': KEYS.alice });
  try {
    const inbox = new Inbox();
    const stop = client.subscribe({ query: 'subscription { postCreated(userId: "alice") { id } }' }, sinkInto(inbox));
    await untilLive(inbox, () => createPost(uniqueTitle(PROBE)), 'postCreated');
    assert.equal(await openStreams(), 1, 'caddy_posts_streams{interface="sse"} while subscribed');
    stop();
    for (let item = await inbox.next(2000, 'the end'); !item.complete; item = await inbox.next(2000, 'the end')) {
      assert.ok(item.result && !item.result.errors, `before the end: ${describe(item)}`);
    }
    await until(async () => (await openStreams()) === 0, 5000, 'the stream closed on the server');
  } finally {
    client.dispose();
  }
});

test('graphql-sse: a bad credential is refused with 401 before the stream, and the client rejects', async () => {
  const error = await refusedWith(sseClient({ 'X-API-Key': 'not-a-key-of-this-site' }), {
    query: 'subscription { postCreated { id } }',
  });
  assert.equal(error.name, 'NetworkError', String(error));
  assert.equal(error.response?.status, 401, String(error));
  const body = await error.response.json();
  assert.equal(body.errors?.[0]?.extensions?.code, 'UNAUTHENTICATED', JSON.stringify(body));
});

test('graphql-sse: a stream authenticated by a JWT ends with UNAUTHENTICATED once the token expires', async (t) => {
  const exp = Math.ceil(Date.now() / 1000) + 3;
  const client = sseClient({ Authorization: `Bearer ${await mint('dave', exp)}` });
  try {
    const inbox = new Inbox();
    client.subscribe({ query: 'subscription { postCreated { id userId } }' }, sinkInto(inbox));
    await untilLive(inbox, () => createPost(uniqueTitle(PROBE)), 'postCreated with a JWT');
    assert.ok(Date.now() < exp * 1000, 'the subscription was live before the token expired');

    let item;
    do item = await inbox.next(exp * 1000 + 3000 - Date.now(), 'the end after the token expired');
    while (item.result?.data?.postCreated);
    const late = Date.now() - exp * 1000;
    assert.deepEqual(item, {
      result: { errors: [{ message: 'Forbidden: the token has expired', extensions: { code: 'UNAUTHENTICATED' } }] },
    });
    assert.deepEqual(await inbox.next(1000, 'complete'), { complete: true }, 'then the stream completes');
    assert.ok(late >= 0, `ended ${-late}ms before the token's exp`);
    assert.ok(late < 1500, `ended ${late}ms after the token's exp`);
    t.diagnostic(`ended ${late}ms after the token's exp`);
  } finally {
    client.dispose();
  }
});

test(`graphql-sse: documents past max_depth (${MAX_DEPTH}) or max_aliases (${MAX_ALIASES}) get their errors as the stream's one result`, async () => {
  const client = sseClient();
  try {
    const deep = await errorsOfTheOneResult(client, {
      query: 'subscription { postCreated { author { posts { author { posts { id } } } } } }',
    });
    assert.equal(deep.length, 1, JSON.stringify(deep));
    assert.equal(deep[0].extensions?.code, 'GRAPHQL_VALIDATION_FAILED', JSON.stringify(deep));
    assert.match(deep[0].message, /exceeds max depth 5/);

    const aliased = await errorsOfTheOneResult(client, { query: 'subscription { postCreated { a: id b: id c: id d: id } }' });
    assert.equal(aliased.length, 1, JSON.stringify(aliased));
    assert.equal(aliased[0].extensions?.code, 'MAX_ALIASES_LIMIT', JSON.stringify(aliased));
  } finally {
    client.dispose();
  }
});

test(`graphql-sse: past max_connections_per_user (${MAX_CONNECTIONS_PER_USER}), counting WebSockets and streams together, a stream is refused with 429`, async () => {
  const held = [];
  const ws = [];
  try {
    // carol holds half her connections as graphql-ws WebSockets and half as SSE streams.
    for (let i = 0; i < MAX_CONNECTIONS_PER_USER / 2; i++) {
      const client = createWSClient({
        url: `${caddy.base.replace(/^http/, 'ws')}/graphql`,
        webSocketImpl: WebSocket,
        connectionParams: { 'X-API-Key': KEYS.carol },
        retryAttempts: 0,
        lazy: false,
      });
      ws.push(client);
      await within(new Promise((resolve) => client.on('connected', resolve)), 5000, 'a WebSocket acknowledged');
    }
    for (let i = 0; i < MAX_CONNECTIONS_PER_USER / 2; i++) {
      const client = sseClient({ 'X-API-Key': KEYS.carol });
      held.push(client);
      const connected = new Promise((resolve) =>
        client.subscribe({ query: `subscription { postCreated(userId: "carol${i}") { id } }` }, sinkInto(new Inbox()), { connected: resolve }),
      );
      await within(connected, 5000, 'a stream established');
    }
    const error = await refusedWith(sseClient({ 'X-API-Key': KEYS.carol }), { query: 'subscription { postCreated { id } }' });
    assert.equal(error.response?.status, 429, String(error));
    assert.ok(Number(error.response.headers.get('retry-after')) > 0, 'with Retry-After');
    const body = await error.response.json();
    assert.ok(body.errors?.[0]?.message, JSON.stringify(body));

    // Another user is not held back by carol's connections.
    const alice = sseClient({ 'X-API-Key': KEYS.alice });
    held.push(alice);
    const connected = new Promise((resolve) =>
      alice.subscribe({ query: 'subscription { postCreated { id } }' }, sinkInto(new Inbox()), { connected: resolve }),
    );
    await within(connected, 5000, "alice's stream established");
  } finally {
    for (const client of held) client.dispose();
    await Promise.all(ws.map((client) => client.dispose()));
  }
});

test(`graphql-sse: an event past max_response_size (${MAX_RESPONSE_SIZE} bytes) is a RESPONSE_TOO_LARGE result with its cursor, and the subscription goes on`, async () => {
  const client = sseClient({ 'X-API-Key': KEYS.alice });
  try {
    const inbox = new Inbox();
    client.subscribe({ query: 'subscription { postCreated(userId: "alice") { id title body } }' }, sinkInto(inbox));
    const isProbe = (r) => r.data?.postCreated?.title?.startsWith(PROBE);
    await untilLive(inbox, () => createPost(uniqueTitle(PROBE)), 'postCreated');
    await createPost(uniqueTitle('Too large'), 'x'.repeat(MAX_RESPONSE_SIZE + 1000));
    const small = await createPost(uniqueTitle('Small'));

    const large = splitEvent(await nextEvent(inbox, isProbe, 'the large post'));
    assert.equal(large.rest.data, null, JSON.stringify(large.rest));
    assert.equal(large.rest.errors?.length, 1, JSON.stringify(large.rest));
    assert.equal(large.rest.errors[0].extensions?.code, 'RESPONSE_TOO_LARGE', JSON.stringify(large.rest));
    const next = splitEvent(await nextEvent(inbox, isProbe, 'the small post'));
    assert.deepEqual(next.rest, { data: { postCreated: pick(small, ['id', 'title', 'body']) } });
  } finally {
    client.dispose();
  }
});

test('an SSE subscriber and a graphql-ws subscriber of the same document share one execution and get the same event', async () => {
  await until(
    async () => (await metric(caddy.base, 'caddy_posts_subscription_executions')) === 0,
    5000,
    'no subscription running before the test',
  );
  const query = 'subscription { postCreated(userId: "alice") { id title } }';
  const sse = sseClient();
  const ws = createWSClient({ url: `${caddy.base.replace(/^http/, 'ws')}/graphql`, webSocketImpl: WebSocket, retryAttempts: 0 });
  try {
    const overSSE = new Inbox();
    const overWS = new Inbox();
    sse.subscribe({ query }, sinkInto(overSSE));
    ws.subscribe({ query }, sinkInto(overWS));
    const isProbe = (r) => r.data?.postCreated?.title?.startsWith(PROBE);
    await untilLive(overSSE, () => createPost(uniqueTitle(PROBE)), 'over SSE');
    await untilLive(overWS, () => createPost(uniqueTitle(PROBE)), 'over graphql-ws');
    assert.equal(await metric(caddy.base, 'caddy_posts_subscription_executions'), 1, 'one execution for both');

    const post = await createPost(uniqueTitle('Shared'));
    const a = splitEvent(await nextEvent(overSSE, isProbe, 'over SSE'));
    const b = splitEvent(await nextEvent(overWS, isProbe, 'over graphql-ws'));
    assert.deepEqual(a.rest, { data: { postCreated: pick(post, ['id', 'title']) } });
    assert.deepEqual(b, a, 'the same event, with the same cursor');
  } finally {
    sse.dispose();
    await ws.dispose();
  }
});

// Last: it stops Caddy.
test('graphql-sse: Caddy stopping ends the stream without a complete, so that a client reconnects (and resumes)', async (t) => {
  const client = sseClient({ 'X-API-Key': KEYS.alice });
  try {
    const inbox = new Inbox();
    client.subscribe({ query: 'subscription { postCreated(userId: "alice") { id title } }' }, sinkInto(inbox));
    const isProbe = (r) => r.data?.postCreated?.title?.startsWith(PROBE);
    await untilLive(inbox, () => createPost(uniqueTitle(PROBE)), 'postCreated');
    const stopping = Date.now();
    const stopped = stopCaddy(caddy);
    let item;
    do item = await inbox.next(5000, 'the end as Caddy stops');
    while (item.result && isProbe(item.result));
    const after = Date.now() - stopping;
    // A network error is what graphql-sse retries (retryAttempts, here 0); a complete it never would.
    assert.equal(item.error?.name, 'NetworkError', `want the stream cut, got ${describe(item)}`);
    assert.equal(item.error.message, 'Connection closed while having active streams');
    t.diagnostic(`ended ${after}ms after SIGTERM`);
    await stopped;
  } finally {
    client.dispose();
  }
});
