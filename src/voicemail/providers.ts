import type { Config } from '../config.ts';
import type { OutcomeReason } from '../db/schema.ts';

/** Every voicemail provider Hopper knows by name. */
export const VOICEMAIL_PROVIDERS = ['Slybroadcast', 'Sandbox', 'Drop Cowboy'] as const;
export type VoicemailProvider = (typeof VOICEMAIL_PROVIDERS)[number];

/** The audio formats every provider plays, by the media type Hopper detected from the bytes. */
const DROP_AUDIO_TYPES = { 'audio/wav': 'wav', 'audio/mpeg': 'mp3', 'audio/mp4': 'm4a' } as const;
export type DropAudioType = (typeof DROP_AUDIO_TYPES)[keyof typeof DROP_AUDIO_TYPES];
/** Providers refuse shorter audio (Slybroadcast: "longer than 5 s"). */
export const MIN_DROP_SECONDS = 5;

/** The types `dropAudioType` knows, every one `audio/…`: a new drop's insert checks its media item against them (drops.ts). */
export const DROP_AUDIO_MIME_TYPES: readonly string[] = Object.keys(DROP_AUDIO_TYPES);

export function dropAudioType(mimeType: string): DropAudioType | undefined {
  return DROP_AUDIO_TYPES[mimeType as keyof typeof DROP_AUDIO_TYPES];
}

/** One ringless voicemail, addressed to one number. */
export interface DropSubmission {
  deliveryId: number;
  /** Ten NANP digits. */
  phone: string;
  /** Ten NANP digits: the drop's callback number. */
  callerId: string;
  /** The drop's media item (providers with a media library upload it once, by this id). */
  mediaId: number;
  /** The media item's public `full_url`: the provider downloads the audio from it. */
  audioUrl: string;
  audioType: DropAudioType;
}

/**
 * What a provider said to one submission: its reference for the drop (the key its dispositions
 * carry), or why it refused — `retryable` when trying again later may work (the provider was
 * down or busy), not when the drop itself was refused.
 */
export type SubmitResult =
  | { ok: true; reference: string | undefined }
  | {
      ok: false;
      retryable: boolean;
      reason: string;
      /** The refusal in Hopper's classification with the provider's code and words (docs/outcomes.md). */
      outcome?: SubmitOutcome;
      /** The provider asked not to be called again before this long (a 429's Retry-After). */
      retryAfterMs?: number;
    };

/** Why a provider refused a submission (OutcomeReason; `suppress` for a number it says is dead). */
export type SubmitOutcome = OutcomeReason;

/**
 * A voicemail provider: submits drops one at a time. Outcomes come back later, by the provider's
 * callback (each provider's module reads its format into `ProviderOutcome`s, dispositions.ts
 * records them as delivery events), or for the Sandbox from a delayed job.
 */
export interface VoicemailAdapter {
  readonly provider: VoicemailProvider;
  submit(drop: DropSubmission): Promise<SubmitResult>;
}

/**
 * The providers this server can send through: the Sandbox unless SANDBOX_VOICEMAIL=false, and a
 * real provider once its credentials are configured.
 */
export function configuredProviders(config: Config): VoicemailProvider[] {
  const providers: VoicemailProvider[] = [];
  if (config.slybroadcast) providers.push('Slybroadcast');
  if (config.dropCowboy) providers.push('Drop Cowboy');
  if (config.sandboxVoicemail) providers.push('Sandbox');
  return providers;
}

/** Why a request to a provider failed before any reply: the network error's code, never the request. */
export function describeFetchError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  if (error.name === 'TimeoutError' || error.name === 'AbortError') return 'no reply in time';
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message ?? error.message;
}
