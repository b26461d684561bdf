import assert from 'node:assert/strict';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import type { FastifyInstance } from 'fastify';

/**
 * The event contract as the served OpenAPI document states it (its `webhooks` section): `check`
 * asserts that a body Hopper posted is valid for the operation of its own `type`, so every test that
 * receives events can hold them to the document.
 */
export interface EventContract {
  doc: Record<string, any>;
  check(body: string | Record<string, unknown>): Record<string, any>;
  /** How many bodies were checked, by type. */
  checked: Map<string, number>;
}

export async function eventContract(app: FastifyInstance): Promise<EventContract> {
  const reply = await app.inject({ method: 'GET', url: '/v3/openapi.json' });
  assert.equal(reply.statusCode, 200);
  const doc = reply.json();
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  ajv.addFormat('uri', true).addFormat('date-time', true).addFormat('email', true).addFormat('binary', true);
  ajv.addSchema({ ...doc, $id: 'openapi' });
  const validators = new Map<string, ValidateFunction>();
  const checked = new Map<string, number>();
  return {
    doc,
    checked,
    check(body) {
      const event = (typeof body === 'string' ? JSON.parse(body) : body) as Record<string, any>;
      assert.ok(doc.webhooks[event.type], `the document has no webhook ${event.type}`);
      let validate = validators.get(event.type);
      if (!validate) {
        const pointer = `openapi#/webhooks/${event.type.replaceAll('~', '~0').replaceAll('/', '~1')}/post/requestBody/content/application~1json/schema`;
        validate = ajv.compile({ $ref: pointer });
        validators.set(event.type, validate);
      }
      assert.ok(
        validate(event),
        `${event.type} does not match the document: ${JSON.stringify(validate.errors)}\n${JSON.stringify(event).slice(0, 2000)}`,
      );
      checked.set(event.type, (checked.get(event.type) ?? 0) + 1);
      return event;
    },
  };
}
