// The OpenAPI description of the REST API (openapi/openapi.yaml) linted by Redocly's CLI with its
// strictest built-in ruleset: a document that is not valid OpenAPI 3.1, or breaks a rule, fails.
// (The Go end-to-end tests hold every REST answer they see against the same document.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const DOCUMENT = fileURLToPath(new URL('../openapi/openapi.yaml', import.meta.url));
const REDOCLY = fileURLToPath(new URL('./node_modules/.bin/redocly', import.meta.url));

test('Redocly lints openapi/openapi.yaml clean with recommended-strict: no error, no warning', () => {
  const run = spawnSync(REDOCLY, ['lint', '--extends=recommended-strict', '--format=json', DOCUMENT], {
    encoding: 'utf8',
    env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
  });
  let report;
  try {
    report = JSON.parse(run.stdout);
  } catch {
    assert.fail(`redocly lint wrote no JSON report (exit ${run.status}):\n${run.stdout}\n${run.stderr}`);
  }
  assert.deepEqual(report.problems, [], 'the problems redocly found');
  assert.deepEqual(report.totals, { errors: 0, warnings: 0, ignored: 0 });
  assert.equal(run.status, 0);
});
