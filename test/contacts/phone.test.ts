import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { normalizeNanpPhone } from '../../src/contacts/phone.ts';

describe('normalizeNanpPhone', () => {
  test('accepts the ways people type a North American number and returns its 10 digits', () => {
    const accepted: [string, string][] = [
      ['(727) 232-9117', '7272329117'],
      ['727-232-9117', '7272329117'],
      ['727.232.9117', '7272329117'],
      ['7272329117', '7272329117'],
      ['1 727 232 9117', '7272329117'],
      ['+1 (727) 232-9117', '7272329117'],
      ['+17272329117', '7272329117'],
      ['416-967-1111', '4169671111'], // Canada
      ['+1 876 927 1234', '8769271234'], // Jamaica shares +1
      ['(800) 356-9377', '8003569377'],
    ];
    for (const [typed, digits] of accepted) assert.equal(normalizeNanpPhone(typed), digits, typed);
  });

  test('refuses anything that is not one valid NANP number', () => {
    const refused = [
      '',
      '123-456-7890', // area codes never start with 1
      '555-555-5555', // nor is 555 an area code
      '727-032-9117', // exchanges never start with 0
      '727-232-911',
      '727-232-91170',
      '1 1 727 232 9117',
      '+7272329117', // +7 is Russia
      '+44 20 7946 0958',
      '011 44 20 7946 0958',
      'call 727 232 9117',
      '727-232-9117 ext 5',
      '1-800-FLOWERS',
      '7272329117'.repeat(4),
    ];
    for (const typed of refused) assert.equal(normalizeNanpPhone(typed), null, typed);
  });
});
