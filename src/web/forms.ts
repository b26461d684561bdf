import { DomainError, type FieldErrors } from '../errors.ts';

/**
 * The form kit, as the GOV.UK Design System does forms: every field has a label; a refused form
 * comes back with an error summary at the top linking to each field, the error beside the field
 * (`aria-describedby`, `aria-invalid`), and what the user typed kept. The words are the API's
 * validation messages ("must be an email address"), each opened with the field's label.
 *
 * The views: `partials/error-summary` (the summary), `partials/field` (one labelled input or
 * textarea) and `partials/checkboxes` (a fieldset of checkboxes). A page passes them a `Form`.
 */
interface FieldError {
  /** The field's name, and the id of its input (the summary's link goes to `#name`). */
  field: string;
  message: string;
}

export interface Form {
  /** What the user sent (kept on a refused form), by field name; a checkbox group's values as an array. */
  values: Record<string, string | string[]>;
  errors: FieldError[];
}

export function emptyForm(values: Record<string, string | string[]> = {}): Form {
  return { values, errors: [] };
}

/** The text fields of a posted form body (urlencoded), trimmed; anything else is left out. */
export function formValues(body: unknown, names: readonly string[]): Record<string, string> {
  const values: Record<string, string> = {};
  for (const name of names) {
    const value = (body as Record<string, unknown> | undefined)?.[name];
    values[name] = typeof value === 'string' ? value.trim() : '';
  }
  return values;
}

/**
 * The errors of a refused form, in the order of `labels` (the page's order of fields): each
 * reason of the API's as a sentence opened by the field's label. A field the page does not show
 * (`recipients.0.value`) is named under its closest shown field (`recipients`), else under the
 * first field.
 */
function fieldErrors(errors: FieldErrors, labels: Record<string, string>): FieldError[] {
  const names = Object.keys(labels);
  const found: FieldError[] = [];
  for (const [path, reasons] of Object.entries(errors)) {
    const field = names.find((name) => path === name || path.startsWith(`${name}.`)) ?? names[0] ?? path;
    const label = labels[field] ?? path;
    for (const reason of reasons) found.push({ field, message: `${label} ${reason.replace(/\.$/, '')}.` });
  }
  return found.sort((a, b) => names.indexOf(a.field) - names.indexOf(b.field));
}

/**
 * Runs a form's action: the refused form when it throws a validation (or conflict naming fields)
 * error, with the values kept; any other error goes on to the error page.
 */
export async function submitForm<T>(
  values: Record<string, string | string[]>,
  labels: Record<string, string>,
  action: () => Promise<T>,
): Promise<{ ok: true; result: T } | { ok: false; form: Form }> {
  try {
    return { ok: true, result: await action() };
  } catch (error) {
    if (!(error instanceof DomainError) || !error.errors || (error.code !== 'validation' && error.code !== 'conflict')) throw error;
    return { ok: false, form: { values, errors: fieldErrors(error.errors, labels) } };
  }
}
