// README.md's tour, run as pasted: the real ./caddy started as `make run` starts it (the
// repository's Caddyfile, POSTS_API_KEY=dev-key, an empty data directory; PORT and ADMIN moved
// to free ports, as the README says a reader may do), the ```sh tour-stream block (curl -N, an
// SSE subscription) left running with bash in the background, then each ```sh tour block run
// with bash -e -o pipefail, one after the other, with localhost:8080 on Caddy's port. What a
// reader would see is checked: the statuses each curl -i prints, in order, the GraphQL answers,
// and the posts the tour created arriving on the stream as `event: next`.
import assert from 'node:assert/strict';
import { bash, bashToEnd, curlResponses, docBlocks, jsonValues, sleep, makeRunSite } from './lib.mjs';

/** README.md's ```sh tour and ```sh tour-stream blocks, in its order. */
const tour = docBlocks('sh').filter((b) => b.role === 'tour' || b.role === 'tour-stream');

const { test, site } = makeRunSite('tour');

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
  const stream = bash(streamBlock, site);
  try {
    // Subscribed once the stream's first bytes (an SSE comment) are printed: posts created from
    // then on are pushed.
    for (const end = Date.now() + 10_000; !stream.stdout().startsWith(':'); await sleep(20)) {
      const problem = stream.exit() ? `ended (${JSON.stringify(stream.exit())})` : Date.now() > end && 'printed nothing within 10s';
      assert.ok(!problem, `${streamBlock.where} ${problem} before it was subscribed:\n${stream.stdout()}\n${stream.stderr()}`);
    }

    // The REST block: the statuses in the order of its comments, and what each shows.
    const answers = curlResponses(await bashToEnd(rest, site));
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
    const [query, mutation] = jsonValues(await bashToEnd(graphql, site));
    // A query's answer carries the cursor of the log's position its reads reflect.
    assert.match(query.extensions?.cursor ?? '', /^[A-Za-z0-9_-]{23}$/, JSON.stringify(query));
    assert.deepEqual(query, { data: { posts: [{ id: hello.id, title: 'Hello, edge', author: { id: 'alice', name: null } }] }, extensions: { cursor: query.extensions.cursor } });
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
