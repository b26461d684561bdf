import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { isBlankHtml, sanitizeEmailHtml } from '../../src/email/email-html.ts';

describe('sanitizeEmailHtml', () => {
  test('keeps email layout: tables, inline styles, images, links and merge tags', () => {
    const layout =
      '<table width="600" cellpadding="0" cellspacing="0" border="0" align="center" style="border-collapse:collapse;width:600px">' +
      '<tr><td align="left" valign="top" bgcolor="#ffffff" style="padding:16px;font-family:Arial, sans-serif;color:#333">' +
      '<img src="https://cdn.example.com/logo.png" alt="Logo" width="120" height="40" style="display:block">' +
      '<p>Hi {{first_name}}, see <a href="https://example.com/?n={{first_name}}" target="_blank">this</a>.</p>' +
      '<img src="cid:logo@acme"><a href="mailto:jane@example.com">mail</a> <a href="tel:+17272329117">call</a>' +
      '</td></tr></table>';
    assert.equal(sanitizeEmailHtml(layout), layout.replace(/(<img[^>]*?)>/g, '$1 />'));
  });

  test('removes scripts, handlers, script URLs, forms, frames and style blocks', () => {
    const cases: [string, string][] = [
      ['<p>a<script>alert(1)</script></p>', '<p>a</p>'],
      ['<p onclick="x()" onmouseover="y()">a</p>', '<p>a</p>'],
      ['<a href="javascript:alert(1)">a</a>', '<a>a</a>'],
      ['<a href="jav&#x61;script:alert(1)">a</a>', '<a>a</a>'],
      ['<a href="//evil.test/x">a</a>', '<a>a</a>'],
      ['<img src="javascript:alert(1)">', '<img />'],
      ['<img src="x" onerror="alert(1)">', '<img src="x" />'],
      ['<iframe src="https://evil.test">fallback</iframe><p>b</p>', '<p>b</p>'],
      ['<form action="https://evil.test"><input name="card"><button>Pay</button></form>', 'Pay'],
      ['<style>p{color:red}</style><p>c</p>', '<p>c</p>'],
      ['<object data="x.swf">o</object><embed src="x.swf">', ''],
      ['<p style="color:red;position:fixed;width:expression(alert(1))">d</p>', '<p style="color:red">d</p>'],
      ['<p style="background:url(javascript:alert(1));margin:0">e</p>', '<p style="margin:0">e</p>'],
      [
        '<p style="background-image:url(https://cdn.example.com/bg.png)">f</p>',
        '<p style="background-image:url(https://cdn.example.com/bg.png)">f</p>',
      ],
      ['<!--[if mso]><p>mso</p><![endif]--><p>g</p>', '<p>g</p>'],
    ];
    for (const [dirty, clean] of cases) assert.equal(sanitizeEmailHtml(dirty), clean, dirty);
  });

  test('isBlankHtml: nothing to show once sanitised', () => {
    assert.equal(isBlankHtml(sanitizeEmailHtml('<script>x</script>')), true);
    assert.equal(isBlankHtml('<p> </p><br>'), true);
    assert.equal(isBlankHtml('<img src="https://cdn.example.com/logo.png">'), false);
    assert.equal(isBlankHtml('<p>Jane</p>'), false);
  });
});
