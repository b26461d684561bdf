import sanitizeHtml from 'sanitize-html';

/**
 * The email-safe HTML allow-list, shared by every stored piece of email HTML (signatures, the
 * templated-message library, templated emails). Email layouts are tables with inline styles and
 * images, so those stay; anything that runs code or leaves the message (scripts, event handlers,
 * javascript: URLs, forms, frames, embedded objects, <style> blocks) goes. Text inside a removed
 * element is kept, except for script-like elements whose text is code.
 */

// Inline CSS is kept property by property; a value may not smuggle code or a script URL in.
const SAFE_CSS_VALUE = /^(?!.*(?:expression\s*\(|javascript:|vbscript:|-moz-binding|behavior\s*:|url\s*\(\s*['"]?\s*(?!https?:|cid:))).*$/i;
const CSS_PROPERTIES = [
  'background',
  'background-color',
  'background-image',
  'background-position',
  'background-repeat',
  'background-size',
  'border',
  'border-bottom',
  'border-collapse',
  'border-color',
  'border-left',
  'border-radius',
  'border-right',
  'border-spacing',
  'border-style',
  'border-top',
  'border-width',
  'color',
  'direction',
  'display',
  'font',
  'font-family',
  'font-size',
  'font-style',
  'font-weight',
  'height',
  'letter-spacing',
  'line-height',
  'list-style',
  'list-style-type',
  'margin',
  'margin-bottom',
  'margin-left',
  'margin-right',
  'margin-top',
  'max-height',
  'max-width',
  'min-height',
  'min-width',
  'mso-line-height-rule',
  'mso-table-lspace',
  'mso-table-rspace',
  'opacity',
  'overflow',
  'padding',
  'padding-bottom',
  'padding-left',
  'padding-right',
  'padding-top',
  'table-layout',
  'text-align',
  'text-decoration',
  'text-indent',
  'text-transform',
  'vertical-align',
  'white-space',
  'width',
  'word-break',
  'word-wrap',
];

// Presentational attributes email clients still honour on tables and images.
const LAYOUT_ATTRIBUTES = ['align', 'valign', 'width', 'height', 'bgcolor', 'border', 'cellpadding', 'cellspacing'];

const OPTIONS: sanitizeHtml.IOptions = {
  allowedTags: [...sanitizeHtml.defaults.allowedTags, 'img', 'center', 'font', 'del', 'ins', 'big'],
  allowedAttributes: {
    '*': ['style', 'class', 'dir', 'lang', 'title', 'align'],
    a: ['href', 'name', 'target', 'rel'],
    img: ['src', 'alt', 'width', 'height', 'border'],
    font: ['color', 'face', 'size'],
    table: [...LAYOUT_ATTRIBUTES, 'role', 'summary'],
    td: [...LAYOUT_ATTRIBUTES, 'colspan', 'rowspan', 'nowrap'],
    th: [...LAYOUT_ATTRIBUTES, 'colspan', 'rowspan', 'nowrap', 'scope'],
    tr: LAYOUT_ATTRIBUTES,
    tbody: LAYOUT_ATTRIBUTES,
    thead: LAYOUT_ATTRIBUTES,
    tfoot: LAYOUT_ATTRIBUTES,
    col: [...LAYOUT_ATTRIBUTES, 'span'],
    colgroup: [...LAYOUT_ATTRIBUTES, 'span'],
  },
  allowedStyles: { '*': Object.fromEntries(CSS_PROPERTIES.map((property) => [property, [SAFE_CSS_VALUE]])) },
  allowedSchemes: ['http', 'https', 'mailto', 'tel'],
  // Inline images (data:) and attachments referenced by Content-ID (cid:) are images only.
  allowedSchemesByTag: { img: ['http', 'https', 'cid', 'data'] },
  allowProtocolRelative: false,
  nonTextTags: ['script', 'style', 'textarea', 'option', 'noscript', 'iframe', 'object', 'embed', 'title', 'head'],
};

/** Email HTML with everything outside the allow-list removed. Merge tags like {{first_name}} pass through. */
export function sanitizeEmailHtml(html: string): string {
  return sanitizeHtml(html, OPTIONS).trim();
}

/** True when HTML renders no text and no image: what is left of a body that was all unsafe markup. */
export function isBlankHtml(html: string): boolean {
  return !/<img\b/i.test(html) && sanitizeHtml(html, { allowedTags: [], allowedAttributes: {} }).trim() === '';
}
