// Persisted queries interop: Apollo Client (@apollo/client) with its persisted-queries link,
// hashing with node:crypto, against the real ./caddy (built by `make caddy`): the automatic
// persisted queries protocol over POST and over GET, and a manifest's safelist. What the server
// received is read from Caddy's access log. Run with `make interop`, or `node --test` in interop/.
import { before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ApolloClient, HttpLink, InMemoryCache, gql } from '@apollo/client';
import { PersistedQueryLink } from '@apollo/client/link/persisted-queries';
import { countingTest, listsPosts, postsCaddyfile, startCaddy, stopCaddy } from './lib.mjs';

const ALICE_KEY = 'interop-persisted-key-of-alice';

const sha256 = (text) => createHash('sha256').update(text).digest('hex');

let tmp; // the scratch directory: Caddyfiles, data, Caddy's home
let caddy; // { child, exited, log(), base }
let postId; // a post alice wrote

// test is node:test's test, counting failures so that Caddy's log is shown when something failed.
const { test, failures } = countingTest();

// --- helpers ------------------------------------------------------------------------------------

/** A Caddy in dir (a new folder of tmp) with the posts module and the subdirectives given. */
async function start(dir, subdirectives) {
  fs.mkdirSync(dir);
  return startCaddy({
    dir,
    caddyfile: (base) => postsCaddyfile(base, [`data_dir ${path.join(dir, 'data')}`, `api_key ${ALICE_KEY} alice`, ...subdirectives]),
    ready: listsPosts,
  });
}

/**
 * An Apollo Client of server's /graphql with the persisted-queries link (its options given), and
 * the bodies and URLs of the requests it sent, in order, as its fetch saw them.
 */
function apolloClient(server, options = {}) {
  const sent = [];
  const link = new PersistedQueryLink({ sha256, ...options }).concat(
    new HttpLink({
      uri: `${server.base}/graphql`,
      fetch: (url, init) => {
        sent.push({ method: init.method ?? 'GET', url: String(url), body: init.body ?? null });
        return fetch(url, init);
      },
    }),
  );
  return { client: new ApolloClient({ link, cache: new InMemoryCache() }), sent };
}

/** The requests of /graphql that server's access log holds, from the nth on. */
function served(server, from = 0) {
  return server
    .log()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line))
    .filter((entry) => entry.logger?.startsWith('http.log.access') && entry.request.uri.startsWith('/graphql'))
    .map((entry) => ({ method: entry.request.method, uri: entry.request.uri, status: entry.status, bytesRead: entry.bytes_read }))
    .slice(from);
}

const POST_QUERY = gql`
  query PostTitle($id: ID!) {
    post(id: $id) {
      id
      title
    }
  }
`;

// --- set-up -------------------------------------------------------------------------------------

before(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'caddy-posts-persisted-'));
  caddy = await start(path.join(tmp, 'apq'), []);
  const res = await fetch(`${caddy.base}/posts`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-API-Key': ALICE_KEY },
    body: JSON.stringify({ title: 'persisted' }),
  });
  assert.equal(res.status, 201);
  postId = (await res.json()).id;
});

after(async () => {
  await stopCaddy(caddy);
  if (failures() > 0 && caddy) {
    console.error(`--- caddy's log (${failures()} test(s) failed) ---\n${caddy.log()}--- end of caddy's log ---`);
  }
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

// --- the tests ----------------------------------------------------------------------------------

test('Apollo Client: the first query misses, is sent again with its text, and the next is sent by hash alone', async () => {
  const before = served(caddy).length;
  const { client, sent } = apolloClient(caddy);
  for (let i = 0; i < 2; i++) {
    const { data } = await client.query({ query: POST_QUERY, variables: { id: postId }, fetchPolicy: 'network-only' });
    assert.deepEqual(data.post, { __typename: 'Post', id: postId, title: 'persisted' });
  }
  // What Apollo sent: the hash alone, then the text with the hash, then the hash alone.
  const bodies = sent.map((r) => JSON.parse(r.body));
  assert.equal(bodies.length, 3, JSON.stringify(bodies));
  const hash = bodies[0].extensions.persistedQuery.sha256Hash;
  assert.equal(hash, sha256(bodies[1].query), 'the hash is the SHA-256 of the text Apollo sent');
  assert.deepEqual(
    bodies.map((b) => [b.query === undefined, b.extensions.persistedQuery.sha256Hash]),
    [[true, hash], [false, hash], [true, hash]],
  );
  // What Caddy read: the miss (answered 200, as Apollo Server answers it), the registration,
  // then the hit, a body shorter than the registration's by the query's text at least.
  const log = served(caddy, before);
  assert.deepEqual(log.map((r) => [r.method, r.status]), [['POST', 200], ['POST', 200], ['POST', 200]], JSON.stringify(log));
  assert.equal(log[2].bytesRead, sent[2].body.length, 'the hit is the body Apollo sent');
  assert.ok(log[1].bytesRead - log[2].bytesRead >= bodies[1].query.length, `the registration read ${log[1].bytesRead} bytes, the hit ${log[2].bytesRead}`);
});

test('Apollo Client with GET for hashed queries: the hit is a GET whose URL holds the hash and no query', async () => {
  const before = served(caddy).length;
  const query = gql`
    query PostId($id: ID!) {
      post(id: $id) {
        id
      }
    }
  `;
  const { client, sent } = apolloClient(caddy, { useGETForHashedQueries: true });
  for (let i = 0; i < 2; i++) {
    const { data } = await client.query({ query, variables: { id: postId }, fetchPolicy: 'network-only' });
    assert.equal(data.post.id, postId);
  }
  assert.deepEqual(sent.map((r) => r.method), ['GET', 'POST', 'GET']);
  const log = served(caddy, before);
  assert.deepEqual(log.map((r) => [r.method, r.status]), [['GET', 200], ['POST', 200], ['GET', 200]], JSON.stringify(log));
  const hit = new URL(log[2].uri, caddy.base).searchParams;
  assert.equal(hit.get('query'), null, `the hit's URL: ${log[2].uri}`);
  assert.equal(JSON.parse(hit.get('extensions')).persistedQuery.sha256Hash.length, 64);
});

test('Apollo Client against a safelist: a listed operation runs by hash alone, another is refused without a retry', async () => {
  // The manifest lists the text Apollo sends for POST_QUERY, as Apollo's manifest generator
  // would: the text its link hashes.
  const texts = [];
  const { client: recorder } = apolloClient(caddy, { sha256: (text) => (texts.push(text), sha256(text)) });
  await recorder.query({ query: POST_QUERY, variables: { id: postId }, fetchPolicy: 'network-only' });
  const body = texts[0];
  const manifest = path.join(tmp, 'persisted-query-manifest.json');
  fs.writeFileSync(
    manifest,
    JSON.stringify({ format: 'apollo-persisted-query-manifest', version: 1, operations: [{ id: sha256(body), body, name: 'PostTitle', type: 'query' }] }),
  );
  const safelisted = await start(path.join(tmp, 'safelist'), [`persisted_queries ${manifest}`, 'persisted_queries_only']);
  try {
    const { client, sent: toSafelist } = apolloClient(safelisted);
    const { data } = await client.query({ query: POST_QUERY, variables: { id: postId }, fetchPolicy: 'network-only' });
    assert.equal(data.post, null, 'the listed operation ran (on a store without the post)');
    assert.equal(toSafelist.length, 1, 'by its hash alone, found at once');
    await assert.rejects(
      client.query({ query: gql`query Other { posts { id } }`, fetchPolicy: 'network-only' }),
      (err) => err.errors?.[0]?.extensions?.code === 'PERSISTED_QUERY_NOT_IN_LIST',
    );
    assert.equal(toSafelist.length, 2, 'an operation not listed is not sent again with its text');
    assert.deepEqual(served(safelisted).map((r) => r.status), [200, 404]);
  } finally {
    await stopCaddy(safelisted);
  }
});
