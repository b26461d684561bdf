import assert from 'node:assert/strict';
import { test } from 'node:test';
import { jsonTextProblem } from '../src/json-text.ts';

test('a JSON value PostgreSQL cannot store is named by where it is; a good one has no problem', () => {
  const good = { name: 'Drop', metadata: { crm: 'x', tags: ['a', 'b'] }, recipients: [{ group: 'Tags', value: 1 }] };
  assert.equal(jsonTextProblem(good), undefined);
  assert.equal(jsonTextProblem('plain'), undefined);
  assert.equal(jsonTextProblem(42), undefined);
  assert.equal(
    jsonTextProblem({ metadata: { crm: 'a\u0000b' } }),
    'Strings must not contain NUL (\\u0000) characters (metadata.crm does).',
  );
  assert.equal(
    jsonTextProblem({ recipients: [{ value: 1 }, { value: 2 }, { value: '\ud800' }] }),
    'Strings must be Unicode text: recipients[2].value holds a lone UTF-16 surrogate (a \\ud800–\\udfff escape without its pair).',
  );
  assert.equal(jsonTextProblem({ tags: ['ok', 'no\u0000'] }), 'Strings must not contain NUL (\\u0000) characters (tags[1] does).');
  assert.equal(
    jsonTextProblem({ metadata: { 'k\u0000': 1 } }),
    'Strings must not contain NUL (\\u0000) characters (a key of metadata does).',
  );
  assert.equal(
    jsonTextProblem('\udc00'),
    'Strings must be Unicode text: the body holds a lone UTF-16 surrogate (a \\ud800–\\udfff escape without its pair).',
  );
  let deep: unknown = 'x';
  for (let i = 0; i < 70; i++) deep = [deep];
  assert.match(jsonTextProblem(deep) ?? '', /^The body is nested deeper than 64 levels \(at (\[0\]){64}\)\.$/);
});
