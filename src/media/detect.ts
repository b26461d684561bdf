import { open } from 'node:fs/promises';
import { fileTypeFromFile } from 'file-type';

type MediaKind = 'audio' | 'image';

interface MediaType {
  /** The extension Hopper gives the stored file, whatever the client called it. */
  readonly ext: string;
  readonly mime: string;
  readonly kind: MediaKind;
  /** How the format is named in messages. */
  readonly label: string;
}

/**
 * The formats Hopper keeps, keyed by the extension `file-type` reports. Audio is the formats
 * voicemail providers play; WAV is reported as `audio/wav` (the registered name, over the older
 * `audio/x-wav`) and M4A as `audio/mp4` (over `file-type`'s `audio/x-m4a`). Images exist for
 * non-audio collections. Anything else is refused, so the public URL only ever serves these.
 */
const ACCEPTED: Record<string, MediaType> = {
  wav: { ext: 'wav', mime: 'audio/wav', kind: 'audio', label: 'WAV' },
  mp3: { ext: 'mp3', mime: 'audio/mpeg', kind: 'audio', label: 'MP3' },
  m4a: { ext: 'm4a', mime: 'audio/mp4', kind: 'audio', label: 'M4A' },
  ogg: { ext: 'ogg', mime: 'audio/ogg', kind: 'audio', label: 'OGG' },
  opus: { ext: 'opus', mime: 'audio/ogg', kind: 'audio', label: 'OGG' },
  png: { ext: 'png', mime: 'image/png', kind: 'image', label: 'PNG' },
  jpg: { ext: 'jpg', mime: 'image/jpeg', kind: 'image', label: 'JPEG' },
  gif: { ext: 'gif', mime: 'image/gif', kind: 'image', label: 'GIF' },
  webp: { ext: 'webp', mime: 'image/webp', kind: 'image', label: 'WebP' },
};

/** The types a stored file can have: those of the formats kept, and no others. */
export const STORED_TYPES: readonly string[] = [...new Set(Object.values(ACCEPTED).map((type) => type.mime))];

/** The collection a media item lands in when the client names none; it takes audio only. */
export const AUDIO_COLLECTION = 'audio';

const labels = (kind: MediaKind) => [
  ...new Set(
    Object.values(ACCEPTED)
      .filter((t) => t.kind === kind)
      .map((t) => t.label),
  ),
];
const AUDIO_FORMATS = labels('audio').join(', ');
const IMAGE_FORMATS = labels('image').join(', ');

/** The type of a file judged from its bytes alone (the client's name and Content-Type are not trusted). */
export async function detectMediaType(path: string): Promise<MediaType | undefined> {
  const found = await fileTypeFromFile(path);
  if (found?.ext === 'wav' && !(await wholeWav(path))) return undefined;
  return found ? ACCEPTED[found.ext] : undefined;
}

/**
 * A WAV whose header adds up: a `fmt ` chunk, then a `data` chunk with samples, every chunk
 * within the file. `file-type` looks at the first 12 bytes only, so a download cut short (a
 * header announcing more audio than follows) would otherwise pass for audio a provider cannot play.
 * A streamed recording's `data` length of 0 or 0xFFFFFFFF means "to the end", and is accepted.
 */
async function wholeWav(path: string): Promise<boolean> {
  const file = await open(path, 'r');
  try {
    const size = (await file.stat()).size;
    let fmt = false;
    for (let offset = 12, chunks = 0; offset + 8 <= size && chunks < 64; chunks++) {
      const header = Buffer.alloc(8);
      await file.read(header, 0, 8, offset);
      const id = header.toString('latin1', 0, 4);
      const length = header.readUInt32LE(4);
      if (id === 'data') {
        const streamed = length === 0 || length === 0xffffffff;
        const available = size - offset - 8;
        return fmt && available > 0 && (streamed || length <= available);
      }
      if (offset + 8 + length > size) return false;
      if (id === 'fmt ') fmt = length >= 16;
      offset += 8 + length + (length % 2);
    }
    return false;
  } finally {
    await file.close();
  }
}

/** Why `type` may not go into `collection`, or undefined when it may. */
export function collectionRefusal(collection: string, type: MediaType | undefined): string | undefined {
  if (collection === AUDIO_COLLECTION) {
    if (type?.kind === 'audio') return undefined;
    return `must be an audio file (${AUDIO_FORMATS})${type ? `, not ${type.mime}` : '; its bytes are not one of these formats'}`;
  }
  if (type) return undefined;
  return `must be an audio file (${AUDIO_FORMATS}) or an image (${IMAGE_FORMATS}); its bytes are not one of these formats`;
}
