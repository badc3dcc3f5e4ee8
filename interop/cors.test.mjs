// Chromium (headless, through puppeteer-core on Debian's chromium) on pages of two origins other
// than the site's, each served by a Node server of its own: one that the Caddyfile lists in
// allowed_origins, one that it does not. The site knows a browser by a cookie, as a site behind an
// authentication gateway does: forward_auth asks a Node gateway, which names the user of the
// cookie session=<user> (and no one for a request without it, a preflight's), and the module takes
// that user (trust_caddy_auth); subscriptions need a user (subscriptions_require_auth). From the
// allowed page, EventSource with { withCredentials: true } sends the cookie and gets the posts
// written from Node, across a cut of the stream (sse_max_duration: its reconnection sends
// Last-Event-ID); without withCredentials it sends none and is refused. fetch with credentials:
// 'include' and an Authorization header (which needs a preflight) creates a post over REST and one
// with a GraphQL mutation, and reads the answers. From the foreign page the EventSource fails with
// no event, and the same fetches are refused (a TypeError in the page). Run with `make interop`,
// or `node --test cors.test.mjs` in interop/.
import { before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { countingTest, launchChromium, listsPosts, sleep, startCaddy, stopCaddy } from './lib.mjs';
import { streamsCaddyfile, uniqueTitle, until } from './streams.mjs';

const KEY = 'interop-cors-key-of-carol';
const SSE_MAX_DURATION_MS = 2000;

// The page: subscribe(base, query, withCredentials) opens the EventSource, keeping in window.seen
// what it did; create(base, key, title) makes a post over REST and one over GraphQL, and says what
// came back.
const PAGE = `<!doctype html>
<meta charset="utf-8">
<title>From another origin</title>
<script>
window.seen = { opens: 0, errors: 0, events: [] };
window.subscribe = (base, query, withCredentials = true) => {
  const source = new EventSource(base + '/graphql?query=' + encodeURIComponent(query), { withCredentials });
  source.addEventListener('open', () => seen.opens++);
  source.addEventListener('error', () => seen.errors++);
  source.addEventListener('next', (e) => seen.events.push(JSON.parse(e.data)));
  window.source = source;
};
window.create = async (base, key, title) => {
  const headers = { Authorization: 'ApiKey ' + key, 'Content-Type': 'application/json' };
  const answer = async (res) => ({ status: res.status, location: res.headers.get('Location'), etag: res.headers.get('ETag'), body: await res.json() });
  const out = {};
  try {
    out.rest = await answer(await fetch(base + '/posts', {
      method: 'POST', credentials: 'include', headers, body: JSON.stringify({ title: title + ' over REST' }),
    }));
  } catch (err) {
    out.rest = { thrown: err.name };
  }
  try {
    out.graphql = await answer(await fetch(base + '/graphql', {
      method: 'POST', credentials: 'include', headers: { ...headers, Accept: 'application/graphql-response+json' },
      body: JSON.stringify({ query: 'mutation($t: String!) { createPost(input: {title: $t}) { id title } }', variables: { t: title + ' over GraphQL' } }),
    }));
  } catch (err) {
    out.graphql = { thrown: err.name };
  }
  return out;
};
</script>
`;

let tmp; // the scratch directory: Caddyfile, data, Caddy's home, Chromium's profile
let caddy; // { child, exited, log(), base }
let browser;
let allowed; // { server, origin }: the page's server on the origin allowed_origins lists
let foreign; // the same page on an origin it does not list
let gateway; // the authentication gateway forward_auth asks

const { test, failures } = countingTest();

/** Serves PAGE at / on 127.0.0.1 and a free port: an origin of its own. */
async function servePage() {
  const server = http.createServer((req, res) => {
    res.writeHead(req.url === '/' ? 200 : 404, { 'Content-Type': 'text/html; charset=utf-8' }).end(PAGE);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, origin: `http://127.0.0.1:${server.address().port}` };
}

/** The gateway: 200 to every request, naming the user of its cookie session=<user> if any. */
async function serveGateway() {
  const server = http.createServer((req, res) => {
    const user = /(?:^|;\s*)session=([\w-]+)/.exec(req.headers.cookie ?? '')?.[1];
    res.writeHead(200, user ? { 'Remote-User': user } : {}).end();
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, address: `127.0.0.1:${server.address().port}` };
}

/** Creates a post through REST from Node (no Origin); returns it. */
async function createPost(title) {
  const res = await fetch(`${caddy.base}/posts`, {
    method: 'POST',
    headers: { Authorization: `ApiKey ${KEY}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ title }),
  });
  const post = await res.json();
  assert.equal(res.status, 201, `POST /posts: ${JSON.stringify(post)}`);
  return post;
}

/**
 * A fresh tab on the page of site, its EventSource not yet started; statuses lists the statuses
 * of the answers of /graphql that Chromium let the page see (one without the CORS headers that
 * allow the page's origin is a failed request, whatever its status).
 */
async function openPage(site) {
  const page = await browser.newPage();
  const problems = [];
  const statuses = [];
  page.on('pageerror', (err) => problems.push(`page error: ${err.message ?? err}`));
  page.on('response', (res) => res.url().startsWith(`${caddy.base}/graphql`) && statuses.push(res.status()));
  const res = await page.goto(`${site.origin}/`, { waitUntil: 'load', timeout: 15_000 });
  assert.equal(res.status(), 200, `GET ${site.origin}/: ${res.status()}`);
  return { page, problems, statuses, seen: () => page.evaluate(() => structuredClone(window.seen)) };
}

before(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'caddy-posts-interop-cors-'));
  allowed = await servePage();
  foreign = await servePage();
  gateway = await serveGateway();
  caddy = await startCaddy({
    dir: tmp,
    caddyfile: (base) =>
      streamsCaddyfile(
        base,
        [
          `data_dir ${path.join(tmp, 'data')}`,
          `api_key ${KEY} carol`,
          'trust_caddy_auth',
          'subscriptions_require_auth',
          `allowed_origins ${allowed.origin}`,
          `sse_max_duration ${SSE_MAX_DURATION_MS / 1000}s`,
        ],
        // As docs/recipes.md's gateway, which lets a request without a user through.
        `\tforward_auth ${gateway.address} {\n\t\turi /verify\n\t\tcopy_headers Remote-User\n\t}\n` +
          `\tmap {header.Remote-User} {http.auth.user.id} {\n\t\tdefault {header.Remote-User}\n\t}\n`,
      ),
    ready: listsPosts,
  });
  browser = await launchChromium(path.join(tmp, 'chromium'));
  // The site's cookie, as its login would have set it: a cookie is the host's, whatever the port.
  await browser.setCookie({ name: 'session', value: 'carol', domain: '127.0.0.1', path: '/', httpOnly: true, sameSite: 'Lax' });
});

after(async () => {
  await browser?.close();
  await stopCaddy(caddy);
  for (const server of [allowed, foreign, gateway]) server?.server.close();
  if (failures() > 0 && caddy) {
    console.error(`--- caddy's log (${failures()} test(s) failed) ---\n${caddy.log()}--- end of caddy's log ---`);
  }
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

test("EventSource { withCredentials: true } on a page of an allowed origin, known by the site's cookie, gets the posts written, across a cut of its stream", async (t) => {
  const { page, problems, seen } = await openPage(allowed);
  try {
    await page.evaluate((base) => window.subscribe(base, 'subscription { postCreated { id title } }'), caddy.base);
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
    // Past a cut: the EventSource reconnects with Last-Event-ID, from the other origin too.
    const cutBy = Date.now() + SSE_MAX_DURATION_MS + 500;
    while (Date.now() < cutBy) {
      written.push(await createPost(uniqueTitle('post')));
      await sleep(100);
    }
    const last = written.at(-1).id;
    await until(
      async () => (await seen()).events.some((e) => e.data?.postCreated?.id === last),
      10_000,
      'the last post on the page',
      async () => JSON.stringify(await seen()),
    );
    const { opens, events } = await seen();
    const got = events.map((e) => e.data.postCreated.id);
    const ids = written.map((p) => p.id);
    assert.deepEqual(got, ids.slice(ids.indexOf(got[0])), 'every post from the first seen, once and in order');
    assert.ok(opens >= 2, `the page connected ${opens} times; want a reconnect after the cut`);
    assert.deepEqual(problems, []);
    t.diagnostic(`${got.length} events over ${opens} connections`);
  } finally {
    await page.close();
  }
});

test('EventSource without withCredentials on a page of an allowed origin sends no cookie, and is refused as anonymous', async () => {
  const { page, problems, statuses, seen } = await openPage(allowed);
  try {
    await page.evaluate((base) => window.subscribe(base, 'subscription { postCreated { id title } }', false), caddy.base);
    await until(async () => (await seen()).errors > 0, 10_000, 'the EventSource fails', async () => JSON.stringify(await seen()));
    const { opens, events } = await seen();
    assert.equal(opens, 0, 'the stream never opened');
    assert.deepEqual(events, []);
    assert.equal(await page.evaluate(() => window.source.readyState), 2, 'closed: EventSource does not retry a 401');
    assert.deepEqual(statuses, [401], 'refused for want of a user (subscriptions_require_auth)');
    assert.deepEqual(problems, []);
  } finally {
    await page.close();
  }
});

test("fetch with credentials and an API key on a page of an allowed origin creates posts over REST and GraphQL, and reads the answers", async () => {
  const { page, problems } = await openPage(allowed);
  try {
    const title = uniqueTitle('from afar');
    const out = await page.evaluate((base, key, title) => window.create(base, key, title), caddy.base, KEY, title);
    assert.equal(out.rest.status, 201, JSON.stringify(out.rest));
    assert.equal(out.rest.body.userId, 'carol', JSON.stringify(out.rest));
    assert.equal(out.rest.location, `/posts/${out.rest.body.id}`, 'Location is readable (Access-Control-Expose-Headers)');
    assert.ok(out.rest.etag, 'ETag is readable (Access-Control-Expose-Headers)');
    assert.equal(out.graphql.status, 200, JSON.stringify(out.graphql));
    assert.equal(out.graphql.body.data?.createPost?.title, `${title} over GraphQL`, JSON.stringify(out.graphql));
    assert.deepEqual(problems, []);
  } finally {
    await page.close();
  }
});

test('on a page of a foreign origin, EventSource fails with no event, and fetch is refused', async () => {
  const { page, seen } = await openPage(foreign);
  try {
    await page.evaluate((base) => window.subscribe(base, 'subscription { postCreated { id title } }'), caddy.base);
    await until(async () => (await seen()).errors > 0, 10_000, 'the EventSource fails', async () => JSON.stringify(await seen()));
    await createPost(uniqueTitle('not for the foreign page'));
    await sleep(300);
    const { opens, events } = await seen();
    assert.equal(opens, 0, 'the stream never opened');
    assert.deepEqual(events, []);
    assert.equal(await page.evaluate(() => window.source.readyState), 2, 'closed: EventSource does not retry a refusal');

    const title = uniqueTitle('refused');
    const out = await page.evaluate((base, key, title) => window.create(base, key, title), caddy.base, KEY, title);
    assert.deepEqual(out, { rest: { thrown: 'TypeError' }, graphql: { thrown: 'TypeError' } });
    const list = await (await fetch(`${caddy.base}/posts?limit=100`)).json();
    assert.ok(!JSON.stringify(list).includes(title), 'nothing was created: the preflight refused both');
  } finally {
    await page.close();
  }
});
