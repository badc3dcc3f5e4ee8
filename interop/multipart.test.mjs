// Apollo's multipart HTTP subscriptions with Apollo Client 4 against the real ./caddy: an
// ApolloClient with a plain HttpLink (no other link, Node's own fetch) and an InMemoryCache, whose
// subscriptions go as a POST with Accept: multipart/mixed;subscriptionSpec=1.0 and come back as
// parts. Events of writes made over REST, each with its cursor; unsubscribe; the refusals (a bad
// credential, an expired token, the limits, an event past max_response_size); and the parts as
// sent (the heartbeat every 5 s). Run with `make interop`, or `node --test multipart.test.mjs` in
// interop/.
import { before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ApolloClient, CombinedGraphQLErrors, CombinedProtocolErrors, HttpLink, InMemoryCache, gql } from '@apollo/client';
import { createClient as createWSClient } from 'graphql-ws';
import WebSocket from 'ws';
import { countingTest, splitEvent, stopCaddy } from './lib.mjs';
import { Inbox, describe, metric, nextEvent, pick, restAs, startTokenSite, uniqueTitle, until, untilLive, within } from './streams.mjs';

const ISSUER = 'https://issuer.example.test/';
const AUDIENCE = 'posts-interop-multipart';
const KEYS = { alice: 'interop-multipart-key-of-alice', carol: 'interop-multipart-key-of-carol' };
const PROBE = 'probe'; // the title prefix of the writes that only check that a subscription is live
const MAX_DEPTH = 5;
const MAX_ALIASES = 3;
const MAX_CONNECTIONS_PER_USER = 4;
const MAX_RESPONSE_SIZE = 2048; // bytes: a post's body of 3,000 characters is past it
const HEARTBEAT_MS = 5000; // the protocol's

let site; // startTokenSite's
let caddy; // { child, exited, log(), base }
let createPost, patchPost, deletePost; // alice's REST calls (restAs)

// test is node:test's test, counting failures so that Caddy's log is shown when something failed.
const { test, failures } = countingTest();

// --- helpers ------------------------------------------------------------------------------------

/** A token for sub that expires at exp (seconds) or after 5m. */
const mint = (sub, exp) => site.mint(sub, exp);

/** Apollo Client 4 as its docs set it up: an HttpLink (sending headers) and an InMemoryCache. */
function apollo(headers = {}) {
  return new ApolloClient({ link: new HttpLink({ uri: `${caddy.base}/graphql`, headers }), cache: new InMemoryCache() });
}

/**
 * Subscribes to query on client; returns { inbox, subscription }: inbox fills with { result }
 * ({ data, error, extensions } as Apollo emits them), { error } and { complete }.
 */
function subscribe(client, query, variables) {
  const inbox = new Inbox();
  const subscription = client.subscribe({ query: gql(query), variables }).subscribe({
    next: (result) => inbox.push({ result }),
    error: (error) => inbox.push({ error }),
    complete: () => inbox.push({ complete: true }),
  });
  return { inbox, subscription };
}

/** The event of an Apollo result: its data and its cursor (splitEvent's), with no error. */
function event(result) {
  assert.equal(result.error, undefined, `an event without an error: ${result.error}`);
  return splitEvent({ data: result.data, extensions: result.extensions });
}

/** The error of the one result a refused subscription gets, after which it completes. */
async function errorOfTheOneResult(inbox, what) {
  const first = await inbox.next(5000, `${what}: the result`);
  assert.ok(first.result?.error, `${what}: want a result with an error, got ${describe(first)}`);
  assert.equal(first.result.data, undefined, `${what}: no data`);
  assert.deepEqual(await inbox.next(2000, `${what}: the end`), { complete: true }, `${what}: then complete`);
  return first.result.error;
}

/** Whether a result is a post of a probing write. */
const isProbe = (r) => [r.data?.postCreated, r.data?.postUpdated].some((p) => p?.title?.startsWith(PROBE));

/** The number of multipart streams Caddy holds open. */
const openStreams = () => metric(caddy.base, 'caddy_posts_streams', 'interface="multipart"');

/** A raw POST for a subscription as Apollo Client sends it, read part by part. */
async function rawStream(query) {
  const control = new AbortController();
  const res = await fetch(`${caddy.base}/graphql`, {
    method: 'POST',
    headers: {
      Accept: 'multipart/mixed;boundary=graphql;subscriptionSpec=1.0,application/graphql-response+json,application/json;q=0.9',
      'Content-Type': 'application/json',
      'X-API-Key': KEYS.alice,
    },
    body: JSON.stringify({ query }),
    signal: control.signal,
  });
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let text = '';
  let ended = false;
  return {
    res,
    text: () => text,
    /** Reads until cond(text) holds or ms pass; says whether it holds. */
    async readUntil(cond, ms) {
      const deadline = Date.now() + ms;
      while (!cond(text) && !ended && Date.now() < deadline) {
        const chunk = await Promise.race([reader.read(), new Promise((resolve) => setTimeout(resolve, deadline - Date.now()))]);
        if (chunk?.done) ended = true;
        else if (chunk) text += chunk.value;
      }
      return cond(text);
    },
    close: () => control.abort(),
  };
}

// --- setup --------------------------------------------------------------------------------------

before(async () => {
  site = await startTokenSite({
    name: 'multipart',
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

test('Apollo Client HttpLink: postCreated, postUpdated and postDeleted carry the REST writes in order, each with its cursor', async (t) => {
  const client = apollo({ 'X-API-Key': KEYS.alice });
  const subs = {
    created: subscribe(client, 'subscription { postCreated(userId: "alice") { id title userId createdAt } }'),
    updated: subscribe(client, 'subscription { postUpdated(userId: "alice") { id title body version updatedAt } }'),
    deleted: subscribe(client, 'subscription { postDeleted(userId: "alice") }'),
  };
  try {
    const probeIds = new Set();
    const isProbeOf = (r) => probeIds.has(r.data?.postCreated?.id ?? r.data?.postUpdated?.id ?? r.data?.postDeleted);
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
          const item = await subs[name].inbox.next(300, 'event').catch(() => null);
          if (item === null) continue;
          assert.ok(item.result && isProbeOf(item.result), `${name}: waiting for the subscription, got ${describe(item)}`);
          live[name] = true;
        }
        return Object.values(live).every(Boolean);
      },
      15_000,
      'the three subscriptions live',
      () => JSON.stringify(live),
    );
    t.diagnostic(`probe posts until the three were live: ${probes}`);
    assert.equal(await openStreams(), 3, 'caddy_posts_streams{interface="multipart"}: one stream a subscription');

    const post = await createPost(uniqueTitle('Pushed over multipart'));
    const first = await patchPost(post.id, uniqueTitle('Edited once'));
    const second = await patchPost(post.id, uniqueTitle('Edited twice'));
    await deletePost(post.id);

    // The cache's document transform adds __typename to each selection set.
    const created = event(await nextEvent(subs.created.inbox, isProbeOf, 'postCreated'));
    assert.deepEqual(created.rest, {
      data: { postCreated: { __typename: 'Post', ...pick(post, ['id', 'title', 'userId', 'createdAt']) } },
    });
    const updates = [];
    for (const patched of [first, second]) {
      const update = event(await nextEvent(subs.updated.inbox, isProbeOf, 'postUpdated'));
      assert.deepEqual(
        update.rest,
        { data: { postUpdated: { __typename: 'Post', ...pick(patched, ['id', 'title', 'body', 'version', 'updatedAt']) } } },
        'the updates in the order written',
      );
      updates.push(update);
    }
    const deleted = event(await nextEvent(subs.deleted.inbox, isProbeOf, 'postDeleted'));
    assert.deepEqual(deleted.rest, { data: { postDeleted: post.id } });
    const cursors = [created.cursor, ...updates.map((u) => u.cursor), deleted.cursor];
    assert.equal(new Set(cursors).size, 4, `four events, four cursors: ${cursors}`);
  } finally {
    for (const { subscription } of Object.values(subs)) subscription.unsubscribe();
    client.stop();
  }
});

test('Apollo Client HttpLink: unsubscribe ends the stream on the server', async () => {
  await until(async () => (await openStreams()) === 0, 5000, 'no multipart stream open before the test');
  const client = apollo({ 'X-API-Key': KEYS.alice });
  try {
    const { inbox, subscription } = subscribe(client, 'subscription { postCreated(userId: "alice") { id title } }');
    await untilLive(inbox, () => createPost(uniqueTitle(PROBE)), 'postCreated');
    assert.equal(await openStreams(), 1, 'caddy_posts_streams{interface="multipart"} while subscribed');
    subscription.unsubscribe();
    await until(async () => (await openStreams()) === 0, 5000, 'the stream closed on the server');
    assert.ok(
      inbox.items().every((item) => item.result && isProbe(item.result)),
      `nothing but probes after unsubscribe: ${inbox.items().map(describe)}`,
    );
  } finally {
    client.stop();
  }
});

test('Apollo Client HttpLink: a bad credential is refused before the stream: UNAUTHENTICATED', async () => {
  const client = apollo({ 'X-API-Key': 'not-a-key-of-this-site' });
  try {
    const { inbox } = subscribe(client, 'subscription { postCreated { id } }');
    const error = await errorOfTheOneResult(inbox, 'a bad API key');
    assert.ok(CombinedGraphQLErrors.is(error), `a GraphQL error: ${error}`);
    assert.deepEqual(
      error.errors.map((e) => e.extensions?.code),
      ['UNAUTHENTICATED'],
    );
  } finally {
    client.stop();
  }
});

test('Apollo Client HttpLink: a stream authenticated by a JWT ends with UNAUTHENTICATED once the token expires', async (t) => {
  const exp = Math.ceil(Date.now() / 1000) + 3;
  const client = apollo({ Authorization: `Bearer ${await mint('dave', exp)}` });
  try {
    const { inbox } = subscribe(client, 'subscription { postCreated { id userId } }');
    await untilLive(inbox, () => createPost(uniqueTitle(PROBE)), 'postCreated with a JWT');
    assert.ok(Date.now() < exp * 1000, 'the subscription was live before the token expired');

    let item;
    do item = await inbox.next(exp * 1000 + 3000 - Date.now(), 'the end after the token expired');
    while (item.result?.data?.postCreated);
    const late = Date.now() - exp * 1000;
    assert.ok(CombinedGraphQLErrors.is(item.result?.error), `want the operation's error, got ${describe(item)}`);
    assert.deepEqual(item.result.error.errors, [
      { message: 'Forbidden: the token has expired', extensions: { code: 'UNAUTHENTICATED' } },
    ]);
    assert.deepEqual(await inbox.next(1000, 'complete'), { complete: true }, 'then the subscription completes');
    assert.ok(late >= 0, `ended ${-late}ms before the token's exp`);
    assert.ok(late < 1500, `ended ${late}ms after the token's exp`);
    t.diagnostic(`ended ${late}ms after the token's exp`);
    await until(async () => (await openStreams()) === 0, 5000, 'the stream closed on the server');
  } finally {
    client.stop();
  }
});

test(`Apollo Client HttpLink: documents past max_depth (${MAX_DEPTH}: as the subscription starts) or max_aliases (${MAX_ALIASES}: before the stream) end with their errors`, async () => {
  const client = apollo();
  try {
    const deep = await errorOfTheOneResult(
      subscribe(client, 'subscription { postCreated { author { posts { author { posts { id } } } } } }').inbox,
      'too deep',
    );
    assert.ok(CombinedGraphQLErrors.is(deep), `a GraphQL error: ${deep}`);
    // The cache's transform adds __typename at depth 6 too: one error for each field too deep.
    assert.deepEqual(
      deep.errors.map((e) => [e.extensions?.code, e.message]),
      ['id', '__typename'].map((field) => ['GRAPHQL_VALIDATION_FAILED', `Field "${field}" has depth 6 that exceeds max depth 5`]),
    );

    const aliased = await errorOfTheOneResult(
      subscribe(client, 'subscription { postCreated { a: id b: id c: id d: id } }').inbox,
      'too many aliases',
    );
    assert.ok(CombinedGraphQLErrors.is(aliased), `a GraphQL error: ${aliased}`);
    assert.deepEqual(
      aliased.errors.map((e) => e.extensions?.code),
      ['MAX_ALIASES_LIMIT'],
    );
  } finally {
    client.stop();
  }
});

test(`Apollo Client HttpLink: past max_connections_per_user (${MAX_CONNECTIONS_PER_USER}), counting WebSockets and streams together, a subscription is refused with 429`, async () => {
  const ws = [];
  const client = apollo({ 'X-API-Key': KEYS.carol });
  const subscriptions = [];
  try {
    for (let i = 0; i < MAX_CONNECTIONS_PER_USER / 2; i++) {
      const c = createWSClient({
        url: `${caddy.base.replace(/^http/, 'ws')}/graphql`,
        webSocketImpl: WebSocket,
        connectionParams: { 'X-API-Key': KEYS.carol },
        retryAttempts: 0,
        lazy: false,
      });
      ws.push(c);
      await within(new Promise((resolve) => c.on('connected', resolve)), 5000, 'a WebSocket acknowledged');
    }
    // Distinct documents: Apollo Client would run identical ones once.
    for (let i = 0; i < MAX_CONNECTIONS_PER_USER / 2; i++) {
      subscriptions.push(subscribe(client, `subscription { postCreated(userId: "carol${i}") { id } }`).subscription);
      await until(async () => (await openStreams()) === i + 1, 5000, `carol's stream ${i + 1} open`);
    }

    // Refused before the stream with 429, in JSON of the media type Apollo Client prefers, which
    // it reads as GraphQL errors whatever the status.
    const { inbox, subscription } = subscribe(client, 'subscription { postCreated { id } }');
    subscriptions.push(subscription);
    const error = await errorOfTheOneResult(inbox, 'one connection too many');
    assert.ok(CombinedGraphQLErrors.is(error), `a GraphQL error: ${error}`);
    assert.equal(error.errors.length, 1, JSON.stringify(error.errors));
    assert.match(error.errors[0].message, /as many as max_connections_per_user allows/);
    // The same request as Apollo Client sent it, read raw: its status and Retry-After.
    const res = await fetch(`${caddy.base}/graphql`, {
      method: 'POST',
      headers: {
        Accept: 'multipart/mixed;boundary=graphql;subscriptionSpec=1.0,application/graphql-response+json,application/json;q=0.9',
        'Content-Type': 'application/json',
        'X-API-Key': KEYS.carol,
      },
      body: JSON.stringify({ query: 'subscription { postCreated { id } }' }),
    });
    const body = await res.json();
    assert.equal(res.status, 429, JSON.stringify(body));
    assert.match(res.headers.get('content-type'), /^application\/graphql-response\+json\b/);
    assert.ok(Number(res.headers.get('retry-after')) > 0, 'with Retry-After');
    assert.deepEqual(body.errors.map((e) => e.message), error.errors.map((e) => e.message));
  } finally {
    for (const s of subscriptions) s.unsubscribe();
    client.stop();
    await Promise.all(ws.map((c) => c.dispose()));
  }
});

test(`Apollo Client HttpLink: an event past max_response_size (${MAX_RESPONSE_SIZE} bytes) is a RESPONSE_TOO_LARGE result with its cursor, and the subscription goes on`, async () => {
  const client = apollo({ 'X-API-Key': KEYS.alice });
  try {
    const { inbox, subscription } = subscribe(client, 'subscription { postCreated(userId: "alice") { id title body } }');
    await untilLive(inbox, () => createPost(uniqueTitle(PROBE)), 'postCreated');
    await createPost(uniqueTitle('Too large'), 'x'.repeat(MAX_RESPONSE_SIZE + 1000));
    const small = await createPost(uniqueTitle('Small'));

    const large = await nextEvent(inbox, isProbe, 'the large post');
    assert.ok(CombinedGraphQLErrors.is(large.error), `want the event's error, got ${JSON.stringify(large)}`);
    assert.deepEqual(
      large.error.errors.map((e) => e.extensions?.code),
      ['RESPONSE_TOO_LARGE'],
    );
    assert.equal(large.data, undefined);
    splitEvent({ extensions: large.extensions }); // its cursor
    const next = event(await nextEvent(inbox, isProbe, 'the small post'));
    assert.deepEqual(next.rest, { data: { postCreated: { __typename: 'Post', ...pick(small, ['id', 'title', 'body']) } } });
    subscription.unsubscribe();
  } finally {
    client.stop();
  }
});

test(`the parts as sent: multipart/mixed with the boundary graphql, never cached, {} at once and every ${HEARTBEAT_MS / 1000} s`, async (t) => {
  const stream = await rawStream('subscription { postCreated(userId: "nobody") { id } }');
  try {
    assert.equal(stream.res.status, 200);
    assert.equal(stream.res.headers.get('content-type'), 'multipart/mixed;boundary="graphql";subscriptionSpec=1.0');
    assert.equal(stream.res.headers.get('cache-control'), 'no-store');
    // A part goes out with the boundary after it: the client reads a part once it sees the next.
    const heartbeat = '\r\ncontent-type: application/json; charset=utf-8\r\n\r\n{}\r\n--graphql';
    const heartbeats = (n) => (text) => text === `\r\n--graphql${heartbeat.repeat(n)}`;
    assert.ok(await stream.readUntil(heartbeats(1), 3000), `a heartbeat at once, and nothing else: ${JSON.stringify(stream.text())}`);
    const first = Date.now();
    assert.ok(
      await stream.readUntil(heartbeats(2), HEARTBEAT_MS + 3000),
      `a second heartbeat, and nothing else: ${JSON.stringify(stream.text())}`,
    );
    const every = Date.now() - first;
    assert.ok(every > HEARTBEAT_MS - 1000 && every < HEARTBEAT_MS + 2000, `the next heartbeat after ${every}ms`);
    t.diagnostic(`heartbeat after ${every}ms`);
  } finally {
    stream.close();
  }
});

// Last: it stops Caddy.
test('Apollo Client HttpLink: Caddy stopping ends a subscription with a protocol error (a part with a null payload): SHUTTING_DOWN', async (t) => {
  const client = apollo({ 'X-API-Key': KEYS.alice });
  try {
    const { inbox } = subscribe(client, 'subscription { postCreated(userId: "alice") { id title } }');
    await untilLive(inbox, () => createPost(uniqueTitle(PROBE)), 'postCreated');
    const stopping = Date.now();
    const stopped = stopCaddy(caddy);
    let item;
    do item = await inbox.next(5000, 'the end as Caddy stops');
    while (item.result && isProbe(item.result));
    const after = Date.now() - stopping;
    assert.ok(CombinedProtocolErrors.is(item.result?.error), `want a protocol error, got ${describe(item)}`);
    assert.deepEqual(
      item.result.error.errors.map((e) => e.extensions?.code),
      ['SHUTTING_DOWN'],
    );
    assert.deepEqual(await inbox.next(1000, 'complete'), { complete: true }, 'then the subscription completes');
    t.diagnostic(`ended ${after}ms after SIGTERM: ${item.result.error.errors[0].message}`);
    await stopped;
  } finally {
    client.stop();
  }
});
