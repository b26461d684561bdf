/**
 * The providers' callbacks (SendGrid, SES, Postmark, Slybroadcast, Drop Cowboy) live under
 * `/v3/callbacks/…`: a namespace of their own, apart from the API's `/v3/webhooks/{id}` endpoints,
 * so that no path of the document can be read as another (Redocly's no-ambiguous-paths). The paths
 * first published under `/v3/webhooks/…` keep working for providers already configured with
 * them; they are left out of the document.
 */
export function callbackPaths(path: string): { url: string; legacy: boolean }[] {
  return [
    { url: `/callbacks/${path}`, legacy: false },
    { url: `/webhooks/${path}`, legacy: true },
  ];
}

/** The document's tag of the provider callbacks. */
export const CALLBACK_TAGS = ['Provider callbacks'];
