// JWT interop: drives the real ./caddy (built by `make caddy`) with tokens signed by jose, checked
// against a JWKS served from this process. Run with `make interop`, or `node --test` in interop/.
import { before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SignJWT, exportJWK, generateKeyPair } from 'jose';
import { countingTest, postsCaddyfile, readyForTokens, serveJWKS, startCaddy as startCaddyOn, stopCaddy as stopCaddyOf } from './lib.mjs';

const ISSUER = 'https://issuer.example.test/';
const AUDIENCE = 'posts-interop';
const BOB_KEY = 'interop-key-of-bob';
const CHALLENGE = 'Bearer realm="posts"';
const INVALID_TOKEN = 'Bearer realm="posts", error="invalid_token", error_description="';
const INVALID_REQUEST = 'Bearer realm="posts", error="invalid_request", error_description="';

// Every credential sent to Caddy; none may ever show up in its log.
const secrets = new Set([BOB_KEY]);

let tmp; // the scratch directory: Caddyfile, data, Caddy's home
let jwks; // { server, url }
let caddy; // { child, exited, log(), base }
let keys; // { alice: {alg, kid, privateKey}, carol: ..., stranger: ... }

// test is node:test's test, counting failures so that Caddy's log is shown when something failed.
const { test, failures } = countingTest();

// --- helpers ------------------------------------------------------------------------------------

/** A signing key: its private half, and its public half as a JWK with kid and alg. */
async function signingKey(alg, kid) {
  const { publicKey, privateKey } = await generateKeyPair(alg);
  const jwk = { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' };
  return { alg, kid, privateKey, jwk };
}

/**
 * A signed token for sub. Options change what a refused token needs changed: iss, aud, the
 * times (seconds since the epoch), or the header's kid.
 */
async function mint(key, sub, { iss = ISSUER, aud = AUDIENCE, iat, exp = '5m', kid = key.kid } = {}) {
  const token = await new SignJWT({ name: `${sub} (interop)`, email: `${sub}@example.test` })
    .setProtectedHeader({ alg: key.alg, kid, typ: 'JWT' })
    .setIssuer(iss)
    .setAudience(aud)
    .setSubject(sub)
    .setIssuedAt(iat)
    .setExpirationTime(exp)
    .sign(key.privateKey);
  secrets.add(token);
  return token;
}

/** A truncated token: cut 20 characters into its payload, or missing the last 10 of its signature. */
function cutShort(token, where) {
  const cut = where === 'payload' ? token.slice(0, token.indexOf('.') + 21) : token.slice(0, -10);
  secrets.add(cut);
  return cut;
}

const base64url = (value) => Buffer.from(JSON.stringify(value)).toString('base64url');

/** An unsecured JWT (RFC 7519 §6): alg none, an empty signature, otherwise alice's valid claims. */
function unsecuredToken(kid, sub) {
  const now = Math.floor(Date.now() / 1000);
  const claims = { iss: ISSUER, aud: AUDIENCE, sub, iat: now, exp: now + 300 };
  const token = `${base64url({ alg: 'none', kid, typ: 'JWT' })}.${base64url(claims)}.`;
  secrets.add(token);
  return token;
}

/**
 * One request to Caddy. token goes in Authorization: Bearer, key in X-API-Key, body (an object)
 * as JSON. Returns the status, the headers, and the body parsed as JSON (null when empty).
 */
async function api(method, path, { token, key, body, contentType = 'application/json', headers = {} } = {}) {
  const h = { ...headers };
  if (token !== undefined) h.Authorization = `Bearer ${token}`;
  if (key !== undefined) h['X-API-Key'] = key;
  if (body !== undefined) h['Content-Type'] = contentType;
  const res = await fetch(caddy.base + path, {
    method,
    headers: h,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json = null;
  if (text !== '') {
    try {
      json = JSON.parse(text);
    } catch {
      assert.fail(`${method} ${path}: ${res.status} with a body that is not JSON: ${text}`);
    }
  }
  return { status: res.status, headers: res.headers, body: json, text };
}

/** Asserts an error response: the status, a JSON content type, and {"error": "<string>"}. */
function assertError(res, status, what) {
  assert.equal(res.status, status, `${what}: want ${status}, got ${res.status} ${res.text}`);
  assert.match(res.headers.get('content-type') ?? '', /^application\/json\b/, `${what}: Content-Type`);
  assert.equal(typeof res.body?.error, 'string', `${what}: the body has a string "error": ${res.text}`);
  assert.notEqual(res.body.error, '', `${what}: the error is empty`);
}

/** Asserts a 401 for a bad token, with the RFC 6750 invalid_token challenge. */
function assertInvalidToken(res, what) {
  assertError(res, 401, what);
  const challenge = res.headers.get('www-authenticate') ?? '';
  assert.ok(challenge.startsWith(INVALID_TOKEN), `${what}: WWW-Authenticate is ${JSON.stringify(challenge)}`);
}

/** Asserts a 400 for a malformed credential, with the RFC 6750 invalid_request challenge. */
function assertInvalidRequest(res, what) {
  assertError(res, 400, what);
  const challenge = res.headers.get('www-authenticate') ?? '';
  assert.ok(challenge.startsWith(INVALID_REQUEST), `${what}: WWW-Authenticate is ${JSON.stringify(challenge)}`);
}

/** Creates a post as the owner of token and checks the 201. */
async function createPost(token, post = { title: 'A post from the interop test', body: 'Signed by jose' }) {
  const res = await api('POST', '/posts', { token, body: post });
  assert.equal(res.status, 201, `create: ${res.text}`);
  return res.body;
}

/** The posts of userId, as the API lists them now. */
async function postsOf(userId) {
  const res = await api('GET', `/posts?userId=${userId}&limit=100`);
  assert.equal(res.status, 200, res.text);
  return res.body;
}

/** The post as stored now (anonymous read). */
async function stored(id) {
  const res = await api('GET', `/posts/${id}`);
  assert.equal(res.status, 200, res.text);
  return res.body;
}

/** Starts ./caddy on a Caddyfile of its own and waits until it serves /posts and checks tokens. */
async function startCaddy() {
  const probe = await mint(keys.alice, 'alice');
  caddy = await startCaddyOn({
    dir: tmp,
    caddyfile: (base) =>
      postsCaddyfile(base, [
        `data_dir ${path.join(tmp, 'data')}`,
        `jwks_url ${jwks.url}`,
        `issuer ${ISSUER}`,
        `audience ${AUDIENCE}`,
        `api_key ${BOB_KEY} bob`,
      ]),
    ready: readyForTokens(probe),
  });
}

const stopCaddy = () => stopCaddyOf(caddy);

// --- setup --------------------------------------------------------------------------------------

before(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'caddy-posts-interop-'));
  keys = {
    alice: await signingKey('RS256', 'interop-rs256'),
    carol: await signingKey('ES256', 'interop-es256'),
    // Not in the JWKS, but it claims alice's kid.
    stranger: await signingKey('RS256', 'interop-rs256'),
  };
  jwks = await serveJWKS([keys.alice.jwk, keys.carol.jwk]);
  await startCaddy();
});

after(async () => {
  await stopCaddy();
  await new Promise((resolve) => jwks?.server.close(resolve) ?? resolve());
  if (failures() > 0 && caddy) {
    console.error(`--- caddy's log (${failures()} test(s) failed) ---\n${caddy.log()}--- end of caddy's log ---`);
  }
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

// --- the tests ----------------------------------------------------------------------------------

test('alice creates a post with an RS256 token, and anyone can read it', async () => {
  const token = await mint(keys.alice, 'alice');
  const res = await api('POST', '/posts', { token, body: { title: 'Hello from jose', body: 'RS256' } });
  assert.equal(res.status, 201, res.text);
  assert.match(res.headers.get('content-type') ?? '', /^application\/json\b/);
  const post = res.body;
  assert.match(post.id, /^[0-9a-f]{24}$/);
  assert.equal(res.headers.get('location'), `/posts/${post.id}`);
  assert.equal(post.userId, 'alice');
  assert.equal(post.title, 'Hello from jose');
  assert.equal(post.body, 'RS256');
  assert.match(post.createdAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  assert.equal(post.updatedAt, post.createdAt);

  const read = await api('GET', `/posts/${post.id}`);
  assert.equal(read.status, 200, read.text);
  assert.deepEqual(read.body, post);
});

test('carol creates a post with an ES256 token', async () => {
  const post = await createPost(await mint(keys.carol, 'carol'), { title: 'Hello from carol' });
  assert.equal(post.userId, 'carol');
  assert.deepEqual(await stored(post.id), post);
});

test('only the author may change or delete a post; others get 403 or 401 and change nothing', async () => {
  const alice = await mint(keys.alice, 'alice');
  const carol = await mint(keys.carol, 'carol');
  const post = await createPost(alice, { title: 'Before', body: 'kept' });

  for (const contentType of ['application/json', 'application/merge-patch+json']) {
    const title = `Edited as ${contentType}`;
    const res = await api('PATCH', `/posts/${post.id}`, { token: alice, body: { title }, contentType });
    assert.equal(res.status, 200, `alice PATCH (${contentType}): ${res.text}`);
    assert.equal(res.body.title, title);
    assert.equal(res.body.body, 'kept');
    assert.equal(res.body.userId, 'alice');
    assert.equal(res.body.createdAt, post.createdAt);
  }
  const edited = await stored(post.id);
  assert.equal(edited.title, 'Edited as application/merge-patch+json');

  const hijack = { title: 'Hijacked' };
  assertError(await api('PATCH', `/posts/${post.id}`, { token: carol, body: hijack }), 403, 'carol PATCH');
  assertError(await api('DELETE', `/posts/${post.id}`, { token: carol }), 403, 'carol DELETE');
  assertError(await api('PATCH', `/posts/${post.id}`, { key: BOB_KEY, body: hijack }), 403, 'bob (API key) PATCH');
  assertError(await api('DELETE', `/posts/${post.id}`, { key: BOB_KEY }), 403, 'bob (API key) DELETE');

  const anonymous = await api('PATCH', `/posts/${post.id}`, { body: hijack });
  assertError(anonymous, 401, 'anonymous PATCH');
  assert.equal(anonymous.headers.get('www-authenticate'), CHALLENGE);
  const anonymousDelete = await api('DELETE', `/posts/${post.id}`);
  assertError(anonymousDelete, 401, 'anonymous DELETE');
  assert.equal(anonymousDelete.headers.get('www-authenticate'), CHALLENGE);

  assert.deepEqual(await stored(post.id), edited);
});

test('refused tokens get 401 invalid_token and change nothing', async () => {
  const now = Math.floor(Date.now() / 1000);
  const refused = {
    'an expired token': await mint(keys.alice, 'alice', { iat: now - 3600, exp: now - 600 }),
    'a token for another audience': await mint(keys.alice, 'alice', { aud: 'someone-else' }),
    'a token from another issuer': await mint(keys.alice, 'alice', { iss: 'https://evil.example.test/' }),
    'a token signed by a key not in the JWKS (with a kid that is)': await mint(keys.stranger, 'alice'),
    'an unsecured token (alg none)': unsecuredToken(keys.alice.kid, 'alice'),
    'a token cut short in its payload': cutShort(await mint(keys.alice, 'alice'), 'payload'),
    'a token cut short in its signature': cutShort(await mint(keys.alice, 'alice'), 'signature'),
  };
  const post = await createPost(await mint(keys.alice, 'alice'), { title: 'Guarded', body: 'unchanged' });
  const before = await postsOf('alice');

  for (const [what, token] of Object.entries(refused)) {
    assertInvalidToken(await api('POST', '/posts', { token, body: { title: `POST with ${what}` } }), `POST with ${what}`);
    assertInvalidToken(await api('PATCH', `/posts/${post.id}`, { token, body: { title: 'Changed' } }), `PATCH with ${what}`);
    assertInvalidToken(await api('DELETE', `/posts/${post.id}`, { token }), `DELETE with ${what}`);
    assert.deepEqual(await postsOf('alice'), before, `alice's posts after requests with ${what}`);
  }
  assert.deepEqual(await stored(post.id), post);
});

test('a bad token is refused on a public read too', async () => {
  const now = Math.floor(Date.now() / 1000);
  const expired = await mint(keys.alice, 'alice', { iat: now - 3600, exp: now - 600 });
  assertInvalidToken(await api('GET', '/posts', { token: expired }), 'GET /posts with an expired token');
  const post = await createPost(await mint(keys.alice, 'alice'));
  assertInvalidToken(await api('GET', `/posts/${post.id}`, { token: expired }), 'GET /posts/{id} with an expired token');
});

test('an Authorization header that names Bearer but has no token is a bad request', async () => {
  const before = await postsOf('alice');
  const res = await api('POST', '/posts', { headers: { Authorization: 'Bearer' }, body: { title: 'No token' } });
  assertInvalidRequest(res, 'POST with "Authorization: Bearer"');
  assertInvalidRequest(await api('GET', '/posts', { headers: { Authorization: 'Bearer' } }), 'GET with "Authorization: Bearer"');
  assert.deepEqual(await postsOf('alice'), before);
});

test("alice's token together with bob's API key is a bad request", async () => {
  const token = await mint(keys.alice, 'alice');
  const before = await postsOf('alice');
  const beforeBob = await postsOf('bob');
  const res = await api('POST', '/posts', { token, key: BOB_KEY, body: { title: 'Whose post?' } });
  assertInvalidRequest(res, "POST with alice's token and bob's key");
  assert.deepEqual(await postsOf('alice'), before);
  assert.deepEqual(await postsOf('bob'), beforeBob);
});

test('alice deletes her post, and then it is gone', async () => {
  const token = await mint(keys.alice, 'alice');
  const post = await createPost(token, { title: 'Short-lived' });
  const res = await api('DELETE', `/posts/${post.id}`, { token });
  assert.equal(res.status, 204, res.text);
  assert.equal(res.text, '');
  assertError(await api('GET', `/posts/${post.id}`), 404, 'GET after DELETE');
  assertError(await api('DELETE', `/posts/${post.id}`, { token }), 404, 'DELETE after DELETE');
  assert.ok(!(await postsOf('alice')).some((p) => p.id === post.id), 'the list no longer has the post');
});

test('no token and no API key ever reaches Caddy\'s log', async () => {
  await stopCaddy(); // so that the log includes whatever Caddy writes on the way out
  const log = caddy.log();
  assert.ok(log.length > 0, 'caddy logged something (else this test checks nothing)');
  // The access log (with the filter of docs/authentication.md for the API key header) saw the authenticated calls.
  assert.ok(log.includes('"user_id":"bob"') && log.includes('"user_id":"alice"'), 'the access log names the callers');
  for (const secret of secrets) {
    assert.ok(!log.includes(secret), `caddy's log contains a credential: ${secret.slice(0, 12)}…`);
    // A token's signature alone would be just as bad; its header is not secret.
    const signature = secret.split('.')[2];
    if (signature) assert.ok(!log.includes(signature), `caddy's log contains a token's signature`);
  }
});
