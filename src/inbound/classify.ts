import type { ParsedMail } from 'mailparser';

/**
 * What an inbound message is, read from its parsed form (mailparser): a delivery status
 * notification (RFC 3464, and the common non-standard bounces whose text names a status), an
 * abuse report (ARF, RFC 5965), an automatic reply (RFC 3834 and the usual vendor headers), or a
 * person's reply.
 */
export type InboundKind =
  | { kind: 'bounce'; permanent: boolean; status: string; detail: string }
  | { kind: 'complaint'; detail: string }
  | { kind: 'reply'; autoReply: boolean };

const OUT_OF_OFFICE =
  /^\s*(auto(matic)?[\s_-]*(reply|response|answer)|out\s+of\s+(the\s+)?office|away\s+from|on\s+vacation|vacation\s+reply|abwesenheit|r[ée]ponse\s+automatique|fuera\s+de\s+la\s+oficina)|\bout of office\b|\bautoreply\b/i;

export function classify(mail: ParsedMail): InboundKind {
  const contentType = mail.headers.get('content-type') as { value?: string; params?: Record<string, string> } | undefined;
  const reportType = contentType?.value === 'multipart/report' ? contentType.params?.['report-type']?.toLowerCase() : undefined;
  const parts = mail.attachments ?? [];

  if (reportType === 'feedback-report' || parts.some((p) => p.contentType === 'message/feedback-report')) {
    const feedback = parts.find((p) => p.contentType === 'message/feedback-report')?.content.toString('utf8') ?? mail.text ?? '';
    const type = /^Feedback-Type:\s*(\S+)/im.exec(feedback)?.[1] ?? 'abuse';
    return { kind: 'complaint', detail: `ARF ${type}` };
  }

  const bodies = [
    mail.text ?? '',
    ...parts.filter((p) => /delivery-status|text\//.test(p.contentType)).map((p) => p.content.toString('utf8')),
  ];
  const isDsn = reportType === 'delivery-status' || parts.some((p) => p.contentType === 'message/delivery-status');
  const fromDaemon = /mailer-daemon|postmaster/i.test(mail.from?.value?.[0]?.address ?? '');
  if (isDsn || fromDaemon) {
    for (const body of bodies) {
      const status = /^Status:\s*([245])\.(\d{1,3})\.(\d{1,3})/im.exec(body) ?? /\b([45])\.(\d{1,3})\.(\d{1,3})\b/.exec(body);
      if (!status) continue;
      if (status[1] === '2') break; // a success notice: nothing to record
      const diagnostic = /^Diagnostic-Code:\s*(.+)$/im.exec(body)?.[1]?.trim();
      const code = `${status[1]}.${status[2]}.${status[3]}`;
      return { kind: 'bounce', permanent: status[1] === '5', status: code, detail: diagnostic ? `${code} ${diagnostic}` : code };
    }
    if (isDsn) return { kind: 'bounce', permanent: false, status: '', detail: 'delivery status notification without a status' };
  }

  return { kind: 'reply', autoReply: isAutomatic(mail) };
}

/** RFC 3834 `Auto-Submitted` other than `no`, `Precedence: bulk|junk|auto_reply`, `X-Autoreply`, `X-Autorespond`, out-of-office subjects. */
function isAutomatic(mail: ParsedMail): boolean {
  const header = (name: string) => {
    const value = mail.headers.get(name);
    return value === undefined ? undefined : String(typeof value === 'object' && value && 'value' in value ? value.value : value);
  };
  const autoSubmitted = header('auto-submitted')?.trim().toLowerCase();
  if (autoSubmitted && autoSubmitted !== 'no') return true;
  if (/^(bulk|junk|auto_reply)$/i.test(header('precedence')?.trim() ?? '')) return true;
  if (header('x-autoreply') !== undefined || header('x-autorespond') !== undefined || header('x-autoresponse') !== undefined) return true;
  return OUT_OF_OFFICE.test(mail.subject ?? '');
}
