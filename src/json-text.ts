/**
 * What a parsed JSON value may hold to be stored: PostgreSQL's text cannot hold NUL, its jsonb
 * refuses a lone UTF-16 surrogate (`"\ud800"`, valid JSON but no Unicode character), and a value
 * nested a million deep is no contact or message (and would exhaust the stack of whatever walks it
 * recursively). Checked without recursion, keys included, so that each becomes a 400 naming where
 * it is rather than a 500 from the database or a stack overflow.
 */

/** Deeper than any body of the API (a recipient list in a message is three levels). */
const MAX_JSON_DEPTH = 64;

interface Step {
  value: unknown;
  depth: number;
  parent: Step | undefined;
  key: string | number | undefined;
}

/**
 * What is wrong with the value, as a sentence naming where (`metadata.crm`), or undefined. Where a
 * string is is worked out only for a string that is wrong: a body of good strings costs no path.
 */
export function jsonTextProblem(root: unknown): string | undefined {
  if (typeof root === 'string') return stringProblem(root, () => 'the body');
  if (root === null || typeof root !== 'object') return undefined;
  const stack: Step[] = [{ value: root, depth: 1, parent: undefined, key: undefined }];
  for (let step = stack.pop(); step !== undefined; step = stack.pop()) {
    const { value, depth } = step;
    if (depth > MAX_JSON_DEPTH) return `The body is nested deeper than ${MAX_JSON_DEPTH} levels (at ${where(step)}).`;
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) {
        const item: unknown = value[i];
        if (typeof item === 'string') {
          if (wellFormed(item)) continue;
          const parent = step;
          return stringProblem(item, () => where({ value: item, depth, parent, key: i }));
        }
        if (item !== null && typeof item === 'object') stack.push({ value: item, depth: depth + 1, parent: step, key: i });
      }
      continue;
    }
    for (const key in value as Record<string, unknown>) {
      if (!wellFormed(key)) {
        const parent = step;
        return stringProblem(key, () => `a key of ${where(parent)}`);
      }
      const item = (value as Record<string, unknown>)[key];
      if (typeof item === 'string') {
        if (wellFormed(item)) continue;
        const parent = step;
        return stringProblem(item, () => where({ value: item, depth, parent, key }));
      }
      if (item !== null && typeof item === 'object') stack.push({ value: item, depth: depth + 1, parent: step, key });
    }
  }
  return undefined;
}

/** A string PostgreSQL can store: no NUL, no lone surrogate. */
function wellFormed(text: string): boolean {
  return !text.includes('\u0000') && text.isWellFormed();
}

function stringProblem(text: string, at: () => string): string | undefined {
  if (text.includes('\u0000')) return `Strings must not contain NUL (\\u0000) characters (${at()} does).`;
  if (!text.isWellFormed()) {
    return `Strings must be Unicode text: ${at()} holds a lone UTF-16 surrogate (a \\ud800–\\udfff escape without its pair).`;
  }
  return undefined;
}

/** `metadata.crm`, `recipients[2].value`, or `the body` for the top. */
function where(step: Step): string {
  const parts: string[] = [];
  for (let s: Step | undefined = step; s?.parent !== undefined; s = s.parent) {
    parts.push(typeof s.key === 'number' ? `[${s.key}]` : `.${String(s.key)}`);
  }
  const path = parts.reverse().join('').replace(/^\./, '');
  return path === '' ? 'the body' : path;
}
