// Subscriptions interop: drives GraphQL over WebSocket on the real ./caddy (built by `make caddy`)
// with graphql-ws's client (protocol graphql-transport-ws), the legacy subscriptions-transport-ws
// client (protocol graphql-ws), tokens minted by jose that expire mid-subscription, and a raw `ws`
// client for the close codes of the protocol. Events come from writes made through REST. Run with
// `make interop`, or `node --test` in interop/.
import { before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createClient } from 'graphql-ws';
import { SubscriptionClient } from 'subscriptions-transport-ws';
import WebSocket from 'ws';
import { SignJWT, exportJWK, generateKeyPair } from 'jose';
import { countingTest, postsCaddyfile, readyForTokens, serveJWKS, sleep, splitEvent, startCaddy, stopCaddy } from './lib.mjs';
import { Inbox, describe, nextEvent, pick, restAs, sinkInto, uniqueTitle, untilLive } from './streams.mjs';

const ISSUER = 'https://issuer.example.test/';
const AUDIENCE = 'posts-interop-subscriptions';
const ALICE_KEY = 'interop-subscriptions-key-of-alice';
const INIT_TIMEOUT_MS = 1000; // ws_init_timeout below
const PROBE = 'probe'; // the title prefix of the writes that only check that a subscription is live

// Every credential sent to Caddy; none may ever show up in its log.
const secrets = new Set([ALICE_KEY]);

let tmp; // the scratch directory: Caddyfile, data, Caddy's home
let jwks; // { server, url }
let signing; // { alg, kid, privateKey, jwk }
let caddy; // { child, exited, log(), base }
let rest, createPost; // alice's REST calls (restAs)
let wsURL; // ws://127.0.0.1:<port>/graphql

// test is node:test's test, counting failures so that Caddy's log is shown when something failed.
const { test, failures } = countingTest();

// --- helpers ------------------------------------------------------------------------------------

/** A token for sub, signed with the key in the JWKS, that expires at exp (seconds) or after 5m. */
async function mint(sub, exp = '5m') {
  const token = await new SignJWT({ name: `${sub} (interop)` })
    .setProtectedHeader({ alg: signing.alg, kid: signing.kid, typ: 'JWT' })
    .setIssuer(ISSUER)
    .setAudience(AUDIENCE)
    .setSubject(sub)
    .setIssuedAt()
    .setExpirationTime(exp)
    .sign(signing.privateKey);
  secrets.add(token);
  return token;
}

/** A graphql-ws client (protocol graphql-transport-ws) on /graphql, without retries. */
function transportClient(connectionParams, on = {}) {
  return createClient({
    url: wsURL,
    webSocketImpl: WebSocket,
    connectionParams,
    retryAttempts: 0, // a close must reach the test, not be hidden by a reconnect
    on,
  });
}

/**
 * A raw `ws` socket on /graphql offering protocol. Its messages (parsed) go into messages; closed
 * resolves with {code, reason, at} when it closes.
 */
async function rawSocket(protocol) {
  const ws = new WebSocket(wsURL, protocol);
  const messages = new Inbox();
  ws.on('message', (data, isBinary) => messages.push(isBinary ? { binary: data } : JSON.parse(String(data))));
  const closed = new Promise((resolve) =>
    ws.on('close', (code, reason) => resolve({ code, reason: String(reason), at: Date.now() })),
  );
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  assert.equal(ws.protocol, protocol, 'the subprotocol the server chose');
  return { ws, messages, closed, openedAt: Date.now() };
}

/** Resolves with what promise resolves with, or fails after ms saying what it waited for. */
function within(promise, ms, what) {
  let timer;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: nothing within ${ms}ms`)), ms);
    }),
  ]);
}

// --- setup --------------------------------------------------------------------------------------

before(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'caddy-posts-interop-subscriptions-'));
  const { publicKey, privateKey } = await generateKeyPair('ES256');
  signing = { alg: 'ES256', kid: 'interop-subscriptions-es256', privateKey };
  jwks = await serveJWKS([{ ...(await exportJWK(publicKey)), kid: signing.kid, alg: signing.alg, use: 'sig' }]);
  const probe = await mint('alice');
  caddy = await startCaddy({
    dir: tmp,
    caddyfile: (base) =>
      postsCaddyfile(base, [
        `data_dir ${path.join(tmp, 'data')}`,
        `jwks_url ${jwks.url}`,
        `issuer ${ISSUER}`,
        `audience ${AUDIENCE}`,
        'leeway 0s', // so that a token ends exactly at its exp
        `api_key ${ALICE_KEY} alice`,
        `ws_init_timeout ${INIT_TIMEOUT_MS / 1000}s`,
      ]),
    ready: readyForTokens(probe),
  });
  wsURL = `${caddy.base.replace(/^http/, 'ws')}/graphql`;
  ({ rest, createPost } = restAs(caddy.base, ALICE_KEY));
});

after(async () => {
  await stopCaddy(caddy);
  await new Promise((resolve) => jwks?.server.close(resolve) ?? resolve());
  if (failures() > 0 && caddy) {
    console.error(`--- caddy's log (${failures()} test(s) failed) ---\n${caddy.log()}--- end of caddy's log ---`);
  }
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

// --- the tests ----------------------------------------------------------------------------------

test('graphql-ws: postCreated, postUpdated and postDeleted carry the REST writes of the same user', async (t) => {
  const client = transportClient({ 'X-API-Key': ALICE_KEY });
  try {
    // postCreated: the post exactly as REST answered it, in the fields asked for.
    const created = new Inbox();
    const stopCreated = client.subscribe({ query: 'subscription { postCreated { id title userId createdAt } }' }, sinkInto(created));
    const isProbeCreated = (r) => r.data?.postCreated?.title?.startsWith(PROBE);
    const probes = { postCreated: await untilLive(created, () => createPost(uniqueTitle(PROBE)), 'postCreated') };
    const post = await createPost(uniqueTitle('Pushed over graphql-ws'));
    assert.equal(post.userId, 'alice');
    const event = splitEvent(await nextEvent(created, isProbeCreated, 'postCreated'));
    assert.deepEqual(event.rest, { data: { postCreated: pick(post, ['id', 'title', 'userId', 'createdAt']) } });
    stopCreated();

    // postUpdated of this one post, after a merge-patch through REST.
    const updated = new Inbox();
    const stopUpdated = client.subscribe(
      {
        query: 'subscription ($id: ID) { postUpdated(id: $id) { id title body userId createdAt updatedAt } }',
        variables: { id: post.id },
      },
      sinkInto(updated),
    );
    const isProbeUpdated = (r) => r.data?.postUpdated?.title?.startsWith(PROBE);
    const patch = (title) =>
      rest('PATCH', `/posts/${post.id}`, { body: { title }, contentType: 'application/merge-patch+json' });
    probes.postUpdated = await untilLive(updated, async () => assert.equal((await patch(uniqueTitle(PROBE))).status, 200), 'postUpdated');
    const patched = await patch(uniqueTitle('Edited over REST'));
    assert.equal(patched.status, 200, `PATCH: ${patched.text}`);
    assert.equal(patched.body.body, 'written through REST', 'the merge-patch kept the body');
    const updateEvent = splitEvent(await nextEvent(updated, isProbeUpdated, 'postUpdated'));
    assert.deepEqual(updateEvent.rest, {
      data: { postUpdated: pick(patched.body, ['id', 'title', 'body', 'userId', 'createdAt', 'updatedAt']) },
    });
    assert.equal(updateEvent.rest.data.postUpdated.createdAt, post.createdAt);
    stopUpdated();

    // postDeleted of alice's posts: the id REST deleted.
    const deleted = new Inbox();
    const stopDeleted = client.subscribe({ query: 'subscription { postDeleted(userId: "alice") }' }, sinkInto(deleted));
    const probeIds = new Set();
    probes.postDeleted = await untilLive(
      deleted,
      async () => {
        const probe = await createPost(uniqueTitle(PROBE));
        probeIds.add(probe.id);
        assert.equal((await rest('DELETE', `/posts/${probe.id}`)).status, 204);
      },
      'postDeleted',
    );
    const gone = await rest('DELETE', `/posts/${post.id}`);
    assert.equal(gone.status, 204, `DELETE: ${gone.text}`);
    const deleteEvent = splitEvent(await nextEvent(deleted, (r) => probeIds.has(r.data?.postDeleted), 'postDeleted'));
    assert.deepEqual(deleteEvent.rest, { data: { postDeleted: post.id } });
    stopDeleted();
    const cursors = [event.cursor, updateEvent.cursor, deleteEvent.cursor];
    assert.equal(new Set(cursors).size, 3, `three events, three cursors: ${cursors}`);
    t.diagnostic(`probing writes until each subscription was live: ${JSON.stringify(probes)}`);
  } finally {
    await client.dispose();
  }
});

test('subscriptions-transport-ws (legacy graphql-ws protocol): postCreated carries a REST write', async (t) => {
  const connected = [];
  const client = new SubscriptionClient(
    wsURL,
    {
      lazy: false,
      reconnect: false,
      connectionParams: { 'X-API-Key': ALICE_KEY },
      connectionCallback: (errors) => connected.push(errors ?? null),
    },
    WebSocket,
  );
  try {
    const created = new Inbox();
    const subscription = client
      .request({ query: 'subscription { postCreated { id title userId createdAt } }' })
      .subscribe(sinkInto(created));
    const probes = await untilLive(created, () => createPost(uniqueTitle(PROBE)), 'postCreated (legacy)');
    t.diagnostic(`probing writes until the subscription was live: ${probes}`);
    assert.deepEqual(connected, [null], 'connectionCallback: acknowledged once, without errors');
    assert.equal(client.client.protocol, 'graphql-ws', 'the subprotocol the server chose');

    const post = await createPost(uniqueTitle('Pushed over subscriptions-transport-ws'));
    const event = splitEvent(await nextEvent(created, (r) => r.data?.postCreated?.title?.startsWith(PROBE), 'postCreated (legacy)'));
    assert.deepEqual(event.rest, { data: { postCreated: pick(post, ['id', 'title', 'userId', 'createdAt']) } });
    subscription.unsubscribe();
  } finally {
    client.close();
  }
});

test('graphql-ws: a JWT connection is closed with 4403 when its token expires mid-subscription', async (t) => {
  const exp = Math.ceil(Date.now() / 1000) + 3;
  const token = await mint('alice', exp);
  let closedEvent;
  const closed = new Promise((resolve) => {
    closedEvent = (event) => resolve({ code: event.code, reason: event.reason, at: Date.now() });
  });
  const client = transportClient({ Authorization: `Bearer ${token}` }, { closed: closedEvent });
  try {
    const created = new Inbox();
    client.subscribe({ query: 'subscription { postCreated { id userId } }' }, sinkInto(created));
    // The token was accepted: the subscription sees writes.
    await untilLive(created, () => createPost(uniqueTitle(PROBE)), 'postCreated with a JWT');
    assert.ok(Date.now() < exp * 1000, 'the subscription was live before the token expired');

    const close = await within(closed, exp * 1000 + 3000 - Date.now(), 'the close after the token expired');
    assert.equal(close.code, 4403, `close code (reason ${JSON.stringify(close.reason)})`);
    assert.equal(close.reason, 'Forbidden: the token has expired');
    const late = close.at - exp * 1000;
    assert.ok(late >= 0, `closed ${-late}ms before the token's exp`);
    assert.ok(late < 1500, `closed ${late}ms after the token's exp`);
    t.diagnostic(`closed ${late}ms after the token's exp: ${close.code} ${JSON.stringify(close.reason)}`);

    // The subscription ends with the close, as its error.
    let item;
    do item = await created.next(1000, 'the end of the subscription');
    while (item.result && item.result.data?.postCreated);
    assert.equal(item.error?.code, 4403, `the subscription ended with ${describe(item)}`);
  } finally {
    await client.dispose();
  }
});

test('raw ws: a second connection_init is closed with 4429', async () => {
  const { ws, messages, closed } = await rawSocket('graphql-transport-ws');
  ws.send(JSON.stringify({ type: 'connection_init', payload: { 'X-API-Key': ALICE_KEY } }));
  assert.deepEqual(await messages.next(3000, 'connection_ack'), { type: 'connection_ack' });
  ws.send(JSON.stringify({ type: 'connection_init', payload: { 'X-API-Key': ALICE_KEY } }));
  const close = await within(closed, 3000, 'the close after a second connection_init');
  assert.deepEqual(
    { code: close.code, reason: close.reason },
    { code: 4429, reason: 'Too many initialisation requests' },
  );
  await assert.rejects(messages.next(0, 'message'), /no message/, 'nothing was sent after the ack');
});

test(`raw ws: a connection without connection_init is closed with 4408 after ws_init_timeout (${INIT_TIMEOUT_MS}ms)`, async (t) => {
  const { messages, closed, openedAt } = await rawSocket('graphql-transport-ws');
  const close = await within(closed, INIT_TIMEOUT_MS + 3000, 'the close of a connection never initialised');
  assert.deepEqual(
    { code: close.code, reason: close.reason },
    { code: 4408, reason: 'Connection initialisation timeout' },
  );
  const after = close.at - openedAt;
  assert.ok(after >= INIT_TIMEOUT_MS - 100, `closed ${after}ms after the upgrade, before the timeout`);
  assert.ok(after < INIT_TIMEOUT_MS + 1500, `closed ${after}ms after the upgrade`);
  t.diagnostic(`closed ${after}ms after the upgrade`);
  await assert.rejects(messages.next(0, 'message'), /no message/, 'nothing was sent before the close');
});

test("no token and no API key sent over the WebSocket reaches Caddy's log", async () => {
  await sleep(100); // let the last connections' log lines arrive
  await stopCaddy(caddy); // so that the log includes whatever Caddy writes on the way out
  const log = caddy.log();
  assert.ok(log.includes('/graphql'), 'the access log saw the upgrades (else this test checks nothing)');
  for (const secret of secrets) {
    assert.ok(!log.includes(secret), `caddy's log contains a credential: ${secret.slice(0, 12)}…`);
    const signature = secret.split('.')[2];
    if (signature) assert.ok(!log.includes(signature), "caddy's log contains a token's signature");
  }
});
