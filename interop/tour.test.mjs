// README.md's tour, run as pasted: the real ./caddy started as `make run` starts it (the
// repository's Caddyfile, POSTS_API_KEY=dev-key, an empty data directory; PORT and ADMIN moved
// to free ports, as the README says a reader may do), the ```sh tour-stream block (curl -N, an
// SSE subscription) left running with bash in the background, then each ```sh tour block run
// with bash -e -o pipefail, one after the other, with localhost:8080 on Caddy's port. What a
// reader would see is checked: the statuses each curl -i prints, in order, the GraphQL answers,
// and the posts the tour created arriving on the stream as `event: next`.
import { before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, countingTest, docBlocks, freePort, sleep, startCaddy, stopCaddy, watch } from './lib.mjs';

/** The address the README's commands name, which the test moves to Caddy's port. */
const README_ADDRESS = 'localhost:8080';

/** README.md's ```sh tour and ```sh tour-stream blocks, in its order. */
const tour = docBlocks('sh').filter((b) => b.role === 'tour' || b.role === 'tour-stream');

let tmp; // the scratch directory: Caddy's Caddyfile and home
let caddy; // { child, exited, log(), base }
let port; // Caddy's, in place of 8080

const { test, failures } = countingTest();

before(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'caddy-posts-tour-'));
  const admin = await freePort();
  caddy = await startCaddy({
    dir: tmp,
    caddyfile: () => fs.readFileSync(path.join(ROOT, 'Caddyfile'), 'utf8'),
    env: (base) => ({ PORT: new URL(base).port, ADMIN: `localhost:${admin}`, POSTS_API_KEY: 'dev-key' }),
    ready: async (base) => {
      const res = await fetch(`${base}/posts`);
      await res.arrayBuffer();
      return res.status === 200 || `GET /posts: ${res.status}`;
    },
  });
  port = new URL(caddy.base).port;
});

after(async () => {
  await stopCaddy(caddy);
  if (failures() > 0 && caddy) {
    console.error(`--- caddy's log (${failures()} test(s) failed) ---\n${caddy.log()}--- end of caddy's log ---`);
  }
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

/** Runs a block with bash -e -o pipefail, in a process group of its own so that stop() ends the curl it runs too. */
function bash(block) {
  const child = spawn('bash', ['-e', '-o', 'pipefail', '-c', block.text], { cwd: tmp, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  return watch(child, { group: true });
}

/** A block with the README's address moved to Caddy's port; it must name that address. */
function onCaddy(block) {
  assert.ok(block.text.includes(README_ADDRESS), `${block.where}: the block names ${README_ADDRESS}`);
  const text = block.text.replaceAll(README_ADDRESS, `localhost:${port}`);
  const others = [...text.matchAll(/(localhost|127\.0\.0\.1)(:\d+)?/g)].map((m) => m[0]).filter((a) => a !== `localhost:${port}`);
  assert.deepEqual(others, [], `${block.where}: the block names other addresses than ${README_ADDRESS}`);
  return { ...block, text };
}

/** Runs a tour block to its end; it must succeed. Returns its stdout. */
async function runToEnd(block) {
  const run = bash(onCaddy(block));
  const timer = setTimeout(() => run.stop(), 20_000);
  const exit = await run.exited;
  clearTimeout(timer);
  assert.deepEqual(exit, { code: 0, signal: null }, `${block.where} failed; stdout:\n${run.stdout()}\nstderr:\n${run.stderr()}`);
  return run.stdout();
}

/** The responses curl -i printed, each as { status, headers (lower-case names), body }. */
function responses(stdout) {
  return stdout
    .split(/^(?=HTTP\/\S+ \d{3}\b)/m)
    .filter((part) => part.startsWith('HTTP/'))
    .map((part) => {
      const [head, ...body] = part.split('\r\n\r\n');
      const [statusLine, ...fields] = head.split('\r\n');
      const headers = Object.fromEntries(
        fields.map((f) => {
          const i = f.indexOf(':');
          return [f.slice(0, i).trim().toLowerCase(), f.slice(i + 1).trim()];
        }),
      );
      return { status: Number(statusLine.split(' ')[1]), headers, body: body.join('\r\n\r\n') };
    });
}

/** The JSON values printed one after another (curl -s of several requests). */
function jsonValues(stdout) {
  return stdout
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line));
}

/** The events of an SSE stream as curl -N printed them: { event, id, data } for each. */
function sseEvents(stdout) {
  return stdout
    .split('\n\n')
    .map((chunk) => {
      const fields = {};
      for (const line of chunk.split('\n')) {
        const m = /^(event|id|data): ?(.*)$/.exec(line);
        if (m) fields[m[1]] = m[1] === 'data' && fields.data !== undefined ? `${fields.data}\n${m[2]}` : m[2];
      }
      return fields;
    })
    .filter((e) => e.event !== undefined);
}

test("README.md's tour is the blocks this file runs: two ```sh tour blocks and a ```sh tour-stream one", () => {
  assert.deepEqual(
    tour.map((b) => `${b.file} ${b.role}`),
    ['README.md tour', 'README.md tour', 'README.md tour-stream'],
    `the tour's blocks: ${tour.map((b) => b.where).join(', ')}; a new one needs its check here`,
  );
});

test("README.md's tour, as pasted, prints what the README says, and its posts arrive on its stream", async (t) => {
  const [rest, graphql, streamBlock] = tour;
  const stream = bash(onCaddy(streamBlock));
  try {
    // Subscribed once the stream's first bytes (an SSE comment) are printed: posts created from
    // then on are pushed.
    for (const end = Date.now() + 10_000; !stream.stdout().startsWith(':'); await sleep(20)) {
      const problem = stream.exit() ? `ended (${JSON.stringify(stream.exit())})` : Date.now() > end && 'printed nothing within 10s';
      assert.ok(!problem, `${streamBlock.where} ${problem} before it was subscribed:\n${stream.stdout()}\n${stream.stderr()}`);
    }

    // The REST block: the statuses in the order of its comments, and what each shows.
    const answers = responses(await runToEnd(rest));
    const shown = answers.map((r) => `${r.status} ${r.body.trim()}`).join('\n');
    assert.deepEqual(
      answers.map((r) => r.status),
      [201, 200, 200, 200, 200, 204, 401, 404, 422],
      `${rest.where}: the statuses curl -i printed\n${shown}`,
    );
    const [created, list, byAuthor, one, patched, , noKey, missing, invalid] = answers;
    const hello = JSON.parse(created.body);
    assert.deepEqual([hello.title, hello.body, hello.userId], ['Hello, edge', 'Served by Caddy', 'alice']);
    assert.equal(created.headers.location, `/posts/${hello.id}`);
    const second = JSON.parse(one.body);
    assert.equal(second.title, 'Second post');
    assert.deepEqual(JSON.parse(list.body).map((p) => p.title), ['Second post', 'Hello, edge'], 'the list, newest first');
    assert.deepEqual(JSON.parse(byAuthor.body).map((p) => p.id), [second.id], "alice's first page of one");
    assert.match(byAuthor.headers.link ?? '', /rel="next"/, 'a page of one has a Link to the next');
    const edited = JSON.parse(patched.body);
    assert.deepEqual([edited.id, edited.title, 'body' in edited], [second.id, 'Second post, edited', false]);
    for (const failed of [noKey, missing, invalid]) {
      assert.equal(failed.headers['content-type'], 'application/json', `${failed.status}: ${failed.body}`);
      assert.equal(typeof JSON.parse(failed.body).error, 'string', `${failed.status}: ${failed.body}`);
    }

    // The GraphQL block: the query's posts (only Hello, edge is left), and the mutation's post.
    const [query, mutation] = jsonValues(await runToEnd(graphql));
    assert.deepEqual(query, { data: { posts: [{ id: hello.id, title: 'Hello, edge', author: { id: 'alice', name: null } }] } });
    assert.match(mutation.data?.createPost?.id ?? '', /^[0-9a-f]{24}$/, JSON.stringify(mutation));
    assert.deepEqual(mutation, { data: { createPost: { id: mutation.data.createPost.id, userId: 'alice', title: 'From GraphQL' } } });

    // The stream: every post the tour created, in order, each an event: next whose id: is its cursor.
    const titles = ['Hello, edge', 'Second post', 'From GraphQL'];
    for (const end = Date.now() + 10_000; sseEvents(stream.stdout()).length < titles.length; await sleep(20)) {
      assert.ok(Date.now() < end, `${streamBlock.where} printed ${sseEvents(stream.stdout()).length} events within 10s:\n${stream.stdout()}`);
    }
    const events = sseEvents(stream.stdout());
    assert.deepEqual(events.map((e) => e.event), titles.map(() => 'next'), stream.stdout());
    const data = events.map((e) => JSON.parse(e.data));
    assert.deepEqual(
      data.map((d) => d.data.postCreated),
      [
        { id: hello.id, title: 'Hello, edge', userId: 'alice' },
        { id: second.id, title: 'Second post', userId: 'alice' },
        { id: mutation.data.createPost.id, title: 'From GraphQL', userId: 'alice' },
      ],
    );
    assert.deepEqual(
      events.map((e) => e.id),
      data.map((d) => d.extensions.cursor),
      "each event's id: is its cursor",
    );
    assert.equal(stream.exit(), null, `${streamBlock.where} is still subscribed`);
    t.diagnostic(`the stream printed ${events.length} events`);
  } finally {
    await stream.stop();
  }
});
