// Helpers of the tests of subscriptions (sse.test.mjs, multipart.test.mjs, eventsource.test.mjs;
// the inbox also subscriptions.test.mjs's; the cutting proxy resume.test.mjs's and
// changes.test.mjs's): a Caddyfile whose site also serves Caddy's metrics (and pages of a test's
// own), a reader of one series, a condition awaited, an inbox of what a subscription received,
// and a TCP proxy that cuts connections.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { SignJWT, exportJWK, generateKeyPair } from 'jose';
import { readyForTokens, serveJWKS, sleep, startCaddy, stopCaddy } from './lib.mjs';

/**
 * A Caddyfile with one site at base: Caddy's metrics at /metrics, the handle blocks of routes
 * (text, for pages of the test's own), and everything else to the posts module with the
 * subdirectives given; without the admin API, logging requests to stderr with the API key header
 * deleted (as docs/authentication.md shows).
 */
export function streamsCaddyfile(base, subdirectives, routes = '') {
  return `{
	admin off
}

${base} {
	log {
		output stderr
		format filter {
			request>headers>X-Api-Key delete
		}
	}
	handle /metrics {
		metrics
	}
${routes}	handle {
		posts {
			api_key_header X-API-Key
${subdirectives.map((line) => `\t\t\t${line}\n`).join('')}		}
	}
}
`;
}

/**
 * ./caddy on a site of streamsCaddyfile for the tests of name, with a key set of its own served
 * over HTTP: tokens of issuer for audience (mint signs them, for sub, expiring at exp), the API
 * keys of keys ({ user: key }), leeway 0s (a token ends exactly at its exp), and the
 * subdirectives of settings. stop(failed) stops both, showing Caddy's log when tests failed.
 */
export async function startTokenSite({ name, issuer, audience, keys, settings }) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), `caddy-posts-interop-${name}-`));
  const { publicKey, privateKey } = await generateKeyPair('ES256');
  const kid = `interop-${name}-es256`;
  const jwks = await serveJWKS([{ ...(await exportJWK(publicKey)), kid, alg: 'ES256', use: 'sig' }]);
  const mint = (sub, exp = '5m') =>
    new SignJWT({})
      .setProtectedHeader({ alg: 'ES256', kid, typ: 'JWT' })
      .setIssuer(issuer)
      .setAudience(audience)
      .setSubject(sub)
      .setIssuedAt()
      .setExpirationTime(exp)
      .sign(privateKey);
  const caddy = await startCaddy({
    dir: tmp,
    caddyfile: (base) =>
      streamsCaddyfile(base, [
        `data_dir ${path.join(tmp, 'data')}`,
        `jwks_url ${jwks.url}`,
        `issuer ${issuer}`,
        `audience ${audience}`,
        'leeway 0s',
        ...Object.entries(keys).map(([user, key]) => `api_key ${key} ${user}`),
        ...settings,
      ]),
    ready: readyForTokens(await mint('alice')),
  });
  return {
    caddy,
    mint,
    async stop(failed) {
      await stopCaddy(caddy);
      await new Promise((resolve) => jwks.server.close(resolve));
      if (failed > 0) console.error(`--- caddy's log (${failed} test(s) failed) ---\n${caddy.log()}--- end of caddy's log ---`);
      fs.rmSync(tmp, { recursive: true, force: true });
    },
  };
}

/**
 * REST calls to base with the API key key: rest(method, path, { body, contentType }) answers
 * { status, text, body } (body, an object, goes as JSON, or as contentType); createPost, patchPost
 * (a JSON merge patch of the title) and deletePost check the status and answer the post.
 */
export function restAs(base, key) {
  async function rest(method, path, { body, contentType = 'application/json' } = {}) {
    const headers = { 'X-API-Key': key };
    if (body !== undefined) headers['Content-Type'] = contentType;
    const res = await fetch(base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    return { status: res.status, text, body: text === '' ? null : JSON.parse(text) };
  }
  return {
    rest,
    async createPost(title, body = 'written through REST') {
      const res = await rest('POST', '/posts', { body: { title, body } });
      assert.equal(res.status, 201, `POST /posts: ${res.text}`);
      return res.body;
    },
    async patchPost(id, title) {
      const res = await rest('PATCH', `/posts/${id}`, { body: { title }, contentType: 'application/merge-patch+json' });
      assert.equal(res.status, 200, `PATCH /posts/${id}: ${res.text}`);
      return res.body;
    },
    async deletePost(id) {
      const res = await rest('DELETE', `/posts/${id}`);
      assert.equal(res.status, 204, `DELETE /posts/${id}: ${res.text}`);
    },
  };
}

/**
 * The value of the series name{labels} (labels as written between the braces, '' for none) at
 * base's /metrics, or null when Caddy does not show it.
 */
export async function metric(base, name, labels = '') {
  const res = await fetch(`${base}/metrics`);
  const text = await res.text();
  assert.equal(res.status, 200, `GET /metrics: ${text.slice(0, 200)}`);
  const series = labels === '' ? name : `${name}{${labels}}`;
  for (const line of text.split('\n')) {
    if (line.startsWith(`${series} `)) return Number(line.slice(series.length + 1));
  }
  return null;
}

/**
 * Polls cond (which may be async) every 20ms until it answers true; fails after ms saying what,
 * and what detail() says then.
 */
export async function until(cond, ms, what, detail = () => '') {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) {
      const more = await detail();
      assert.fail(`${what}: not within ${ms}ms${more ? `\n${more}` : ''}`);
    }
    await sleep(20);
  }
}

/** Resolves with what promise resolves with, or fails after ms saying what it waited for. */
export function within(promise, ms, what) {
  let timer;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: nothing within ${ms}ms`)), ms);
    }),
  ]);
}

/**
 * What one subscription (or one socket) received, in order: push() adds, next(ms) takes the oldest, waiting up
 * to ms for it; items() is what is still to take.
 */
export class Inbox {
  #items = [];
  #waiters = [];

  push(item) {
    const waiter = this.#waiters.shift();
    if (waiter) waiter(item);
    else this.#items.push(item);
  }

  items() {
    return [...this.#items];
  }

  next(ms, what = 'a message') {
    if (this.#items.length > 0) return Promise.resolve(this.#items.shift());
    return new Promise((resolve, reject) => {
      const waiter = (item) => {
        clearTimeout(timer);
        resolve(item);
      };
      const timer = setTimeout(() => {
        this.#waiters.splice(this.#waiters.indexOf(waiter), 1);
        reject(new Error(`no ${what} within ${ms}ms`));
      }, ms);
      this.#waiters.push(waiter);
    });
  }
}

/** A sink (next, error, complete) that fills inbox with { result }, { error } and { complete }. */
export function sinkInto(inbox) {
  return {
    next: (result) => inbox.push({ result }),
    error: (error) => inbox.push({ error }),
    complete: () => inbox.push({ complete: true }),
  };
}

/** Describes what an inbox held, for an assertion message: a WebSocket's close by its code. */
export function describe(item) {
  if (item.error) {
    const e = item.error;
    return `an error: ${'code' in e ? `close ${e.code} ${JSON.stringify(e.reason)}` : JSON.stringify(e.message ?? e)}`;
  }
  return item.complete ? 'complete' : `a result: ${JSON.stringify(item.result)}`;
}

/**
 * Waits until the subscription feeding inbox is live: nothing says when the server has joined a
 * subscription to its feed, and a write made before that is not seen, so poke (a write the
 * subscription sees, which isProbe tells from the others) until an event arrives. Returns how
 * many pokes it took.
 */
export async function untilLive(inbox, poke, what, ms = 10_000) {
  const deadline = Date.now() + ms;
  for (let probes = 1; Date.now() < deadline; probes++) {
    await poke();
    let item;
    try {
      item = await inbox.next(200, 'event');
    } catch {
      continue; // not live yet
    }
    assert.ok(item.result && !item.result.errors, `${what}: waiting for the subscription, got ${describe(item)}`);
    return probes;
  }
  assert.fail(`${what}: no event within ${ms}ms of probing writes`);
}

/** The next result in inbox that isProbe does not claim, within ms; anything but a result fails. */
export async function nextEvent(inbox, isProbe, what, ms = 5000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const item = await inbox.next(Math.max(deadline - Date.now(), 1), `${what} event`);
    assert.ok(item.result, `${what}: want an event, got ${describe(item)}`);
    if (!isProbe(item.result)) return item.result;
  }
}

/** A title no other write uses. */
export const uniqueTitle = (what) => `${what} ${Math.random().toString(36).slice(2, 10)}`;

/** The fields of post that a subscription selected. */
export const pick = (post, fields) => Object.fromEntries(fields.map((f) => [f, post[f]]));

/**
 * A TCP proxy on 127.0.0.1 to target (a port) that can cut (resume.test.mjs, changes.test.mjs): cut(ms)
 * destroys both sockets of every connection and destroys every connection made for ms (and,
 * with untilRefused, until one has been, 10 s at most), then lets them through again; it
 * resolves with how long it was down. accepted counts the connections let through, refused
 * those destroyed at once, endedByServer those the server ended first (sse_max_duration's end);
 * base is its URL. close() ends it.
 */
export async function cuttingProxy(target) {
  const pairs = new Set();
  let down = false;
  const proxy = { accepted: 0, refused: 0, endedByServer: 0 };
  const server = net.createServer((client) => {
    if (down) {
      proxy.refused++;
      client.destroy();
      return;
    }
    proxy.accepted++;
    const upstream = net.connect(target, '127.0.0.1');
    const pair = [client, upstream];
    pairs.add(pair);
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    for (const s of pair) s.on('error', end).on('close', end);
    let clientEnded = false;
    client.on('end', () => (clientEnded = true));
    upstream.on('end', () => clientEnded || proxy.endedByServer++);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  proxy.port = server.address().port;
  proxy.base = `http://127.0.0.1:${proxy.port}`;
  proxy.cut = async (ms, { untilRefused = false } = {}) => {
    down = true;
    const refused = proxy.refused;
    for (const pair of pairs) for (const s of pair) s.destroy();
    pairs.clear();
    const start = Date.now();
    await sleep(ms);
    while (untilRefused && proxy.refused === refused && Date.now() - start < 10_000) await sleep(10);
    down = false;
    return Date.now() - start;
  };
  proxy.close = () => {
    for (const pair of pairs) for (const s of pair) s.destroy();
    return new Promise((resolve) => server.close(resolve));
  };
  return proxy;
}
