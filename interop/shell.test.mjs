// The ```sh run blocks of the documentation (curl calls to make run's site, outside the README's
// tour), run as pasted: the real ./caddy started as `make run` starts it (as tour.test.mjs does),
// then each block, in the order of the documents, with bash -e -o pipefail and localhost:8080 on
// Caddy's port. What a reader would check is checked: the block succeeds, it prints an answer for
// each curl, every curl -i status is 2xx, every GraphQL answer is JSON with data and no errors; a
// block that sends an Idempotency-Key is run twice, as a retry, and the second answer is the
// first's post replayed.
import assert from 'node:assert/strict';
import { bashToEnd, curlResponses, docBlocks, jsonValues, makeRunSite } from './lib.mjs';

/** Every ```sh run block of the documents, in their order. */
const blocks = docBlocks('sh').filter((b) => b.role === 'run');

const { test, site } = makeRunSite('shell');

/**
 * The curl commands of a block, each as { include (curl -i), graphql (it calls /graphql) }: the
 * lines whose first word is curl, once quoted strings (which may span lines) and backslash
 * continuations are joined. Flags are read outside the quotes, so that a body's text is no flag.
 */
function curls(text) {
  return text
    .replace(/'[^']*'/g, (quoted) => quoted.replaceAll('\n', ' '))
    .replaceAll('\\\n', ' ')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => /^curl\s/.test(line))
    .map((line) => {
      const flags = line.replace(/'[^']*'|"[^"]*"/g, "''");
      return {
        include: /\s(-[A-Za-z]*i[A-Za-z]*|--include)(?=\s|$)/.test(flags),
        graphql: /\/graphql\b/.test(line),
      };
    });
}

/** A GraphQL answer as a reader would take it: a JSON object with data and no errors. */
function assertGraphQLAnswer(block, text) {
  let answer;
  assert.doesNotThrow(() => (answer = JSON.parse(text)), `${block.where}: a GraphQL answer is not JSON: ${text}`);
  assert.ok(answer?.data != null && !('errors' in answer), `${block.where}: a GraphQL answer with errors or without data: ${text}`);
}

/** Runs a block to its end and checks each curl's answer; returns them, curl -i's as responses. */
async function run(block, commands) {
  const stdout = await bashToEnd(block, site);
  if (commands[0].include) {
    const answers = curlResponses(stdout);
    assert.equal(answers.length, commands.length, `${block.where}: one response for each curl -i:\n${stdout}`);
    answers.forEach((r, i) => {
      assert.ok(r.status >= 200 && r.status < 300, `${block.where}: curl -i printed ${r.status}:\n${stdout}`);
      if (commands[i].graphql) assertGraphQLAnswer(block, r.body);
    });
    return answers;
  }
  const lines = stdout.split('\n').filter((line) => line.trim() !== '');
  assert.equal(lines.length, commands.length, `${block.where}: one answer a line for each curl:\n${stdout}`);
  lines.forEach((line) => assertGraphQLAnswer(block, line));
  return jsonValues(stdout);
}

test('the ```sh run blocks are the ones this file was written for: GraphQL ones, a search and an idempotent create', () => {
  assert.deepEqual(
    blocks.map((b) => `${b.file}${/Idempotency-Key/i.test(b.text) ? ' idempotent' : ''}`),
    ['docs/graphql.md', 'docs/graphql.md', 'docs/rest.md', 'docs/rest.md idempotent'],
    `the \`\`\`sh run blocks: ${blocks.map((b) => b.where).join(', ')}; a new or a removed one changes this list`,
  );
});

for (const block of blocks) {
  const idempotent = /Idempotency-Key/i.test(block.text);
  const name = `${block.where}, run as pasted, succeeds, and each curl's answer is a success${idempotent ? '; run again, it replays its post' : ''}`;
  test(name, async (t) => {
    const commands = curls(block.text);
    assert.ok(commands.length > 0, `${block.where}: the block runs no curl`);
    // The output is split by one or the other: the status lines curl -i prints, or one JSON
    // answer a line, which only GraphQL's are known to be.
    assert.ok(
      commands.every((c) => c.include === commands[0].include),
      `${block.where}: either every curl is curl -i or none is, so that the answers can be told apart`,
    );
    assert.ok(
      commands[0].include || commands.every((c) => c.graphql),
      `${block.where}: a curl without -i must call /graphql, whose answer is checked as GraphQL's; print others with curl -i`,
    );
    const first = await run(block, commands);
    t.diagnostic(`${first.length} answers`);
    if (!idempotent) return;

    // A retry with the same key, as a reader who pastes the block again sends: the first post,
    // replayed.
    assert.ok(commands[0].include, `${block.where}: an idempotent create shows its Idempotent-Replayed header with curl -i`);
    const second = await run(block, commands);
    first.forEach((r, i) => {
      assert.equal(r.headers['idempotent-replayed'], undefined, `${block.where}: the first answer is no replay`);
      assert.equal(second[i].headers['idempotent-replayed'], 'true', `${block.where}: the retry's answer: ${JSON.stringify(second[i])}`);
      assert.equal(second[i].status, r.status, `${block.where}: the retry's status`);
      const id = JSON.parse(r.body).id;
      assert.match(id ?? '', /^[0-9a-f]{24}$/, `${block.where}: the first answer's post: ${r.body}`);
      assert.equal(JSON.parse(second[i].body).id, id, `${block.where}: the retry's answer is the same post`);
    });
  });
}
